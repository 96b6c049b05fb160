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

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/testcluster"
)

// TestShareGroupCoordinatorCrash: two share members (raw ShareGroupHeartbeat
// requests, as KafkaShareConsumer sends them) split a two-partition topic; then
// the node coordinating the group is killed with SIGKILL. The group is in
// __consumer_offsets, so before any member heartbeats again the new
// coordinator lists it (ListGroups, share type) Stable and ShareGroupDescribe
// shows it at the same epochs with both members and their partitions; each
// member's heartbeat at its epoch is answered at that epoch. Both members then
// leave and the group is deleted; after the killed node is back and the
// group's coordinator is killed again, the next coordinator does not know it.
func TestShareGroupCoordinatorCrash(t *testing.T) {
	c := testcluster.Start(t, 3)
	const topic, groupID = "sg-in", "share-crash"
	c.CreateTopic(topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, minISR2)

	// ask sends req to the group's coordinator.
	ask := func(req kmsg.Request) (kmsg.Response, *testcluster.Node, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := c.GroupCoordinator(ctx, groupID)
		if err != nil {
			return nil, nil, err
		}
		resp, err := n.Request(ctx, req)
		return resp, n, err
	}
	type member struct {
		id    string
		epoch int32
		parts []int32
	}
	heartbeat := func(m *member, epoch int32) error {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = groupID, m.id, epoch
		if epoch == 0 {
			req.SubscribedTopicNames = []string{topic}
		}
		r, _, err := ask(req)
		if err != nil {
			return err
		}
		resp := r.(*kmsg.ShareGroupHeartbeatResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("member %s at epoch %d: %w", m.id, epoch, err)
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.parts = nil
			for _, tp := range resp.Assignment.TopicPartitions {
				m.parts = append(m.parts, tp.Partitions...)
			}
			slices.Sort(m.parts)
		}
		return nil
	}
	// describe is the group as ShareGroupDescribe shows it: its epochs and each
	// member's epoch and partitions; the error is the group's code.
	describe := func() (kmsg.ShareGroupDescribeResponseGroup, map[string]member, error) {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{groupID}
		r, _, err := ask(req)
		if err != nil {
			return kmsg.ShareGroupDescribeResponseGroup{}, nil, err
		}
		g := r.(*kmsg.ShareGroupDescribeResponse).Groups[0]
		ms := map[string]member{}
		for _, dm := range g.Members {
			m := member{id: dm.MemberID, epoch: dm.MemberEpoch}
			for _, tp := range dm.Assignment.TopicPartitions {
				m.parts = append(m.parts, tp.Partitions...)
			}
			slices.Sort(m.parts)
			ms[m.id] = m
		}
		return g, ms, kerr.ErrorForCode(g.ErrorCode)
	}

	a, b := &member{id: "member-a"}, &member{id: "member-b"}
	testcluster.Eventually(t, 60*time.Second, "a joins", func() error { return heartbeat(a, 0) })
	testcluster.Eventually(t, 60*time.Second, "b joins", func() error { return heartbeat(b, 0) })
	// The target assignment is computed at most once a second: heartbeat until
	// each member holds one partition at the group's epoch.
	testcluster.Eventually(t, 60*time.Second, "the partitions split", func() error {
		for _, m := range []*member{a, b} {
			if err := heartbeat(m, m.epoch); err != nil {
				return err
			}
		}
		g, _, err := describe()
		if err != nil {
			return err
		}
		if len(a.parts) != 1 || len(b.parts) != 1 || a.parts[0] == b.parts[0] || a.epoch != g.GroupEpoch || b.epoch != g.GroupEpoch {
			return fmt.Errorf("group at %d; a at %d holds %v, b at %d holds %v", g.GroupEpoch, a.epoch, a.parts, b.epoch, b.parts)
		}
		return nil
	})
	before, _, err := describe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	victim, err := c.GroupCoordinator(ctx, groupID)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing node %d, the coordinator of %s; members at epoch %d hold %v and %v", victim.ID, groupID, a.epoch, a.parts, b.parts)
	victim.Kill()

	// Before any member heartbeats, the new coordinator lists and describes
	// the group as it was.
	testcluster.Eventually(t, 60*time.Second, "the new coordinator lists the group", func() error {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = []string{"share"}
		r, n, err := ask(req)
		if err != nil {
			return err
		}
		if n.ID == victim.ID {
			return fmt.Errorf("node %d still named coordinator", n.ID)
		}
		resp := r.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, g := range resp.Groups {
			if g.Group == groupID {
				if g.GroupState != "Stable" || g.GroupType != "share" || g.ProtocolType != "share" {
					t.Fatalf("listed after the failover: %+v", g)
				}
				return nil
			}
		}
		return fmt.Errorf("node %d lists %d share groups, not %s", n.ID, len(resp.Groups), groupID)
	})
	g, ms, err := describe()
	if err != nil {
		t.Fatalf("describe after the failover: %v", err)
	}
	if g.GroupState != "Stable" || g.GroupEpoch != before.GroupEpoch || g.AssignmentEpoch != before.AssignmentEpoch || len(ms) != 2 {
		t.Fatalf("describe after the failover: state %s epoch %d assignment epoch %d, %d members; before: epoch %d assignment epoch %d",
			g.GroupState, g.GroupEpoch, g.AssignmentEpoch, len(ms), before.GroupEpoch, before.AssignmentEpoch)
	}
	for _, m := range []*member{a, b} {
		if got := ms[m.id]; got.epoch != m.epoch || !slices.Equal(got.parts, m.parts) {
			t.Fatalf("after the failover %s is at %d with %v; before at %d with %v", m.id, got.epoch, got.parts, m.epoch, m.parts)
		}
	}
	// Each member carries on at its epoch: no UNKNOWN_MEMBER_ID, no
	// FENCED_MEMBER_EPOCH, no GROUP_ID_NOT_FOUND.
	for _, m := range []*member{a, b} {
		was := *m
		if err := heartbeat(m, m.epoch); err != nil {
			t.Fatalf("after the failover: %v", err)
		}
		if m.epoch != was.epoch {
			t.Fatalf("after the failover %s is at %d, was at %d", m.id, m.epoch, was.epoch)
		}
	}

	// Deleted, the group stays deleted when its coordinator moves again.
	for _, m := range []*member{a, b} {
		if err := heartbeat(m, -1); err != nil {
			t.Fatalf("leaving: %v", err)
		}
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{groupID}
	r, _, err := ask(del)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode); err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	victim.Restart()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	second, err := c.GroupCoordinator(ctx, groupID)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The restarted node must be back in the ISR of the group's partition
	// before the second kill, or nobody could lead it.
	c.WaitPartition(group.OffsetsTopic, offsetsPartition(t, c, groupID), 60*time.Second, "the restarted node in the ISR", func(ps testcluster.PartitionState) error {
		if !slices.Contains(ps.ISR, victim.ID) {
			return fmt.Errorf("ISR %v", ps.ISR)
		}
		return nil
	})
	t.Logf("killing node %d, the coordinator of the deleted %s", second.ID, groupID)
	second.Kill()
	testcluster.Eventually(t, 60*time.Second, "the next coordinator answers for the group", func() error {
		_, _, err := describe()
		switch {
		case errors.Is(err, kerr.GroupIDNotFound):
			return nil
		case err == nil:
			t.Fatalf("the deleted group is back after the failover")
		}
		return err
	})
}

// offsetsPartition is the partition of __consumer_offsets that holds a group.
func offsetsPartition(t *testing.T, c *testcluster.Cluster, groupID string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tds, err := c.Admin().ListTopicsWithInternal(ctx, group.OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := tds[group.OffsetsTopic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		t.Fatalf("%s: %+v", group.OffsetsTopic, td)
	}
	return group.PartitionFor(groupID, int32(len(td.Partitions)))
}
