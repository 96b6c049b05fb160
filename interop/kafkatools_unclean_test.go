package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaUncleanLeaderElection loses a partition's whole ISR and brings it
// back with Kafka 4.4's kafka-leader-election --election-type unclean, as an
// operator of Kafka would. Node 1 is the controller; brokers 2 and 3 hold the
// partition. Broker 3 stops cleanly (it leaves the ISR), broker 2 takes 50
// acks=all writes alone and is killed: the partition has no leader, and broker
// 3's return does not elect it (it is not in the ISR and the topic does not
// allow unclean election). The tool elects broker 3 (the ISR becomes [3], the
// leader epoch rises), produce works again, and when broker 2 returns it
// truncates the 50 writes only it held: once it leads again every replica
// serves the same 120 records, none of the lost ones. A second topic in the
// same state is elected by the controller itself once kafka-configs turns its
// unclean.leader.election.enable on.
func TestKafkaUncleanLeaderElection(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("unclean election runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 1)
	b2, b3 := c.AddBroker(), c.AddBroker()
	const topic, auto = "unclean", "unclean-auto"
	c.CreateTopic(topic, [][]int32{{2, 3}}, nil)
	c.CreateTopic(auto, [][]int32{{2, 3}}, nil)
	ctx := context.Background()
	produce := func(cl *kgo.Client, prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", prefix, err)
		}
	}
	// isr accepts a partition whose ISR holds exactly want, in any order.
	isr := func(want ...int32) func(testcluster.PartitionState) error {
		return func(st testcluster.PartitionState) error {
			if !slices.Equal(slices.Sorted(slices.Values(st.ISR)), want) {
				return fmt.Errorf("isr %v, want %v", st.ISR, want)
			}
			return nil
		}
	}
	acksAll := func() *kgo.Client {
		return c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}

	cl := acksAll()
	produce(cl, "kept", 100)
	c.WaitPartition(topic, 0, 60*time.Second, "both replicas in sync", isr(2, 3))
	b3.Stop()
	c.WaitPartition(topic, 0, 60*time.Second, "broker 3 out of the isr", isr(2))
	c.WaitPartition(auto, 0, 60*time.Second, "broker 3 out of the isr", isr(2))
	produce(cl, "lost", 50)

	b2.Kill()
	before := c.WaitPartition(topic, 0, 60*time.Second, "no leader", func(st testcluster.PartitionState) error {
		if st.Leader != -1 {
			return errors.New("still led")
		}
		return nil
	})
	b3.Restart()
	testcluster.Eventually(t, 60*time.Second, "broker 3 registered and unfenced", func() error {
		brokers, err := c.Admin().ListBrokers(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(brokers.NodeIDs(), 3) {
			return fmt.Errorf("live brokers %v", brokers.NodeIDs())
		}
		return nil
	})
	for _, tp := range []string{topic, auto} {
		if st, err := c.Partition(ctx, tp, 0); err != nil || st.Leader != -1 {
			t.Fatalf("%s-0 with broker 3 back and unclean election off: %v, %v; want no leader", tp, st, err)
		}
	}

	// Turning unclean.leader.election.enable on makes the controller elect by
	// itself.
	bs := []string{"--bootstrap-server", c.Node(1).KafkaAddr + "," + b3.KafkaAddr}
	kafkatools.MustRun(t, "kafka-configs", append(bs, "--alter", "--entity-type", "topics", "--entity-name", auto,
		"--add-config", "unclean.leader.election.enable=true")...)
	c.WaitPartition(auto, 0, 30*time.Second, "broker 3 elected by the controller", func(st testcluster.PartitionState) error {
		if st.Leader != 3 {
			return errors.New("broker 3 does not lead")
		}
		return isr(3)(st)
	})

	elect := func(typ string) kafkatools.Result {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, kafkatools.DefaultTimeout)
		defer cancel()
		res, err := kafkatools.Run(rctx, "kafka-leader-election", append(bs, "--election-type", typ, "--topic", topic, "--partition", "0")...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := elect("unclean")
	if res.ExitCode != 0 {
		t.Fatalf("kafka-leader-election --election-type unclean: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	expectContains(t, res.Stdout, "Successfully completed leader election (UNCLEAN) for partitions unclean-0")
	after := c.WaitPartition(topic, 0, 30*time.Second, "broker 3 leads alone", func(st testcluster.PartitionState) error {
		if st.Leader != 3 {
			return errors.New("broker 3 does not lead")
		}
		return isr(3)(st)
	})
	if after.LeaderEpoch <= before.LeaderEpoch {
		t.Errorf("leader epoch %d after the unclean election, %d before: want it raised", after.LeaderEpoch, before.LeaderEpoch)
	}
	// A second unclean election finds a leader: nothing to do.
	res = elect("unclean")
	expectContains(t, res.Stdout, "Valid replica already elected for partitions unclean-0")

	cl = acksAll()
	produce(cl, "after", 20)

	b2.Restart()
	c.WaitPartition(topic, 0, 60*time.Second, "broker 2 back in the isr", isr(2, 3))
	if res := elect("preferred"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "Successfully completed leader election (PREFERRED)") {
		t.Fatalf("kafka-leader-election --election-type preferred: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	c.WaitPartition(topic, 0, 30*time.Second, "broker 2 leads again", func(st testcluster.PartitionState) error {
		if st.Leader != 2 {
			return errors.New("broker 2 does not lead")
		}
		return nil
	})

	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("kept-%d", i))
	}
	for i := range 20 {
		want = append(want, fmt.Sprintf("after-%d", i))
	}
	got := consumeValues(t, c, topic, len(want))
	if !slices.Equal(got, want) {
		t.Errorf("broker 2, leading after it truncated, serves %d records:\n%v\nwant the 100 kept and 20 after the election:\n%v", len(got), got, want)
	}
}

// consumeValues reads partition 0 of topic from the start until it has n
// records, and returns their values in offset order.
func consumeValues(t *testing.T, c *testcluster.Cluster, topic string, n int) []string {
	t.Helper()
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(got), n, topic, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
