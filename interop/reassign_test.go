package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaReassignPartitions moves a partition of a three-node Strata cluster
// onto broker-only nodes with Kafka 4.4's kafka-reassign-partitions, as an
// operator of Kafka would: --generate proposes a plan, --execute starts the
// move, --verify reports it complete, and a move onto a stopped broker is
// listed as in progress until --cancel restores the replicas, after which
// kafka-cluster unregister retires that broker. The records
// written before the move are all readable after it, and kafka-log-dirs
// reports the partition's size on each new replica.
func TestKafkaReassignPartitions(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("reassignment runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	// A paused broker stays registered for the whole session timeout, long
	// enough to be a target the tool accepts but which never catches up.
	c := testcluster.Start(t, 3, testcluster.WithFlags("--broker-session-timeout", "60s"))
	c.AddBroker()
	paused := c.AddBroker()
	// The tools' bootstrap leaves out the broker that will be paused: a paused
	// process still accepts connections and would hold requests until they
	// time out.
	bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap()[:4], ",")}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-reassign-partitions", append(bs, args...)...)
	}
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c.CreateTopic("moved", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	const written = 300
	produceNumbered(t, c, "moved", written)

	out := run(t, "--generate", "--topics-to-move-json-file", file("topics.json", `{"version":1,"topics":[{"topic":"moved"}]}`),
		"--broker-list", "2,3,4")
	expectContains(t, out, "Current partition replica assignment")
	expectContains(t, out, "Proposed partition reassignment configuration")

	plan := file("plan.json", `{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[4,2,3]}]}`)
	out = run(t, "--execute", "--reassignment-json-file", plan)
	expectContains(t, out, "Successfully started partition reassignment for moved-0")
	testcluster.Eventually(t, 60*time.Second, "--verify to report the move complete", func() error {
		out := run(t, "--verify", "--reassignment-json-file", plan)
		if !strings.Contains(out, "Reassignment of partition moved-0 is completed.") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	c.WaitPartition("moved", 0, 30*time.Second, "replicas [4 2 3]", func(s testcluster.PartitionState) error {
		if !slices.Equal(s.Replicas, []int32{4, 2, 3}) || s.Leader == 1 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	readBack(t, c, "moved", written)

	// kafka-log-dirs reports the partition's size on each of its new replicas.
	out = kafkatools.MustRun(t, "kafka-log-dirs", append(bs, "--describe", "--topic-list", "moved")...)
	sizes := regexp.MustCompile(`"partition":"moved-0","size":(\d+)`).FindAllStringSubmatch(out, -1)
	if len(sizes) != 3 {
		t.Errorf("kafka-log-dirs shows moved-0 on %d brokers, want 3:\n%s", len(sizes), out)
	}
	for _, m := range sizes {
		if m[1] == "0" {
			t.Errorf("kafka-log-dirs shows an empty replica of moved-0:\n%s", out)
		}
	}

	// A move onto a paused broker waits for it; --cancel restores the replicas.
	paused.Pause()
	stuck := file("stuck.json", `{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[5,2,3]}]}`)
	out = run(t, "--execute", "--reassignment-json-file", stuck)
	expectContains(t, out, "Successfully started partition reassignment for moved-0")
	out = run(t, "--list")
	expectContains(t, out, "moved-0: replicas: 5,2,3,4. adding: 5. removing: 4.")
	// The tool clears throttles on every broker after a cancel, and the paused
	// one cannot answer: keep them (there are none).
	out = run(t, "--cancel", "--preserve-throttles", "--reassignment-json-file", stuck)
	expectContains(t, out, "Successfully cancelled partition reassignment for: moved-0")
	expectContains(t, run(t, "--list"), "No partition reassignments found.")
	c.WaitPartition("moved", 0, 30*time.Second, "replicas [2 3 4] after the cancel", func(s testcluster.PartitionState) error {
		if !slices.Equal(s.Replicas, []int32{2, 3, 4}) {
			return fmt.Errorf("%v", s)
		}
		return nil
	})

	// The idle broker is retired: stopped, then unregistered with kafka-cluster.
	paused.Resume()
	paused.Stop()
	kafkatools.MustRun(t, "kafka-cluster", "unregister", "--id", "5", bs[0], bs[1])
	ctx, cancel := context.WithTimeout(context.Background(), kafkatools.DefaultTimeout)
	defer cancel()
	res, err := kafkatools.Run(ctx, "kafka-cluster", "unregister", "--id", "5", bs[0], bs[1])
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "BrokerIdNotRegistered") {
		t.Errorf("unregistering broker 5 twice: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// produceNumbered writes n records (values 0..n-1) to topic with acks=all.
func produceNumbered(t *testing.T, c *testcluster.Cluster, topic string, n int) {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Append(nil, i)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readBack reads topic from the start until it has n records, failing the
// test after 30s.
func readBack(t *testing.T, c *testcluster.Cluster, topic string, n int) {
	t.Helper()
	read := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer read.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < n; {
		fs := read.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", got, n, topic)
		}
		got += fs.NumRecords()
	}
}

// TestKafkaReassignThrottle runs a move under Kafka 4.4's
// kafka-reassign-partitions --execute --throttle: the tool sets
// leader/follower.replication.throttled.rate on every broker of the move and
// the topic's leader/follower.replication.throttled.replicas (the existing
// replicas and the new one), Strata takes them (IncrementalAlterConfigs) and
// throttles the move, and --verify, once the move is complete, clears them all.
func TestKafkaReassignThrottle(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("reassignment runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	c.AddBroker()
	bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap(), ",")}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-reassign-partitions", append(bs, args...)...)
	}
	c.CreateTopic("throttled", [][]int32{{1, 2, 3}}, nil)
	cl := c.Client(kgo.DefaultProduceTopic("throttled"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 16<<10)
	var recs []*kgo.Record
	for range 128 { // 2 MiB
		recs = append(recs, &kgo.Record{Value: value})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"throttled","partition":0,"replicas":[4,2,3]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := run(t, "--execute", "--reassignment-json-file", plan, "--throttle", "500000")
	t.Logf("kafka-reassign-partitions --execute --throttle 500000:\n%s", out)
	expectContains(t, out, "The inter-broker throttle limit was set to 500000 B/s")
	expectContains(t, out, "Successfully started partition reassignment for throttled-0")

	describe := func(args ...string) string {
		return kafkatools.MustRun(t, "kafka-configs", append(bs, append([]string{"--describe"}, args...)...)...)
	}
	for _, b := range []string{"1", "2", "3", "4"} {
		out := describe("--entity-type", "brokers", "--entity-name", b)
		expectContains(t, out, "leader.replication.throttled.rate=500000")
		expectContains(t, out, "follower.replication.throttled.rate=500000")
	}
	out = describe("--entity-type", "topics", "--entity-name", "throttled")
	t.Logf("kafka-configs --describe --entity-type topics --entity-name throttled:\n%s", out)
	for _, want := range []string{"leader.replication.throttled.replicas=0:1,0:2,0:3", "follower.replication.throttled.replicas=0:4"} {
		expectContains(t, out, want)
	}

	testcluster.Eventually(t, 2*time.Minute, "--verify to report the move complete", func() error {
		out := run(t, "--verify", "--reassignment-json-file", plan)
		if !strings.Contains(out, "Reassignment of partition throttled-0 is completed.") {
			return fmt.Errorf("%s", out)
		}
		expectContains(t, out, "Clearing broker-level throttles on brokers 1,2,3,4")
		expectContains(t, out, "Clearing topic-level throttles on topic throttled")
		t.Logf("kafka-reassign-partitions --verify:\n%s", out)
		return nil
	})
	took := time.Since(start)
	// 2 MiB at 500 kB/s: at least one second's worth and one fetch of 4 MiB may
	// pass at once, so only the logged figure tells how close it stayed.
	t.Logf("moved 2 MiB under a 500000 B/s throttle in %v (%.0f B/s, including the tools' start-up)", took.Round(time.Millisecond), float64(2<<20)/took.Seconds())
	for _, b := range []string{"1", "2", "3", "4"} {
		out := describe("--entity-type", "brokers", "--entity-name", b)
		if strings.Contains(out, "throttled.rate") {
			t.Errorf("broker %s keeps a throttle after --verify:\n%s", b, out)
		}
	}
	if out := describe("--entity-type", "topics", "--entity-name", "throttled"); strings.Contains(out, "throttled.replicas") {
		t.Errorf("the topic keeps its throttled replicas after --verify:\n%s", out)
	}
}
