package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// reassignment returns topic-0's ongoing reassignment as kadm lists it, or nil.
func reassignment(t *testing.T, adm *kadm.Client, topic string) *kadm.ListPartitionReassignmentsResponse {
	t.Helper()
	rs, err := adm.ListPartitionReassignments(context.Background(), kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	if r, ok := rs[topic][0]; ok {
		return &r
	}
	return nil
}

func assign(t *testing.T, adm *kadm.Client, topic string, replicas []int32) error {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, replicas)
	rs, err := adm.AlterPartitionAssignments(context.Background(), req)
	if err != nil {
		t.Fatalf("AlterPartitionAssignments: %v", err)
	}
	return rs[topic][0].Err
}

// TestReassignPartition: a partition led by broker 1 moves from [1 2 3] to the
// broker-only node 4 and brokers 2 and 3 while an acks=all producer runs
// (min.insync.replicas 2): broker 4 catches up and joins the ISR, leadership
// leaves broker 1 first, broker 1 drops its copy, every acknowledged record is
// read back and the new replicas agree byte for byte. A move onto a stopped
// broker stays in progress until it is cancelled, which restores the replicas.
// Bad requests get Kafka's errors.
func TestReassignPartition(t *testing.T) {
	c := startCluster(t, 3)
	for _, id := range []int32{4, 5} {
		if _, err := c.addNode(id, brokerOnly); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
	ctx := context.Background()
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("moving"))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &minISR}, "moving"); err != nil {
		t.Fatal(err)
	}
	// Place it on [1 2 3] with 1 leading (a reassignment that is only a new
	// order completes at once).
	if err := assign(t, adm, "moving", []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"moving": {0: {}}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "broker 1 to lead moving-0", func() bool { return c.leaderOf(adm, "moving", 0) == 0 })

	prod := startSyncProducer(cl, 0)
	wait.For(t, "some writes before the move", func() bool { return prod.Acked() >= 100 })

	if err := assign(t, adm, "moving", []int32{4, 2, 3}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the move to complete", func() bool { return reassignment(t, adm, "moving") == nil })
	// Clients see it too (kgo caches metadata for a moment).
	wait.For(t, "Metadata to show replicas [4 2 3] led by one of them", func() bool {
		md, err := adm.Metadata(ctx, "moving")
		if err != nil {
			return false
		}
		p := md.Topics["moving"].Partitions[0]
		return slices.Equal(p.Replicas, []int32{4, 2, 3}) && slices.Contains(p.Replicas, p.Leader)
	})
	wait.For(t, "broker 1 to drop its copy", func() bool {
		_, err := c.nodes[0].replicas.Partition("moving", 0)
		return err != nil
	})
	n := prod.Acked()
	wait.For(t, "writes after the move", func() bool { return prod.Acked() >= n+100 })
	acked, fails := prod.Stop()
	if len(fails) > 0 {
		t.Fatalf("%d acks=all writes failed during the move, the first: %v", len(fails), fails[0])
	}
	if got := consumeAll(t, strings.Join(c.seeds(), ","), "moving", acked); len(got) != acked {
		t.Fatalf("read %d, want %d", len(got), acked)
	}
	c.checkAgreement(t, "moving", 0)

	// A move onto a stopped broker stays in progress; cancel restores it.
	c.stop(4)
	if err := assign(t, adm, "moving", []int32{5, 2, 3}); err != nil {
		t.Fatal(err)
	}
	r := reassignment(t, adm, "moving")
	if r == nil || !slices.Equal(r.AddingReplicas, []int32{5}) || !slices.Equal(r.RemovingReplicas, []int32{4}) {
		t.Fatalf("listed %+v, want adding [5] removing [4]", r)
	}
	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign("moving", 0)
	rs, err := adm.AlterPartitionAssignments(ctx, cancel)
	if err != nil || rs["moving"][0].Err != nil {
		t.Fatalf("cancel: %v %v", err, rs["moving"][0].Err)
	}
	if r := reassignment(t, adm, "moving"); r != nil {
		t.Fatalf("still listed after cancel: %+v", r)
	}
	wait.For(t, "the cancel to restore replicas [4 2 3]", func() bool {
		md, err := adm.Metadata(ctx, "moving")
		return err == nil && slices.Equal(md.Topics["moving"].Partitions[0].Replicas, []int32{4, 2, 3})
	})

	for _, tt := range []struct {
		replicas []int32
		want     error
	}{
		{[]int32{1, 1}, kerr.InvalidReplicaAssignment},
		{[]int32{9}, kerr.InvalidReplicaAssignment},
		{nil, kerr.NoReassignmentInProgress},
	} {
		if err := assign(t, adm, "moving", tt.replicas); !errors.Is(err, tt.want) {
			t.Errorf("assign %v: %v, want %v", tt.replicas, err, tt.want)
		}
	}
	if err := assign(t, adm, "nope", []int32{1}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
}
