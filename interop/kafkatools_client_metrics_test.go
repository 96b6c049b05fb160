package interop

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaClientMetrics: Kafka 4.4's kafka-client-metrics creates, lists,
// describes and deletes a client metrics subscription (KIP-714) on Strata, and
// a Java producer (enable.metrics.push is on by default) matched by it pushes
// its metrics, which show up on /metrics labelled with its client id.
func TestKafkaClientMetrics(t *testing.T) {
	kafkatools.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startNodeInProcess(t, ctx, t.TempDir(), func(*config.Config) {})
	bs := []string{"--bootstrap-server", n.KafkaAddr()}
	tool := func(name string, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, name, append(args, bs...)...)
	}
	expectContains(t, tool("kafka-client-metrics", "--alter", "--name", "x", "--metrics", "org.apache.kafka.producer.",
		"--interval", "1000", "--match", "client_software_name=apache-kafka-java"), "Altered client metrics config for x.")
	if out := tool("kafka-client-metrics", "--list"); strings.TrimSpace(out) != "x" {
		t.Errorf("--list printed %q, want x", out)
	}
	out := tool("kafka-client-metrics", "--describe", "--name", "x")
	for _, want := range []string{"Client metrics configs for x are:", "interval.ms=1000", "match=client_software_name=apache-kafka-java",
		"metrics=org.apache.kafka.producer."} {
		expectContains(t, out, want)
	}

	// 2,000 records at 1,000 a second: the producer pushes about every second.
	// Its closing push (with the final 2,000) is not always sent: one run in
	// four here ended on a push of 1,768. So the count is any of its pushes'.
	tool("kafka-producer-perf-test", "--topic", "cm", "--num-records", "2000", "--record-size", "100", "--throughput", "1000",
		"--command-property", "bootstrap.servers="+n.KafkaAddr(), "--command-property", "client.id=cm-producer")
	sent := regexp.MustCompile(`(?m)^strata_client_org_apache_kafka_producer_record_send_total\{client_id="cm-producer",client_instance_id="[A-Za-z0-9_-]{22}"\} (\d+)$`)
	testcluster.Eventually(t, time.Minute, "the producer's pushed record-send-total on /metrics", func() error {
		body, err := scrape(n.HTTPAddr())
		if err != nil {
			return err
		}
		m := sent.FindStringSubmatch(body)
		if m == nil {
			return fmt.Errorf("no series matches %s", sent)
		}
		if v, err := strconv.Atoi(m[1]); err != nil || v < 1 || v > 2000 {
			return fmt.Errorf("record_send_total %s, want 1 to 2000", m[1])
		}
		return nil
	})

	expectContains(t, tool("kafka-client-metrics", "--delete", "--name", "x"), "Deleted client metrics config for x.")
	if out := tool("kafka-client-metrics", "--list"); strings.TrimSpace(out) != "" {
		t.Errorf("--list after --delete printed %q", out)
	}
}

func scrape(httpAddr string) (string, error) {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
