package interop

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaTools drives one broker with Kafka 4.4's own command-line tools, as an
// operator of Kafka would, and checks each answer against what the broker holds
// (read back with franz-go, a second client).
func TestKafkaTools(t *testing.T) {
	_, bs, adm := startToolsTarget(t)
	// run runs a tool with the broker's address last, where both the option-style
	// tools and kafka-cluster's subcommands take it.
	run := func(t *testing.T, tool string, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, tool, append(args, bs...)...)
	}
	ctx := context.Background()

	t.Run("kafka-topics", func(t *testing.T) {
		out := run(t, "kafka-topics", "--create", "--topic", "tools", "--partitions", "3", "--replication-factor", "1",
			"--config", "retention.ms=3600000")
		expectContains(t, out, "Created topic tools.")
		expectContains(t, run(t, "kafka-topics", "--list"), "tools")
		run(t, "kafka-topics", "--alter", "--topic", "tools", "--partitions", "4")
		out = run(t, "kafka-topics", "--describe", "--topic", "tools")
		expectContains(t, out, "PartitionCount: 4")
		expectContains(t, out, "retention.ms=3600000")
		if n := strings.Count(out, "Leader: 1"); n != 4 {
			t.Errorf("describe shows %d partitions led by node 1, want 4:\n%s", n, out)
		}
		details, err := adm.ListTopics(ctx, "tools")
		if err != nil {
			t.Fatal(err)
		}
		if got := len(details["tools"].Partitions); got != 4 {
			t.Errorf("franz-go sees %d partitions, want 4", got)
		}
	})

	t.Run("kafka-configs", func(t *testing.T) {
		out := run(t, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "tools",
			"--add-config", "max.message.bytes=2000000")
		expectContains(t, out, "Completed updating config for topic tools.")
		out = run(t, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "tools")
		expectContains(t, out, "max.message.bytes=2000000")
		rc, err := adm.DescribeTopicConfigs(ctx, "tools")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := rc.On("tools", nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range cfg.Configs {
			found = found || (c.Key == "max.message.bytes" && c.MaybeValue() == "2000000")
		}
		if !found {
			t.Errorf("franz-go does not see max.message.bytes=2000000: %+v", cfg.Configs)
		}
		run(t, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "tools", "--delete-config", "max.message.bytes")
		if out := run(t, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "tools"); strings.Contains(out, "max.message.bytes") {
			t.Errorf("max.message.bytes still set after --delete-config:\n%s", out)
		}
		expectContains(t, run(t, "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1"), "configs for broker 1")
	})

	t.Run("console-producer-consumer-groups", func(t *testing.T) {
		kafkatools.MustRunInput(t, "k1:v1\nk2:v2\nk1:v3\n", "kafka-console-producer", append(bs, "--topic", "tools",
			"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)
		out := run(t, "kafka-console-consumer", "--topic", "tools", "--from-beginning", "--max-messages", "3",
			"--group", "tools-group", "--formatter-property", "print.key=true", "--timeout-ms", "60000")
		for _, kv := range []string{"k1\tv1", "k2\tv2", "k1\tv3"} {
			expectContains(t, out, kv)
		}
		if strings.Index(out, "k1\tv1") > strings.Index(out, "k1\tv3") {
			t.Errorf("per-key order lost:\n%s", out)
		}
		expectContains(t, run(t, "kafka-consumer-groups", "--list"), "tools-group")
		out = run(t, "kafka-consumer-groups", "--describe", "--group", "tools-group")
		// Every partition's committed offset equals its end: LAG 0 on each row.
		rows := regexp.MustCompile(`(?m)^tools-group\s+tools\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindAllStringSubmatch(out, -1)
		if len(rows) != 4 {
			t.Fatalf("describe lists %d partitions, want 4:\n%s", len(rows), out)
		}
		var committed int
		for _, r := range rows {
			if r[2] != r[3] || r[4] != "0" {
				t.Errorf("partition %s: current %s, end %s, lag %s; want no lag", r[1], r[2], r[3], r[4])
			}
			n, _ := strconv.Atoi(r[2])
			committed += n
		}
		if committed != 3 {
			t.Errorf("committed offsets add up to %d, want 3 records", committed)
		}
		expectContains(t, run(t, "kafka-groups", "--list"), "tools-group")
	})

	t.Run("kafka-get-offsets-and-delete-records", func(t *testing.T) {
		ends, err := adm.ListEndOffsets(ctx, "tools")
		if err != nil {
			t.Fatal(err)
		}
		var p int32 = -1
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && p < 0 {
				p = o.Partition
			}
		})
		if p < 0 {
			t.Fatal("no partition of tools holds a record")
		}
		out := run(t, "kafka-get-offsets", "--topic", "tools")
		ends.Each(func(o kadm.ListedOffset) {
			expectContains(t, out, "tools:"+strconv.Itoa(int(o.Partition))+":"+strconv.Itoa(int(o.Offset)))
		})
		file := filepath.Join(t.TempDir(), "delete.json")
		body := `{"version":1,"partitions":[{"topic":"tools","partition":` + strconv.Itoa(int(p)) + `,"offset":1}]}`
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out = run(t, "kafka-delete-records", "--offset-json-file", file)
		expectContains(t, out, "partition: tools-"+strconv.Itoa(int(p))+"\tlow_watermark: 1")
		starts, err := adm.ListStartOffsets(ctx, "tools")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("tools", p); o.Offset != 1 {
			t.Errorf("log start offset of tools-%d is %d after delete-records, want 1", p, o.Offset)
		}
	})

	t.Run("cluster-tools", func(t *testing.T) {
		meta, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		expectContains(t, run(t, "kafka-cluster", "cluster-id"), "Cluster ID: "+meta.Cluster)
		expectContains(t, run(t, "kafka-broker-api-versions"), "Produce(0):")
		run(t, "kafka-leader-election", "--election-type", "preferred", "--all-topic-partitions")
	})

	t.Run("kafka-topics-delete", func(t *testing.T) {
		run(t, "kafka-topics", "--delete", "--topic", "tools")
		if out := run(t, "kafka-topics", "--list"); strings.Contains(out, "tools") {
			t.Errorf("tools still listed after --delete:\n%s", out)
		}
	})
}

// startToolsTarget starts one broker for Kafka's tools (skipping the test when they
// cannot run) and returns it, the tools' --bootstrap-server option and a franz-go
// admin client that reads back what the tools did.
func startToolsTarget(t *testing.T) (*target, []string, *kadm.Client) {
	t.Helper()
	kafkatools.Require(t)
	tgt := startTarget(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return tgt, []string{"--bootstrap-server", tgt.bootstrap}, kadm.NewClient(cl)
}

func expectContains(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
