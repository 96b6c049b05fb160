package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/wait"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listedGroups returns the ids ListGroups shows, sorted.
func listedGroups(c *Coordinator) []string {
	var out []string
	for _, g := range c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()).Groups {
		out = append(out, g.Group)
	}
	slices.Sort(out)
	return out
}

// TestFailedCommitCreatesNoGroup: a plain or transactional commit outside group
// management (generation -1) that creates a simple group, and whose records then
// fail to be appended, leaves no group behind, as Kafka's coordinator runtime
// reverts the state of a failed write. Neither does one that appends nothing
// (every partition's metadata too large). A group the log already holds stays.
func TestFailedCommitCreatesNoGroup(t *testing.T) {
	failures := []error{
		errors.New("not enough replicas"),
		fmt.Errorf("lost leadership: %w", ErrNotCoordinator),
		fmt.Errorf("batch: %w", ErrRecordTooLarge),
	}
	commits := []struct {
		name   string
		commit func(c *Coordinator, meta string) int16
	}{
		{"OffsetCommit v9", func(c *Coordinator, meta string) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group = 9, "g"
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
				{Partition: 0, Offset: 5, LeaderEpoch: -1, Metadata: &meta},
			}}}
			return c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
		}},
		{"OffsetCommit v2", func(c *Coordinator, meta string) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group = 2, "g"
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
				{Partition: 0, Offset: 5, Metadata: &meta},
			}}}
			return c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
		}},
		{"TxnOffsetCommit", func(c *Coordinator, meta string) int16 {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.Group, req.ProducerID = 3, "g", 7
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
				{Partition: 0, Offset: 5, LeaderEpoch: -1, Metadata: &meta},
			}}}
			return c.TxnOffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
		}},
	}
	type tc struct {
		name    string
		fail    error  // the store's error for the commit's append
		meta    string // the commit's metadata
		existed bool   // the log holds the group, without offsets, before
		want    []string
	}
	var cases []tc
	for _, err := range failures {
		cases = append(cases,
			tc{name: "new group, " + err.Error(), fail: err},
			tc{name: "existing group, " + err.Error(), fail: err, existed: true, want: []string{"g"}})
	}
	cases = append(cases, tc{name: "new group, metadata too large", meta: strings.Repeat("m", 4097)})

	for _, cm := range commits {
		for _, tt := range cases {
			t.Run(cm.name+"/"+tt.name, func(t *testing.T) {
				store := newTxnMemStore()
				start := func() *Coordinator {
					cfg := DefaultConfig()
					cfg.GroupInitialRebalanceDelay = 0
					c := New(cfg, store, nil)
					if err := loadAll(context.Background(), c, store.memStore); err != nil {
						t.Fatal(err)
					}
					return c
				}
				c := start()
				defer func() { c.Close() }()
				if tt.existed {
					commitTo(t, c, "g")
					del := kmsg.NewPtrOffsetDeleteRequest()
					del.Group = "g"
					del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
					if r := c.OffsetDelete(context.Background(), del); r.ErrorCode != 0 {
						t.Fatalf("OffsetDelete: %v", kerr.ErrorForCode(r.ErrorCode))
					}
				}
				store.setFail(tt.fail)
				if code := cm.commit(c, tt.meta); code == 0 {
					t.Fatal("the commit succeeded")
				}
				store.setFail(nil)
				if got := listedGroups(c); !slices.Equal(got, tt.want) {
					t.Errorf("ListGroups lists %v, want %v", got, tt.want)
				}
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Version, req.Groups = 6, []string{"g"}
				wantCode := int16(0)
				if tt.want == nil {
					wantCode = kerr.GroupIDNotFound.Code
				}
				if d := c.DescribeGroups(context.Background(), req).Groups[0]; d.ErrorCode != wantCode {
					t.Errorf("DescribeGroups: %v (%s), want %v", kerr.ErrorForCode(d.ErrorCode), d.State, kerr.ErrorForCode(wantCode))
				}
				c.Close()
				c = start()
				if got := listedGroups(c); !slices.Equal(got, tt.want) {
					t.Errorf("after a reload ListGroups lists %v, want %v", got, tt.want)
				}
			})
		}
	}
}

// TestFailedFirstHeartbeatCreatesNoGroup: the first heartbeat of a consumer,
// share or streams group whose records fail to be appended leaves no group
// behind (Kafka's runtime reverts the failed write, the group's creation
// included): ListGroups and a reload show nothing, and the member joins again
// as the first one once appends work.
func TestFailedFirstHeartbeatCreatesNoGroup(t *testing.T) {
	ctx := context.Background()
	joins := []struct {
		name string
		join func(ctx context.Context, c *Coordinator) int16
	}{
		{"consumer", firstConsumerHeartbeat},
		{"share", firstShareHeartbeat},
		{"streams", firstStreamsHeartbeat},
	}
	for _, j := range joins {
		t.Run(j.name, func(t *testing.T) {
			store := newMemStore()
			c := newTestCoordinator(t, store)
			defer func() { c.Close() }()
			store.setFail(errors.New("not enough replicas"))
			if code := j.join(ctx, c); code != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("join with failing appends: %v", kerr.ErrorForCode(code))
			}
			store.setFail(nil)
			if got := listedGroups(c); len(got) != 0 {
				t.Errorf("ListGroups lists %v, want none", got)
			}
			c.Close()
			c = newTestCoordinator(t, store)
			if got := listedGroups(c); len(got) != 0 {
				t.Errorf("after a reload ListGroups lists %v, want none", got)
			}
			if code := j.join(ctx, c); code != 0 {
				t.Fatalf("join again: %v", kerr.ErrorForCode(code))
			}
		})
	}
}

// TestFailedShareConversionKeepsOffsets: a share member joining a simple group
// turns it into a share group and tombstones its committed offsets; when that
// write fails, memory keeps the offsets the log still holds (Kafka's runtime
// reverts a failed write), so OffsetFetch answers the same before and after a
// reload.
func TestFailedShareConversionKeepsOffsets(t *testing.T) {
	ctx := context.Background()
	fetch := func(c *Coordinator) int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		g := c.OffsetFetch(ctx, req).Groups[0]
		if g.ErrorCode != 0 || len(g.Topics) == 0 {
			return -2
		}
		return g.Topics[0].Partitions[0].Offset
	}
	store := newMemStore()
	c := newTestCoordinator(t, store)
	defer func() { c.Close() }()
	commitTo(t, c, "g")
	store.setFail(errors.New("not enough replicas"))
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = "g", "m", 0, []string{"t"}
	if code := c.ShareGroupHeartbeat(ctx, hb).ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("heartbeat with failing appends: %v", kerr.ErrorForCode(code))
	}
	store.setFail(nil)
	if got := fetch(c); got != 1 {
		t.Errorf("OffsetFetch after the failed conversion: %d, want 1", got)
	}
	c.Close()
	c = newTestCoordinator(t, store)
	if got := fetch(c); got != 1 {
		t.Errorf("OffsetFetch after a reload: %d, want 1", got)
	}
}

// TestFailedShareConversionLeavesSimpleGroup: a simple group that a share
// member's join would turn into a share group, when that write fails, is the
// simple group it was (Kafka's runtime reverts the failed write): no share
// group to describe, commits accepted again; the join, tried again, converts
// it and deletes its offsets.
func TestFailedShareConversionLeavesSimpleGroup(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	c := newTestCoordinator(t, store)
	defer func() { c.Close() }()
	commitTo(t, c, "g")
	store.setFail(errors.New("not enough replicas"))
	if code := firstShareHeartbeat(ctx, c); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join with failing appends: %v", kerr.ErrorForCode(code))
	}
	store.setFail(nil)
	d := c.ShareGroupDescribe(ctx, &kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"g"}}).Groups[0]
	if d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ShareGroupDescribe after the failed join: %v (%s), want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode), d.GroupState)
	}
	commitTo(t, c, "g")
	if code := firstShareHeartbeat(ctx, c); code != 0 {
		t.Fatalf("join again: %v", kerr.ErrorForCode(code))
	}
	for _, reload := range []bool{false, true} {
		if reload {
			c.Close()
			c = newTestCoordinator(t, store)
		}
		if offs, err := c.CommittedOffsets("g"); err != nil || len(offs) != 0 {
			t.Errorf("committed offsets once a share group (reload %v): %v, %v; want none", reload, offs, err)
		}
	}
}

// TestFailedStreamsConversionKeepsConsumerGroup: an empty consumer group that
// a streams member's join would turn into a streams group, when that write
// fails, is the consumer group it was, as the log holds it.
func TestFailedStreamsConversionKeepsConsumerGroup(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	c := newTestCoordinator(t, store)
	defer c.Close()
	if code := firstConsumerHeartbeat(ctx, c); code != 0 {
		t.Fatalf("consumer member joins: %v", kerr.ErrorForCode(code))
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "m", leaveEpoch
	if code := c.ConsumerGroupHeartbeat(ctx, leave).ErrorCode; code != 0 {
		t.Fatalf("consumer member leaves: %v", kerr.ErrorForCode(code))
	}
	describe := func() string {
		return describeJSON(t, c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).Groups)
	}
	before := describe()
	store.setFail(errors.New("not enough replicas"))
	if code := firstStreamsHeartbeat(ctx, c); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("streams join with failing appends: %v", kerr.ErrorForCode(code))
	}
	store.setFail(nil)
	if after := describe(); after != before {
		t.Errorf("after the failed streams join the group is\n%s\nwant the consumer group it was\n%s", after, before)
	}
}

// firstConsumerHeartbeat, firstShareHeartbeat and firstStreamsHeartbeat join
// member m to a new group g of their kind, subscribed to topic t, and return
// the heartbeat's error code.
func firstConsumerHeartbeat(ctx context.Context, c *Coordinator) int16 {
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m", 10000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return c.ConsumerGroupHeartbeat(ctx, hb).ErrorCode
}

func firstShareHeartbeat(ctx context.Context, c *Coordinator) int16 {
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = "g", "m", 0, []string{"t"}
	return c.ShareGroupHeartbeat(ctx, hb).ErrorCode
}

func firstStreamsHeartbeat(ctx context.Context, c *Coordinator) int16 {
	hb := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m", 10000
	top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	top.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"t"}}}
	hb.Topology = &top
	hb.ActiveTasks, hb.StandbyTasks, hb.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	r, _ := c.StreamsGroupHeartbeat(ctx, hb)
	return r.ErrorCode
}

// TestFailedHeartbeatRevertsGroup: a heartbeat to an existing consumer, share
// or streams group whose records fail to be appended leaves the group as it
// was, as Kafka's runtime reverts the failed write: the describe API answers
// the same before and after, and the same heartbeat, retried once appends
// work, succeeds.
func TestFailedHeartbeatRevertsGroup(t *testing.T) {
	ctx := context.Background()
	consumerHB := func(member string, epoch int32, topics ...string) func(*Coordinator) int16 {
		return func(c *Coordinator) int16 {
			hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = 1, "g", member, epoch, 10000
			hb.SubscribedTopicNames, hb.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return c.ConsumerGroupHeartbeat(ctx, hb).ErrorCode
		}
	}
	shareHB := func(member string, epoch int32, topics ...string) func(*Coordinator) int16 {
		return func(c *Coordinator) int16 {
			hb := kmsg.NewPtrShareGroupHeartbeatRequest()
			hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = "g", member, epoch, topics
			return c.ShareGroupHeartbeat(ctx, hb).ErrorCode
		}
	}
	streamsJoin := func(member string) func(*Coordinator) int16 {
		return func(c *Coordinator) int16 {
			hb := kmsg.NewPtrStreamsGroupHeartbeatRequest()
			hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.ProcessID = "g", member, 10000, &member
			top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
			top.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"t"}}}
			hb.Topology = &top
			hb.ActiveTasks, hb.StandbyTasks, hb.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
			r, _ := c.StreamsGroupHeartbeat(ctx, hb)
			return r.ErrorCode
		}
	}
	describe := map[string]func(*Coordinator) any{
		"consumer": func(c *Coordinator) any {
			return c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).Groups
		},
		"share": func(c *Coordinator) any {
			return c.ShareGroupDescribe(ctx, &kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"g"}}).Groups
		},
		"streams": func(c *Coordinator) any {
			return c.StreamsGroupDescribe(ctx, &kmsg.StreamsGroupDescribeRequest{Groups: []string{"g"}}).Groups
		},
	}
	tests := []struct {
		name, kind string
		setup      func(*Coordinator) int16 // the group's first member joins
		change     func(*Coordinator) int16 // the heartbeat whose write fails
	}{
		{"consumer/member joins", "consumer", consumerHB("m", 0, "t"), consumerHB("n", 0, "t")},
		{"consumer/subscription changes", "consumer", consumerHB("m", 0, "t"), consumerHB("m", 2, "t", "u")},
		{"share/member joins", "share", shareHB("m", 0, "t"), shareHB("n", 0, "t")},
		{"share/subscription changes", "share", shareHB("m", 0, "t"), shareHB("m", 2, "t", "u")},
		{"streams/member joins", "streams", streamsJoin("m"), streamsJoin("n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topics := newFakeTopics()
			topics.set("t", 4)
			topics.set("u", 4)
			store := newMemStore()
			cfg := DefaultConfig()
			cfg.GroupInitialRebalanceDelay, cfg.Topics = 0, topics
			cfg.ConsumerAssignmentInterval, cfg.ShareAssignmentInterval = time.Nanosecond, time.Nanosecond
			c := New(cfg, store, nil)
			defer c.Close()
			if err := loadAll(ctx, c, store); err != nil {
				t.Fatal(err)
			}
			if code := tt.setup(c); code != 0 {
				t.Fatalf("first member: %v", kerr.ErrorForCode(code))
			}
			before := describeJSON(t, describe[tt.kind](c))
			store.setFail(errors.New("not enough replicas"))
			if code := tt.change(c); code != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("heartbeat with failing appends: %v", kerr.ErrorForCode(code))
			}
			store.setFail(nil)
			if after := describeJSON(t, describe[tt.kind](c)); after != before {
				t.Errorf("after the failed heartbeat the group is\n%s\nwant it as before\n%s", after, before)
			}
			if code := tt.change(c); code != 0 {
				t.Errorf("the heartbeat retried: %v", kerr.ErrorForCode(code))
			}
		})
	}
}

// TestFailedHeartbeatFailsHeartbeatsQueuedBehind: heartbeats whose records
// are queued behind a write that fails built on it, so they fail with it, as
// Kafka fails the events of its failed batch, and write nothing: the group,
// in memory and after a reload, is what it was before the first of them.
func TestFailedHeartbeatFailsHeartbeatsQueuedBehind(t *testing.T) {
	ctx := context.Background()
	join := func(c *Coordinator, member string) int16 {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", member, 10000
		hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return c.ConsumerGroupHeartbeat(ctx, hb).ErrorCode
	}
	topics := newFakeTopics()
	topics.set("t", 4)
	store := newMemStore()
	start := func() *Coordinator {
		cfg := DefaultConfig()
		cfg.Topics, cfg.ConsumerAssignmentInterval = topics, time.Nanosecond
		c := New(cfg, store, nil)
		if err := loadAll(ctx, c, store); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	defer func() { c.Close() }()
	if code := join(c, "m"); code != 0 {
		t.Fatalf("first member: %v", kerr.ErrorForCode(code))
	}
	describe := func() string {
		return describeJSON(t, c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).Groups)
	}
	before := describe()
	store.setBlock()
	codes := make(chan int16, 2)
	go func() { codes <- join(c, "n1") }()
	wait.For(t, "n1's append to wait", func() bool { return store.blocked() == 1 })
	go func() { codes <- join(c, "n2") }()
	p, _ := c.partitionOf("g")
	g := p.lookup(c, "g", false)
	wait.For(t, "n2's write to be queued", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.writeQ) == 1
	})
	store.failOnce(errors.New("not enough replicas"))
	store.unblock()
	for range 2 {
		if code := <-codes; code != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("a join answered %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
	}
	if after := describe(); after != before {
		t.Errorf("after the failed joins the group is\n%s\nwant it as before\n%s", after, before)
	}
	c.Close()
	c = start()
	if after := describe(); after != before {
		t.Errorf("after a reload the group is\n%s\nwant it as before\n%s", after, before)
	}
}

// describeJSON is a describe API's answer as JSON, to compare two of them.
func describeJSON(t *testing.T, groups any) string {
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnrevertibleFailureForgetsWritesBuiltOnIt: when a write that cannot be
// taken back (revert.go: a classic group converting online, one being
// deleted) fails, the writes queued after it, which built on it, cannot be
// taken back either: their undo holds its records, which the log never got.
// Their failure marks their keys unknown, so the next change writes them
// again; taking them back restored the failed write's values as the log's,
// and a later write of the same values was skipped as unchanged.
func TestUnrevertibleFailureForgetsWritesBuiltOnIt(t *testing.T) {
	ctx := context.Background()
	topics := newFakeTopics()
	topics.set("t", 4)
	store := newMemStore()
	cfg := DefaultConfig()
	cfg.Topics, cfg.ConsumerAssignmentInterval = topics, time.Nanosecond
	c := New(cfg, store, nil)
	if err := loadAll(ctx, c, store); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", "m", 10000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if code := c.ConsumerGroupHeartbeat(ctx, hb).ErrorCode; code != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(code))
	}
	p, _ := c.partitionOf("g")
	g := p.lookup(c, "g", false)
	g.mu.Lock()
	defer g.mu.Unlock()
	key := appendRecordKey(nil, typeConsumerMetadata, g.id, "")
	first := []Record{{Key: key, Value: []byte("never appended")}}
	w1 := g.writeRecordsLocked(first)
	w1.revertible = false
	second := []Record{{Key: key, Value: []byte("never appended either")}}
	w2 := g.writeRecordsLocked(second)
	err := errors.New("not enough replicas")
	g.revertLocked(w1, first, err)
	g.revertLocked(w2, second, err)
	if v := g.written[string(key)]; len(v) > 0 {
		t.Errorf("after both writes failed, written holds %q for the group's metadata, want it unknown", v)
	}
}
