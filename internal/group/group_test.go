package group

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelectProtocol(t *testing.T) {
	mem := func(names ...string) *member {
		m := &member{}
		for _, n := range names {
			m.protocols = append(m.protocols, protocol{name: n})
		}
		return m
	}
	tests := []struct {
		name    string
		members []*member
		want    string
	}{
		{"none", nil, ""},
		{"single member takes its first", []*member{mem("a", "b")}, "a"},
		{"only common protocols count", []*member{mem("x", "a", "b"), mem("b", "a")}, "a"},
		{"majority wins", []*member{mem("a", "b"), mem("b", "a"), mem("b", "a")}, "b"},
		{"tie goes to earliest member's vote", []*member{mem("b", "a"), mem("a", "b")}, "b"},
		{"three-way tie", []*member{mem("c", "a", "b"), mem("a", "b", "c"), mem("b", "c", "a")}, "c"},
		{"nothing common", []*member{mem("a"), mem("b")}, ""},
		{"duplicates in one member", []*member{mem("a", "a", "b"), mem("b", "a")}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := selectProtocol(tt.members); got != tt.want {
				t.Fatalf("selectProtocol = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	vs := Versions()
	want := map[int16][2]int16{
		8: {2, 10}, 9: {1, 10}, 11: {0, 9}, 12: {0, 4}, 13: {0, 5},
		14: {0, 5}, 15: {0, 6}, 16: {0, 5}, 42: {0, 3}, 47: {0, 0},
		68: {0, 1}, 69: {0, 1}, 76: {1, 1}, 77: {1, 1}, 88: {0, 1}, 89: {0, 1}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0},
		93: {0, 0},
	}
	if len(vs) != len(want) {
		t.Fatalf("%d APIs, want %d", len(vs), len(want))
	}
	for i, v := range vs {
		if i > 0 && vs[i-1].Key >= v.Key {
			t.Errorf("keys not ascending at %d", v.Key)
		}
		if w := want[v.Key]; w != [2]int16{v.Min, v.Max} {
			t.Errorf("key %d: %d-%d, want %d-%d", v.Key, v.Min, v.Max, w[0], w[1])
		}
		req := kmsg.RequestForKey(v.Key)
		if req == nil || v.Max > req.MaxVersion() {
			t.Errorf("key %d: max %d beyond kmsg", v.Key, v.Max)
		}
	}
	vs[0].Max = 99 // the caller's copy
	if Versions()[0].Max == 99 {
		t.Fatal("Versions shares its table")
	}
}

// TestStoreErrorCode: Kafka 4.4's codes for a failed append
// (CoordinatorOperationExceptionHelper.handleOperationException).
func TestStoreErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{fmt.Errorf("x: %w", ErrNotCoordinator), kerr.NotCoordinator.Code},
		{fmt.Errorf("x: %w", ErrRecordTooLarge), kerr.UnknownServerError.Code},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable.Code},
		{fmt.Errorf("x: %w", ErrInvalidProducerEpoch), kerr.InvalidProducerEpoch.Code},
		{errors.New("not enough replicas"), kerr.CoordinatorNotAvailable.Code},
	}
	for _, tt := range tests {
		if got := AppendErrorCode(tt.err); got != tt.want {
			t.Errorf("%v: %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestConfig(t *testing.T) {
	got := Config{MinSessionTimeout: time.Second}.withDefaults()
	d := DefaultConfig()
	if got.MinSessionTimeout != time.Second || got.MaxSessionTimeout != d.MaxSessionTimeout ||
		got.OffsetsRetention != d.OffsetsRetention || got.OffsetsTopicPartitions != 50 ||
		got.GroupInitialRebalanceDelay != 0 || got.Now == nil || got.OffsetMetadataMaxBytes != 4096 ||
		got.StreamsSessionTimeout != 45*time.Second || got.StreamsHeartbeatInterval != 5*time.Second {
		t.Fatalf("withDefaults = %+v", got)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: time.Minute}).Validate(); err == nil {
		t.Fatal("min above max accepted")
	}
}

func TestMemberID(t *testing.T) {
	a, b := newMemberID("client", ""), newMemberID("client", "")
	if a == b || len(a) != len("client-")+36 || a[:7] != "client-" {
		t.Fatalf("member ids %q %q", a, b)
	}
	if s := newMemberID("client", "inst"); s[:5] != "inst-" {
		t.Fatalf("static member id %q does not start with the instance id", s)
	}
}

// newTestCoordinator returns a coordinator with every partition loaded from store.
func newTestCoordinator(t testing.TB, store *memStore) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	c := New(cfg, store, nil)
	if err := loadAll(context.Background(), c, store); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAppendsCarryTheLoadsEpoch: a partition's writes carry the leader epoch
// it was loaded at; once the broker leads it at a newer one (before the
// reload), the store refuses them and the commit is NOT_COORDINATOR.
func TestAppendsCarryTheLoadsEpoch(t *testing.T) {
	store := newMemStore()
	c := New(DefaultConfig(), store, nil)
	p := PartitionFor("g", c.cfg.OffsetsTopicPartitions)
	store.epochs = map[int32]int32{p: 4}
	if err := c.LoadPartitionAt(context.Background(), p, 4, store.records(p)); err != nil {
		t.Fatal(err)
	}
	commit := map[topicPartition]int64{{"t", 0}: 10}
	if code := simpleCommit(c, "g", 8, commit).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit at the load's epoch: %v", kerr.ErrorForCode(code))
	}
	store.mu.Lock()
	store.epochs[p] = 5
	store.mu.Unlock()
	if code := simpleCommit(c, "g", 8, commit).Topics[0].Partitions[0].ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("commit led at a newer epoch: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
}

func simpleCommit(c *Coordinator, group string, version int16, offsets map[topicPartition]int64) *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group = group
	for tp, o := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = tp.partition, o
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return c.OffsetCommit(context.Background(), req)
}

func TestCloseAnswersWaiters(t *testing.T) {
	c := newTestCoordinator(t, newMemStore())
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 3
		req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 60000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		return c.JoinGroup(context.Background(), req)
	}
	first := join("")
	if first.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	// A second member waits for the first to rejoin: 60s, unless Close answers.
	done := make(chan *kmsg.JoinGroupResponse)
	go func() { done <- join("") }()
	wait.For(t, "the condition", func() bool {
		d := c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
		return len(d.Groups[0].Members) == 2
	})
	c.Close()
	if r := <-done; r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join after Close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := join(""); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join after Close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("list after Close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := c.LoadPartitionAt(context.Background(), 0, 0, newMemStore().records(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("load after Close: %v", err)
	}
	if _, err := c.CommittedOffsets("g"); !errors.Is(err, ErrClosed) {
		t.Fatalf("CommittedOffsets after Close: %v", err)
	}
	c.Close() // idempotent
}

func TestJoinCancelledContextStillJoins(t *testing.T) {
	c := newTestCoordinator(t, newMemStore())
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3
	req.Group, req.ProtocolType = "g", "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	c.JoinGroup(ctx, req) // the answer may be dropped; the join counts
	d := c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
	if len(d.Groups[0].Members) != 1 {
		t.Fatalf("members after a join with a cancelled context: %+v", d.Groups[0])
	}
}

func TestOffsetFetchManyGroups(t *testing.T) {
	store := newMemStore()
	c := newTestCoordinator(t, store)
	defer c.Close()
	tp := topicPartition{"t", 0}
	for _, g := range []string{"a", "b", "elsewhere"} {
		if r := simpleCommit(c, g, 9, map[topicPartition]int64{tp: int64(len(g))}); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s: %v", g, kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
	}
	c.UnloadPartition(PartitionFor("elsewhere", 50))

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	for _, g := range []string{"a", "b", "elsewhere", "none"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		if g == "b" {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		}
		req.Groups = append(req.Groups, rg)
	}
	resp := c.OffsetFetch(context.Background(), req)
	got := map[string]string{}
	for _, g := range resp.Groups {
		s := errName(g.ErrorCode)
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				s += fmt.Sprintf(" %s/%d=%d", t.Topic, p.Partition, p.Offset)
			}
		}
		got[g.Group] = s
	}
	want := map[string]string{
		"a":         "NONE t/0=1",
		"b":         "NONE t/0=1 t/1=-1",
		"elsewhere": "NOT_COORDINATOR",
		"none":      "NONE",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// TestResponsesEncode sends every API at every supported version and checks that
// the response encodes and decodes back at that version: handlers send them as is.
func TestResponsesEncode(t *testing.T) {
	c := newTestCoordinator(t, newMemStore())
	defer c.Close()
	ctx := WithClient(context.Background(), Client{ID: "c", Host: "/127.0.0.1"})
	simpleCommit(c, "g", 9, map[topicPartition]int64{{"t", 0}: 1})
	for _, v := range Versions() {
		for ver := v.Min; ver <= v.Max; ver++ {
			req := kmsg.RequestForKey(v.Key)
			req.SetVersion(ver)
			var resp kmsg.Response
			switch r := req.(type) {
			case *kmsg.OffsetCommitRequest:
				r.Group, r.Generation = "g", -1
				r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2}}}}
				resp = c.OffsetCommit(ctx, r)
			case *kmsg.OffsetFetchRequest:
				r.Group = "g"
				r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
				resp = c.OffsetFetch(ctx, r)
			case *kmsg.JoinGroupRequest:
				r.Group, r.ProtocolType = fmt.Sprintf("j%d", ver), "consumer"
				r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
				r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
				resp = c.JoinGroup(ctx, r)
			case *kmsg.HeartbeatRequest:
				r.Group, r.MemberID = "g", "m"
				resp = c.Heartbeat(ctx, r)
			case *kmsg.LeaveGroupRequest:
				r.Group, r.MemberID = "g", "m"
				r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
				resp = c.LeaveGroup(ctx, r)
			case *kmsg.SyncGroupRequest:
				r.Group, r.MemberID = "g", "m"
				resp = c.SyncGroup(ctx, r)
			case *kmsg.DescribeGroupsRequest:
				r.Groups = []string{"g", "j9"}
				resp = c.DescribeGroups(ctx, r)
			case *kmsg.ListGroupsRequest:
				resp = c.ListGroups(ctx, r)
			case *kmsg.DeleteGroupsRequest:
				r.Groups = []string{"nope"}
				resp = c.DeleteGroups(ctx, r)
			case *kmsg.OffsetDeleteRequest:
				r.Group = "nope"
				resp = c.OffsetDelete(ctx, r)
			case *kmsg.ConsumerGroupHeartbeatRequest:
				r.Group, r.MemberID, r.RebalanceTimeoutMillis = fmt.Sprintf("cg%d", ver), "m", 10000
				r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				resp = c.ConsumerGroupHeartbeat(ctx, r)
			case *kmsg.ConsumerGroupDescribeRequest:
				r.Groups = []string{"cg0", "g"}
				resp = c.ConsumerGroupDescribe(ctx, r)
			case *kmsg.ShareGroupHeartbeatRequest:
				r.GroupID, r.MemberID, r.SubscribedTopicNames = fmt.Sprintf("sg%d", ver), "m", []string{"t"}
				resp = c.ShareGroupHeartbeat(ctx, r)
			case *kmsg.ShareGroupDescribeRequest:
				r.GroupIDs = []string{"sg1", "g"}
				resp = c.ShareGroupDescribe(ctx, r)
			case *kmsg.StreamsGroupHeartbeatRequest:
				r.Group, r.MemberID, r.RebalanceTimeoutMillis = fmt.Sprintf("st%d", ver), "m", 10000
				top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
				top.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"t"}}}
				r.Topology = &top
				r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
				resp, _ = c.StreamsGroupHeartbeat(ctx, r)
			case *kmsg.StreamsGroupDescribeRequest:
				r.Groups = []string{"st0", "g"}
				r.IncludeTopologyDescription = true
				resp = c.StreamsGroupDescribe(ctx, r)
			case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
				r.Group, r.MemberID = "st0", "m"
				resp = c.StreamsGroupTopologyDescriptionUpdate(ctx, r)
			case *kmsg.DescribeShareGroupOffsetsRequest:
				r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg1"}}
				resp = c.DescribeShareGroupOffsets(ctx, r)
			case *kmsg.AlterShareGroupOffsetsRequest:
				r.GroupID = "sg1"
				resp = c.AlterShareGroupOffsets(ctx, r)
			case *kmsg.DeleteShareGroupOffsetsRequest:
				r.GroupID = "sg1"
				resp = c.DeleteShareGroupOffsets(ctx, r)
			default:
				t.Fatalf("no case for key %d", v.Key)
			}
			if resp.Key() != v.Key || resp.GetVersion() != ver {
				t.Fatalf("key %d v%d: response key %d v%d", v.Key, ver, resp.Key(), resp.GetVersion())
			}
			back := req.ResponseKind()
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("key %d v%d: response does not decode: %v", v.Key, ver, err)
			}
		}
	}
}

// TestJoinGroupV0V1: JoinGroup v0 and v1, listed and served as Kafka 4.4 does,
// join as v2 does; v0 carries no rebalance timeout, so the session timeout
// serves for it, and v1's is its own. The requests are read from the wire.
func TestJoinGroupV0V1(t *testing.T) {
	tests := []struct {
		version       int16
		wantRebalance time.Duration
	}{
		{0, 10 * time.Second},
		{1, 45 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("v%d", tt.version), func(t *testing.T) {
			c := newTestCoordinator(t, newMemStore())
			defer c.Close()
			sent := kmsg.NewPtrJoinGroupRequest()
			sent.Version = tt.version
			sent.Group, sent.ProtocolType = "g", "consumer"
			sent.SessionTimeoutMillis, sent.RebalanceTimeoutMillis = 10000, 45000
			sent.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = tt.version
			if err := req.ReadFrom(sent.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			resp := c.JoinGroup(context.Background(), req)
			if resp.ErrorCode != 0 || resp.MemberID == "" || resp.Generation != 1 || resp.LeaderID != resp.MemberID {
				t.Fatalf("join: %+v", resp)
			}
			p, _ := c.partitionOf("g")
			g := p.lookup(c, "g", false)
			var rebalance time.Duration
			g.withLock(func() { rebalance = g.members[resp.MemberID].rebalanceTimeout })
			if rebalance != tt.wantRebalance {
				t.Errorf("rebalance timeout %v, want %v", rebalance, tt.wantRebalance)
			}
		})
	}
}
