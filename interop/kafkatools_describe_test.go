package interop

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaTopicsDescribePaged: Kafka 4.4's kafka-topics --describe reads a topic
// of 2,000 partitions through DescribeTopicPartitions (its ELR columns are
// "N/A" when the client falls back to Metadata), 300 partitions a page (seven
// requests), every partition once and in order; with an ACL authorizer, a user
// sees only the topics it may DESCRIBE.
func TestKafkaTopicsDescribePaged(t *testing.T) {
	kafkatools.Require(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startNodeInProcess(t, ctx, dir, func(cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=alice,password=alice-secret]"}
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	})
	bs := []string{"--bootstrap-server", n.KafkaAddr()}
	properties := func(user string) string {
		path := filepath.Join(dir, user+".properties")
		body := fmt.Sprintf("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s-secret\";\n", user, user)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	admin, alice := properties("admin"), properties("alice")
	tool := func(props, name string, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, name, append(append([]string{"--command-config", props}, args...), bs...)...)
	}
	tool(admin, "kafka-topics", "--create", "--topic", "big", "--partitions", "2000", "--replication-factor", "1")
	tool(admin, "kafka-topics", "--create", "--topic", "hidden", "--partitions", "1", "--replication-factor", "1")

	before := describeTopicPartitionsRequests(t, n.HTTPAddr())
	out := tool(admin, "kafka-topics", "--describe", "--topic", "big", "--partition-size-limit-per-response", "300")
	if got := describeTopicPartitionsRequests(t, n.HTTPAddr()) - before; got != 7 {
		t.Errorf("%d DescribeTopicPartitions requests for 2,000 partitions 300 a page, want 7", got)
	}
	expectContains(t, out, "PartitionCount: 2000")
	rows := regexp.MustCompile(`(?m)^\tTopic: big\tPartition: (\d+)\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: $`).FindAllStringSubmatch(out, -1)
	if len(rows) != 2000 {
		t.Fatalf("describe lists %d partitions as DescribeTopicPartitions answers them, want 2000:\n%.2000s", len(rows), out)
	}
	for i, r := range rows {
		if r[1] != strconv.Itoa(i) {
			t.Fatalf("row %d is partition %s", i, r[1])
		}
	}

	tool(admin, "kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Describe",
		"--operation", "DescribeConfigs", "--topic", "big")
	out = tool(alice, "kafka-topics", "--describe", "--partition-size-limit-per-response", "700")
	if strings.Count(out, "\tTopic: big\tPartition: ") != 2000 || strings.Contains(out, "hidden") {
		t.Errorf("alice describes every topic: %d partitions of big, hidden listed: %t; want 2000 and not listed",
			strings.Count(out, "\tTopic: big\tPartition: "), strings.Contains(out, "hidden"))
	}
	res, err := kafkatools.Run(ctx, "kafka-topics", append([]string{"--command-config", alice, "--describe", "--topic", "hidden"}, bs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("alice described hidden:\n%s", res.Stdout)
	}
	// As Kafka 4.4 answers: a topic the user may not DESCRIBE does not exist.
	expectContains(t, res.Stdout+res.Stderr, "Topic 'hidden' does not exist as expected")
}

// describeTopicPartitionsRequests is how many DescribeTopicPartitions requests
// the node has served, from its /metrics.
func describeTopicPartitionsRequests(t *testing.T, httpAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	const name = `strata_request_duration_seconds_count{api="DescribeTopicPartitions"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s%s: %v", name, v, err)
			}
			return n
		}
	}
	return 0
}
