package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memShareState is a ShareState in memory: start offsets by share partition.
type memShareState struct {
	mu    sync.Mutex
	start map[SharePartition]int64
}

func keyOf(sp SharePartition) SharePartition { sp.Topic = ""; return sp }

func (m *memShareState) Summary(_ context.Context, sp SharePartition) (ShareSummary, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.start[keyOf(sp)]
	return ShareSummary{StartOffset: s, LeaderEpoch: 3, Lag: 100 - s}, ok, nil
}

func (m *memShareState) Reset(_ context.Context, sp SharePartition, start int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start[keyOf(sp)] = start
	return nil
}

func (m *memShareState) Delete(_ context.Context, sp SharePartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.start, keyOf(sp))
	return nil
}

func (m *memShareState) Partitions(_ context.Context, group string) ([]SharePartition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SharePartition
	for sp := range m.start {
		if sp.Group == group {
			out = append(out, sp)
		}
	}
	return out, nil
}

// TestShareGroupOffsets walks the share-group offset APIs through their answers:
// alteration of a new group (created), of a group with a member (NON_EMPTY_GROUP),
// of a simple classic group (taken), of unknown topics and partitions;
// descriptions of named partitions, of every partition with state and of every
// partition of a subscribed topic; deletion.
func TestShareGroupOffsets(t *testing.T) {
	ctx := context.Background()
	topics := newFakeTopics()
	topics.set("t", 2)
	state := &memShareState{start: map[SharePartition]int64{}}
	cfg := DefaultConfig()
	cfg.Topics, cfg.ShareState = topics, state
	c := New(cfg, newMemStore(), nil)
	if err := loadAll(ctx, c, newMemStore()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	alter := func(group string, parts map[string][]int32, start int64) string {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		for _, topic := range slices.Sorted(maps.Keys(parts)) {
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = topic
			for _, p := range parts[topic] {
				rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsRequestTopicPartition{Partition: p, StartOffset: start})
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := c.AlterShareGroupOffsets(ctx, req)
		if resp.ErrorCode != 0 {
			return codeName(resp.ErrorCode)
		}
		var out []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s/%d=%s", rt.Topic, rp.Partition, codeName(rp.ErrorCode)))
			}
		}
		return strings.Join(out, " ")
	}
	describe := func(group string, topics map[string][]int32) string {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = group
		for _, topic := range slices.Sorted(maps.Keys(topics)) {
			g.Topics = append(g.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: topic, Partitions: topics[topic]})
		}
		req.Groups = append(req.Groups, g)
		resp := c.DescribeShareGroupOffsets(ctx, req)
		rg := resp.Groups[0]
		if rg.ErrorCode != 0 {
			return codeName(rg.ErrorCode)
		}
		var out []string
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s/%d=%d,lag=%d", rt.Topic, rp.Partition, rp.StartOffset, rp.Lag))
			}
		}
		return strings.Join(out, " ")
	}
	del := func(group string, topics ...string) string {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = group
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: topic})
		}
		resp := c.DeleteShareGroupOffsets(ctx, req)
		if resp.ErrorCode != 0 {
			return codeName(resp.ErrorCode)
		}
		var out []string
		for _, rt := range resp.Topics {
			out = append(out, fmt.Sprintf("%s=%s", rt.Topic, codeName(rt.ErrorCode)))
		}
		return strings.Join(out, " ")
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}

	check("delete of an unknown group", del("sg", "t"), "GROUP_ID_NOT_FOUND")
	check("alter creates the group", alter("sg", map[string][]int32{"t": {0, 1, 2}, "gone": {0}}, 7),
		"gone/0=UNKNOWN_TOPIC_OR_PARTITION t/0=NONE t/1=NONE t/2=UNKNOWN_TOPIC_OR_PARTITION")
	check("describe named", describe("sg", map[string][]int32{"t": {0, 5}, "gone": {1}}),
		"gone/1=-1,lag=-1 t/0=7,lag=93 t/5=-1,lag=-1")
	check("describe all", describe("sg", nil), "t/0=7,lag=93 t/1=7,lag=93")
	check("empty group id", describe("", nil), "INVALID_GROUP_ID")
	check("alter with -1 deletes", alter("sg", map[string][]int32{"t": {1}}, -1), "t/1=NONE")
	check("describe after -1", describe("sg", nil), "t/0=7,lag=93")

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m1", []string{"t"}
	if resp := c.ShareGroupHeartbeat(ctx, hb); resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	// As Kafka 4.4: every partition of a subscribed topic, -1 without state.
	check("describe all with a member subscribed", describe("sg", nil), "t/0=7,lag=93 t/1=-1,lag=-1")
	check("alter with a member", alter("sg", map[string][]int32{"t": {0}}, 0), "NON_EMPTY_GROUP")
	check("delete with a member", del("sg", "t"), "NON_EMPTY_GROUP")
	hb.MemberEpoch = leaveEpoch
	if resp := c.ShareGroupHeartbeat(ctx, hb); resp.ErrorCode != 0 {
		t.Fatalf("leave: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	check("delete", del("sg", "t", "gone"), "t=NONE gone=UNKNOWN_TOPIC_OR_PARTITION")
	check("delete again", del("sg", "t"), "t=UNKNOWN_TOPIC_OR_PARTITION")
	check("describe after delete", describe("sg", nil), "")

	simpleCommit(c, "classic", 9, map[topicPartition]int64{{"t", 0}: 1})
	check("delete of a simple group", del("classic", "t"), "GROUP_ID_NOT_FOUND")
	// As in Kafka 4.4, an alteration takes a simple group (committed offsets,
	// never a member), which is then an empty share group.
	check("alter of a simple group", alter("classic", map[string][]int32{"t": {0}}, 0), "t/0=NONE")
	check("delete of the simple group taken", del("classic", "t"), "t=NONE")

	// DeleteGroups of a share group removes its state.
	alter("sg", map[string][]int32{"t": {0}}, 4)
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"sg"}
	if resp := c.DeleteGroups(ctx, dg); resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %s", kerr.ErrorForCode(resp.Groups[0].ErrorCode))
	}
	if sps, _ := state.Partitions(ctx, "sg"); len(sps) != 0 {
		t.Errorf("DeleteGroups left share state %v", sps)
	}
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}
