package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestStreamsGroupCoordinatorCrash: two streams members (raw StreamsGroupHeartbeat
// requests, as Kafka Streams sends them) split a one-subtopology application's
// tasks; then the node coordinating the group is killed with SIGKILL. The group
// is in __consumer_offsets, so the new coordinator knows it: each member's
// heartbeat with its epoch and tasks is answered at that epoch, without a
// rejoin, and StreamsGroupDescribe shows the group Stable with the same tasks.
func TestStreamsGroupCoordinatorCrash(t *testing.T) {
	c := testcluster.Start(t, 3)
	const topic, group = "st-in", "streams-crash"
	c.CreateTopic(topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, minISR2)

	type member struct {
		id    string
		epoch int32
		tasks []int32
	}
	heartbeat := func(m *member) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := c.GroupCoordinator(ctx, group)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.epoch
		req.RebalanceTimeoutMillis = -1
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		if m.epoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			req.ProcessID = kmsg.StringPtr("process-" + m.id)
			top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
			sub := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			sub.SubtopologyID, sub.SourceTopics = "0", []string{topic}
			top.Subtopologies = append(top.Subtopologies, sub)
			req.Topology = &top
		} else if len(m.tasks) > 0 {
			req.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: m.tasks}}
		}
		r, err := n.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := r.(*kmsg.StreamsGroupHeartbeatResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("member %s at epoch %d: %w", m.id, m.epoch, err)
		}
		m.epoch = resp.MemberEpoch
		if resp.ActiveTasks != nil {
			m.tasks = nil
			for _, ts := range resp.ActiveTasks {
				m.tasks = append(m.tasks, ts.Partitions...)
			}
			slices.Sort(m.tasks)
		}
		return nil
	}
	// stable waits until both members own one task each at the group's epoch.
	stable := func(what string, a, b *member) {
		testcluster.Eventually(t, 60*time.Second, what, func() error {
			for _, m := range []*member{a, b} {
				if err := heartbeat(m); err != nil {
					return err
				}
			}
			if len(a.tasks) != 1 || len(b.tasks) != 1 || a.tasks[0] == b.tasks[0] || a.epoch != b.epoch {
				return fmt.Errorf("a at %d owns %v, b at %d owns %v", a.epoch, a.tasks, b.epoch, b.tasks)
			}
			return nil
		})
	}
	a, b := &member{id: "member-a"}, &member{id: "member-b"}
	testcluster.Eventually(t, 60*time.Second, "a joins", func() error { return heartbeat(a) })
	testcluster.Eventually(t, 60*time.Second, "b joins", func() error { return heartbeat(b) })
	stable("the tasks split", a, b)
	before := *a
	beforeB := *b

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	victim, err := c.GroupCoordinator(ctx, group)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing node %d, the coordinator of %s; members at epoch %d own %v and %v", victim.ID, group, a.epoch, a.tasks, b.tasks)
	victim.Kill()

	// The new coordinator answers each member at its epoch with its tasks: no
	// UNKNOWN_MEMBER_ID, no FENCED_MEMBER_EPOCH, no rejoin.
	for _, m := range []*member{a, b} {
		testcluster.Eventually(t, 60*time.Second, "a heartbeat to the new coordinator", func() error {
			err := heartbeat(m)
			if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedMemberEpoch) {
				t.Fatalf("after the failover: %v", err)
			}
			return err
		})
	}
	if a.epoch != before.epoch || !slices.Equal(a.tasks, before.tasks) || b.epoch != beforeB.epoch || !slices.Equal(b.tasks, beforeB.tasks) {
		t.Fatalf("after the failover a at %d owns %v, b at %d owns %v; before: %d %v, %d %v",
			a.epoch, a.tasks, b.epoch, b.tasks, before.epoch, before.tasks, beforeB.epoch, beforeB.tasks)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.GroupCoordinator(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID == victim.ID {
		t.Fatalf("node %d still coordinates %s", n.ID, group)
	}
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{group}
	r, err := n.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	g := r.(*kmsg.StreamsGroupDescribeResponse).Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != before.epoch || len(g.Members) != 2 {
		t.Fatalf("describe after the failover: code %d state %s epoch %d (before %d), %d members", g.ErrorCode, g.State, g.Epoch, before.epoch, len(g.Members))
	}
}
