package group

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// TestDescribeGroupsVersions checks what DescribeGroups answers, per version, for a
// group that is not there to describe: before v6 Dead with no error, from v6 on
// GROUP_ID_NOT_FOUND and Kafka 4.4's message (KIP-1043).
func TestDescribeGroupsVersions(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(t, newMemStore())
	defer c.Close()

	joinClassicAndKIP848(t, c)
	commitTo(t, c, "deleted")
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"deleted"}
	if r := c.DeleteGroups(ctx, del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}

	tests := []struct {
		group   string
		version int16
		code    int16
		state   string
		msg     string // "" for a null message
	}{
		{"nosuch", 5, 0, "Dead", ""},
		{"nosuch", 6, kerr.GroupIDNotFound.Code, "Dead", "Group nosuch not found."},
		{"", 6, kerr.GroupIDNotFound.Code, "Dead", "Group  not found."},
		{"deleted", 5, 0, "Dead", ""},
		{"deleted", 6, kerr.GroupIDNotFound.Code, "Dead", "Group deleted not found."},
		{"kip848", 5, 0, "Dead", ""},
		{"kip848", 6, kerr.GroupIDNotFound.Code, "Dead", "Group kip848 is not a classic group."},
		{"classic", 5, 0, "CompletingRebalance", ""},
		{"classic", 6, 0, "CompletingRebalance", ""},
	}
	for _, tt := range tests {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = tt.version
		req.Groups = []string{tt.group}
		g := c.DescribeGroups(ctx, req).Groups[0]
		var msg string
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		if g.Group != tt.group || g.ErrorCode != tt.code || g.State != tt.state || msg != tt.msg {
			t.Errorf("v%d %q: group %q %v state %q message %q, want %v state %q message %q", tt.version, tt.group,
				g.Group, kerr.ErrorForCode(g.ErrorCode), g.State, msg, kerr.ErrorForCode(tt.code), tt.state, tt.msg)
		}
		if tt.msg != "" && g.ProtocolType != "" {
			t.Errorf("v%d %q: protocol type %q for a group not found", tt.version, tt.group, g.ProtocolType)
		}
	}
}

// joinClassicAndKIP848 gives c a classic group "classic" and a KIP-848 consumer
// group "kip848", one member each.
func joinClassicAndKIP848(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx := context.Background()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.ProtocolType = "classic", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if r := c.JoinGroup(ctx, join); r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "kip848", "m", 10000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := c.ConsumerGroupHeartbeat(ctx, hb); r.ErrorCode != 0 {
		t.Fatalf("consumer group heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// commitTo commits an offset for group (an Empty classic group without members).
func commitTo(t *testing.T, c *Coordinator, group string) {
	t.Helper()
	if r := simpleCommit(c, group, 9, map[topicPartition]int64{{"t", 0}: 1}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestDeleteGroupsVersions checks DeleteGroups' answers at v2 and v3: the same
// codes, and v3's error message null in each, as a Kafka 4.4 node answered
// (it sets one only for a streams topology description plugin's errors).
func TestDeleteGroupsVersions(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(t, newMemStore())
	defer c.Close()
	joinClassicAndKIP848(t, c)
	want := map[string]int16{
		"nosuch":  kerr.GroupIDNotFound.Code,
		"":        kerr.GroupIDNotFound.Code,
		"classic": kerr.NonEmptyGroup.Code,
		"kip848":  kerr.NonEmptyGroup.Code,
		"empty":   0,
	}
	for _, v := range []int16{2, 3} {
		commitTo(t, c, "empty")
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = v
		req.Groups = []string{"nosuch", "", "classic", "kip848", "empty"}
		resp := c.DeleteGroups(ctx, req)
		if len(resp.Groups) != len(want) {
			t.Fatalf("v%d: %d answers, want %d", v, len(resp.Groups), len(want))
		}
		for _, g := range resp.Groups {
			if g.ErrorCode != want[g.Group] || g.ErrorMessage != nil {
				t.Errorf("v%d %q: %v message %v, want %v and no message", v, g.Group,
					kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, kerr.ErrorForCode(want[g.Group]))
			}
		}
	}
}

// TestEmptiedSimpleGroupSurvivesReload: an offsets-only group that
// OffsetDelete left without offsets stays, Empty, until the retention check
// deletes it, and so does it after a reload: as Kafka's replay makes a simple
// group from its old commit record, which only a tombstone of the group
// removes. A deleted KIP-848 group that had offsets is not brought back. The
// reload lost the emptied group: it was Dead until someone committed again.
func TestEmptiedSimpleGroupSurvivesReload(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	c := newTestCoordinator(t, store)
	defer func() { c.Close() }()
	reload := func() {
		c.Close()
		c = newTestCoordinator(t, store)
	}
	state := func(group string) string {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = 5, []string{group}
		return c.DescribeGroups(ctx, req).Groups[0].State
	}
	listed := func() []string {
		var out []string
		for _, g := range c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest()).Groups {
			out = append(out, g.Group)
		}
		slices.Sort(out)
		return out
	}

	commitTo(t, c, "simple")
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "simple"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := c.OffsetDelete(ctx, del); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", r)
	}
	// A KIP-848 group with offsets, deleted once its member left.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "kip848", "m", 10000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := c.ConsumerGroupHeartbeat(ctx, hb); r.ErrorCode != 0 {
		t.Fatalf("consumer group heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.MemberEpoch = -1
	if r := c.ConsumerGroupHeartbeat(ctx, hb); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commitTo(t, c, "kip848")
	if r := c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Groups: []string{"kip848"}}); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}

	for _, when := range []string{"live", "after a reload"} {
		if when != "live" {
			reload()
		}
		if got := state("simple"); got != "Empty" {
			t.Errorf("%s: the emptied simple group is %s, want Empty", when, got)
		}
		if got := listed(); !slices.Equal(got, []string{"simple"}) {
			t.Errorf("%s: ListGroups lists %v, want [simple]", when, got)
		}
	}

	written := func() (n int) {
		for p := range c.cfg.OffsetsTopicPartitions {
			n += len(store.log(p))
		}
		return n
	}
	before := written()
	c.expireOffsets() // the retention check deletes it
	// Dead at once, the group is gone once its tombstone is written.
	wait.For(t, "the retention check to write the emptied group's tombstone", func() bool { return written() > before })
	reload()
	if got := listed(); len(got) != 0 {
		t.Fatalf("after the retention check and a reload, ListGroups lists %v, want none", got)
	}
}
