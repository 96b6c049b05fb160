package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/report"
)

// produceEach writes values one request at a time and returns their
// acknowledgements; any failure fails the test.
func produceEach(t *testing.T, cl *kgo.Client, values ...string) []report.Produced {
	t.Helper()
	var acks []report.Produced
	for _, v := range values {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(v)}).First()
		cancel()
		if err != nil {
			t.Fatalf("producing %s: %v", v, err)
		}
		acks = append(acks, report.Produced{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset})
	}
	return acks
}

func names(prefix string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return vs
}

// TestOldLeaderTailIsTruncated: a leader takes acks=1 writes that never reach
// its followers (both are stopped with SIGSTOP), then crashes (SIGKILL); the
// followers resume and one of them is elected once the old leader's session
// expires. The new leader takes acks=all writes at the offsets the lost tail
// had. When the old leader returns it must drop its divergent tail and copy the
// new leader's log:
//
//   - the cluster serves every acks=all write at its acknowledged offset, and of
//     the acks=1 tail only a prefix that reached a follower before the pause;
//   - made leader again (the new leader is stopped cleanly, which hands
//     leadership back to it as the first replica in the ISR), the old leader
//     serves exactly the same records at the same offsets;
//   - after all nodes stop, the three logs are byte-identical.
func TestOldLeaderTailIsTruncated(t *testing.T) {
	const topic = "tail"
	c := testcluster.Start(t, 3)
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "1"})
	all := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	one := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())

	before := produceEach(t, all, names("before", 50)...)
	before = append(before, produceEach(t, one, "warm")...) // so the acks=1 client knows the leader
	c.WaitPartition(topic, 0, 30*time.Second, "node 1 leading a full ISR", func(st testcluster.PartitionState) error {
		if st.Leader != 1 || len(st.ISR) != 3 {
			return errors.New("not yet")
		}
		return nil
	})
	// The followers may not have fetched "warm" yet; wait until acks=all with
	// the full ISR says they have everything.
	before = append(before, produceEach(t, all, "fence")...)

	c.Node(2).Pause()
	c.Node(3).Pause()
	// One request at a time: a follower stopped with a fetch outstanding can
	// receive at most the first of them, in that fetch's answer.
	tail := produceEach(t, one, names("tail", 20)...)
	c.Node(1).Kill()
	c.Node(2).Resume()
	c.Node(3).Resume()

	st := c.WaitPartition(topic, 0, 30*time.Second, "a new leader", func(st testcluster.PartitionState) error {
		if st.Leader != 2 && st.Leader != 3 {
			return errors.New("not yet")
		}
		return nil
	})
	newLeader := c.Node(st.Leader)
	after := produceEach(t, all, names("after", 50)...)

	c.Node(1).Restart()
	c.WaitPartition(topic, 0, 30*time.Second, "node 1 back in the ISR", func(st testcluster.PartitionState) error {
		if !st.InISR(1) {
			return errors.New("not yet")
		}
		return nil
	})
	after = append(after, produceEach(t, all, "rejoined")...)

	// What the new leader serves: every acks=all write, and a prefix of the tail.
	fromNew := readAll(t, c, topic)
	present := map[string]bool{}
	for _, r := range fromNew.records {
		present[string(r.Value)] = true
	}
	kept := 0
	for kept < len(tail) && present[string(tail[kept].Value)] {
		kept++
	}
	for _, a := range tail[kept:] {
		if present[string(a.Value)] {
			t.Fatalf("tail record %s survived although an earlier one did not", a.Value)
		}
	}
	if kept == len(tail) {
		t.Fatalf("all %d tail records reached a follower: the scenario did not leave a divergent tail on node 1", len(tail))
	}
	// In acknowledgement order, as Check wants it: the surviving tail came
	// between the two committed stretches.
	check(t, slices.Concat(before, tail[:kept], after), fromNew.records)
	t.Logf("node 1 acknowledged %d acks=1 records at offsets %d-%d that only it held; %d reached a follower, %d were truncated",
		len(tail), tail[0].Offset, tail[len(tail)-1].Offset, kept, len(tail)-kept)

	// Node 1 leads again: its log must be the new leader's, not its own old tail.
	newLeader.Stop()
	c.WaitPartition(topic, 0, 30*time.Second, "node 1 leading again", func(st testcluster.PartitionState) error {
		if st.Leader != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	fromOld := readAll(t, c, topic)
	if !slices.EqualFunc(fromNew.records, fromOld.records, func(a, b report.Consumed) bool {
		return a.Offset == b.Offset && string(a.Value) == string(b.Value)
	}) {
		t.Fatalf("node 1 serves %d records, node %d served %d; they differ", len(fromOld.records), newLeader.ID, len(fromNew.records))
	}
	crashAll(t, c)
	checkReplicasAgree(t, topic, c.Nodes()...)
}
