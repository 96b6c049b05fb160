package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaToolsReplaceDeadBroker replaces a dead broker by hand with Kafka
// 4.4's tools (docs/cluster.md, "Replacing a dead broker"): broker 4 is killed
// for good, a new broker 5 joins, kafka-reassign-partitions moves broker 4's
// replica onto it, and kafka-cluster unregister removes broker 4. Every record
// written before is read back afterwards.
func TestKafkaToolsReplaceDeadBroker(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	dead := c.AddBroker()
	c.CreateTopic("lost", [][]int32{{4, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	const written = 300
	produceNumbered(t, c, "lost", written)
	dead.Kill()
	// As an operator would, replace the broker once the cluster has fenced it:
	// while Metadata still names it, the tool's describeReplicaLogDirs call is
	// bound to it and waits out the AdminClient's timeout (against Kafka too,
	// for its session timeout).
	testcluster.Eventually(t, 30*time.Second, "broker 4 out of Metadata (fenced)", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		brokers, err := c.Admin().ListBrokers(ctx)
		if err != nil {
			return err
		}
		if ids := brokers.NodeIDs(); slices.Contains(ids, 4) {
			return fmt.Errorf("Metadata names brokers %v", ids)
		}
		return nil
	})
	c.AddBroker()
	bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap()[:3], ",")}

	plan := filepath.Join(t.TempDir(), "replace.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"lost","partition":0,"replicas":[5,1,2]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kafkatools.MustRun(t, "kafka-reassign-partitions", append(bs, "--execute", "--reassignment-json-file", plan)...)
	expectContains(t, out, "Successfully started partition reassignment for lost-0")
	testcluster.Eventually(t, 60*time.Second, "--verify to report the move complete", func() error {
		out := kafkatools.MustRun(t, "kafka-reassign-partitions", append(bs, "--verify", "--reassignment-json-file", plan)...)
		if !strings.Contains(out, "Reassignment of partition lost-0 is completed.") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	out = kafkatools.MustRun(t, "kafka-cluster", "unregister", "--id", "4", bs[0], bs[1])
	expectContains(t, out, "Broker 4 is no longer registered.")
	c.WaitPartition("lost", 0, 30*time.Second, "replicas [5 1 2], all in sync", func(s testcluster.PartitionState) error {
		if !slices.Equal(s.Replicas, []int32{5, 1, 2}) || len(s.ISR) != 3 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})

	readBack(t, c, "lost", written)
}
