package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/wait"
)

// TestFollowerPauseShrinksAndRejoinsISR: a follower of a three-replica
// partition (min.insync.replicas=2) is stopped with SIGSTOP while an idempotent
// producer writes with acks=all. The ISR shrinks to the two others, acks=all
// writes go on being acknowledged with the follower still stopped; after
// SIGCONT the follower catches up and rejoins the ISR. Nothing acknowledged is
// lost, and all three logs end byte-identical.
func TestFollowerPauseShrinksAndRejoinsISR(t *testing.T) {
	const topic = "pause"
	c := testcluster.Start(t, 3)
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, minISR2)
	p := startProducer(t, c, "s", topic)
	waitAcks(t, time.Now(), 100, p)

	st := c.WaitPartition(topic, 0, 30*time.Second, "a full ISR", func(st testcluster.PartitionState) error {
		if len(st.ISR) != 3 {
			return errors.New("ISR not full")
		}
		return nil
	})
	// Pause a follower that is not the active controller if there is one, so
	// that the test is about the ISR, not about a controller election.
	ctrl, _, err := c.ActiveController(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var follower *testcluster.Node
	for _, id := range st.Replicas {
		if id != st.Leader && (follower == nil || id != ctrl) {
			follower = c.Node(id)
		}
	}
	follower.Pause()
	pausedAt := time.Now()
	shrunk := c.WaitPartition(topic, 0, 30*time.Second, fmt.Sprintf("an ISR without paused node %d", follower.ID), func(st testcluster.PartitionState) error {
		if st.InISR(follower.ID) {
			return errors.New("paused follower still in the ISR")
		}
		return nil
	})
	shrinkTook := time.Since(pausedAt)
	if len(shrunk.ISR) != 2 || shrunk.Leader != st.Leader {
		t.Fatalf("after the pause: %v; want leader %d and the two others in the ISR", shrunk, st.Leader)
	}

	// acks=all goes on with two of three in sync.
	waitAcks(t, time.Now(), 200, p)
	if !follower.Paused() {
		t.Fatal("the follower is no longer paused")
	}
	if now, err := c.Partition(context.Background(), topic, 0); err != nil || now.InISR(follower.ID) {
		t.Fatalf("ISR while the follower is paused: %v, %v", now, err)
	}

	follower.Resume()
	resumedAt := time.Now()
	c.WaitPartition(topic, 0, 30*time.Second, fmt.Sprintf("node %d back in the ISR", follower.ID), func(st testcluster.PartitionState) error {
		if !st.InISR(follower.ID) {
			return errors.New("not yet")
		}
		return nil
	})
	rejoinTook := time.Since(resumedAt)
	waitAcks(t, time.Now(), 100, p)
	p.finish(t)
	t.Logf("paused follower %d left the ISR after %v and rejoined %v after SIGCONT",
		follower.ID, shrinkTook.Round(time.Millisecond), rejoinTook.Round(time.Millisecond))

	check(t, produced(p), readAll(t, c, topic).records)
	c.WaitPartition(topic, 0, 30*time.Second, "a full ISR", func(st testcluster.PartitionState) error {
		if len(st.ISR) != 3 {
			return errors.New("ISR not full")
		}
		return nil
	})
	crashAll(t, c)
	checkReplicasAgree(t, topic, c.Nodes()...)
}

// TestTwoReplicasDownNotEnoughReplicas: on a five-node cluster (five controller
// voters, so the quorum outlives two crashes) a topic has its three replicas on
// nodes 1, 2 and 3 and min.insync.replicas=2. Nodes 1 (the leader) and 2 are
// killed with SIGKILL. Once node 3 leads alone (in every live broker's
// metadata, which the client may ask), an acks=all write is refused
// with NOT_ENOUGH_REPLICAS (not acknowledged, not merely timed out) and nothing
// is appended; acks=1 is still accepted; when node 2 returns, acks=all works
// again.
func TestTwoReplicasDownNotEnoughReplicas(t *testing.T) {
	const topic = "nrep"
	c := testcluster.Start(t, 5)
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, minISR2)
	ctx := context.Background()
	// No retries: the first answer is the one the test wants to see. With
	// none, a send whose leader refuses the connection fails at once, and
	// franz-go then refreshes no metadata: after one stale Metadata answer, or
	// a dead connection its write finds, it would aim at a dead leader for
	// good. So the test refreshes after each such failure, as a retrying
	// client would. The client's log is kept, timestamped, and shown if the
	// test fails.
	clientLog := &wait.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the acks=all client's log:\n%s", clientLog.String())
		}
	})
	strict := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.WithLogger(kgo.BasicLogger(clientLog, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000000 ") })))
	for i := range 10 {
		if err := strict.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "before-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("acks=all with all replicas up: %v", err)
		}
	}

	c.Node(1).Kill()
	c.Node(2).Kill()
	// Every broker the client may ask, not only the first, must know it.
	waitEveryBroker(t, c, topic, 0, "node 3 leading alone", func(st testcluster.PartitionState) error {
		if st.Leader != 3 || !slices.Equal(st.ISR, []int32{3}) {
			return errors.New("not yet")
		}
		return nil
	})
	// The high-water mark stays where it was while the ISR is below
	// min.insync.replicas (ListOffsets may even answer OFFSET_NOT_AVAILABLE
	// until it catches up), so what node 3 holds is measured in bytes.
	sizeBefore := logSize(t, c, topic, 3)

	var others []error
	testcluster.Eventually(t, 30*time.Second, "NOT_ENOUGH_REPLICAS for an acks=all write", func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := strict.ProduceSync(pctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
		switch {
		case err == nil:
			t.Fatal("an acks=all write was acknowledged with one in-sync replica and min.insync.replicas=2")
		case errors.Is(err, kerr.NotEnoughReplicas):
			return nil
		}
		// A client still aiming at a dead leader; anything else is kept for the
		// failure message.
		others = append(others, err)
		strict.ForceMetadataRefresh()
		return err
	})
	if len(others) > 0 {
		t.Logf("before NOT_ENOUGH_REPLICAS the client saw %d other errors, the first: %v", len(others), others[0])
	}
	if size := logSize(t, c, topic, 3); size != sizeBefore {
		t.Fatalf("node 3's log grew from %d to %d bytes: the refused write was appended", sizeBefore, size)
	}

	leaderOnly := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := leaderOnly.ProduceSync(ctx, &kgo.Record{Value: []byte("acks=1")}).FirstErr(); err != nil {
		t.Fatalf("acks=1 with the leader alone: %v", err)
	}

	c.Node(2).Restart()
	c.WaitPartition(topic, 0, 30*time.Second, "node 2 back in the ISR", func(st testcluster.PartitionState) error {
		if !st.InISR(2) {
			return errors.New("not yet")
		}
		return nil
	})
	if err := strict.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with two in-sync replicas again: %v", err)
	}
}

// logSize is the size in bytes of topic's partition 0 on broker, as its
// DescribeLogDirs answers.
func logSize(t *testing.T, c *testcluster.Cluster, topic string, broker int32) int64 {
	t.Helper()
	var size int64
	testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("the size of %s on node %d", topic, broker), func() error {
		dirs, err := c.Admin().DescribeBrokerLogDirs(context.Background(), broker, kadm.TopicsSet{topic: {0: {}}})
		if err == nil {
			err = dirs.Error()
		}
		if err != nil {
			return err
		}
		p, ok := dirs.LookupPartition(topic, 0)
		if !ok {
			return errors.New("partition 0 not described")
		}
		size = p.Size
		return nil
	})
	return size
}
