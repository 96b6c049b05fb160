package group

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// txnMemStore is a memStore that also takes transactional appends: their
// records and their transactions' markers are in the log as a replay yields
// them.
type txnMemStore struct{ *memStore }

func newTxnMemStore() *txnMemStore { return &txnMemStore{newMemStore()} }

func (s *txnMemStore) AppendTxn(ctx context.Context, p, epoch int32, pid int64, _ int16, recs []Record) (int64, error) {
	txn := make([]Record, len(recs))
	for i, r := range recs {
		r.Txn, r.ProducerID = true, pid
		txn[i] = r
	}
	return s.Append(ctx, p, epoch, txn)
}

// endTxn writes producer pid's transaction marker to partition p and tells c,
// as the broker does.
func (s *txnMemStore) endTxn(t *testing.T, c *Coordinator, p int32, pid int64, commit bool) {
	t.Helper()
	if _, err := s.Append(context.Background(), p, 0, []Record{{Txn: true, Marker: true, ProducerID: pid, Commit: commit}}); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxnOffsets(p, pid, commit)
}

func txnCommit(c *Coordinator, group string, pid int64, generation int32, offset int64) *kmsg.TxnOffsetCommitResponse {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.Group, req.ProducerID, req.Generation = group, pid, generation
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.TxnOffsetCommit(context.Background(), req)
}

// fetchStable returns t/0's offset and error code for group as OffsetFetch v7
// with RequireStable answers.
func fetchStable(c *Coordinator, group string, stable bool) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, stable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := c.OffsetFetch(context.Background(), req)
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func TestTxnOffsetCommit(t *testing.T) {
	store := newTxnMemStore()
	cfg := DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	c := New(cfg, store, nil)
	t.Cleanup(c.Close)
	if err := loadAll(context.Background(), c, store.memStore); err != nil {
		t.Fatal(err)
	}
	part := PartitionFor("g", cfg.OffsetsTopicPartitions)

	if code := txnCommit(c, "g", 7, -1, 5).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	if off, code := fetchStable(c, "g", true); code != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Fatalf("RequireStable fetch with a pending commit: %d %v", off, kerr.ErrorForCode(code))
	}
	if off, code := fetchStable(c, "g", false); code != 0 || off != -1 {
		t.Fatalf("a pending commit must be invisible: %d %v", off, kerr.ErrorForCode(code))
	}
	store.endTxn(t, c, part, 7, true)
	if off, code := fetchStable(c, "g", true); code != 0 || off != 5 {
		t.Fatalf("after the commit marker: %d %v", off, kerr.ErrorForCode(code))
	}

	txnCommit(c, "g", 8, -1, 9)
	store.endTxn(t, c, part, 8, false)
	if off, _ := fetchStable(c, "g", true); off != 5 {
		t.Fatalf("an aborted commit moved the offset to %d", off)
	}

	if code := txnCommit(c, "other", 7, 3, 1).Topics[0].Partitions[0].ErrorCode; code != kerr.IllegalGeneration.Code {
		t.Fatalf("a generation for an unknown group: %v", kerr.ErrorForCode(code))
	}

	// A replay keeps a still-open transaction's commits pending.
	txnCommit(c, "g", 9, -1, 12)
	c2 := New(cfg, store, nil)
	t.Cleanup(c2.Close)
	if err := c2.LoadPartitionAt(context.Background(), part, 0, store.records(part)); err != nil {
		t.Fatal(err)
	}
	if off, code := fetchStable(c2, "g", true); code != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Fatalf("replayed pending commit: %d %v", off, kerr.ErrorForCode(code))
	}
	if off, code := fetchStable(c2, "g", false); code != 0 || off != 5 {
		t.Fatalf("replayed offset: %d %v, want the committed transaction's 5", off, kerr.ErrorForCode(code))
	}
	store.endTxn(t, c2, part, 9, true)
	if off, code := fetchStable(c2, "g", true); code != 0 || off != 12 {
		t.Fatalf("replayed commit after its marker: %d %v", off, kerr.ErrorForCode(code))
	}
}

// TestTxnOffsetCommitVersions: a group not found and a KIP-848 member's newer
// epoch are ILLEGAL_GENERATION before TxnOffsetCommit v6 and GROUP_ID_NOT_FOUND
// and STALE_MEMBER_EPOCH from v6 (KIP-1319), as a Kafka 4.4 node answered them
// (interop/cmd/topicidcompare); a member's own epoch commits at both.
func TestTxnOffsetCommitVersions(t *testing.T) {
	store := newTxnMemStore()
	cfg := DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	c := New(cfg, store, nil)
	t.Cleanup(c.Close)
	if err := loadAll(context.Background(), c, store.memStore); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "cg", "m1", 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	joined := c.ConsumerGroupHeartbeat(context.Background(), hb)
	if joined.ErrorCode != 0 || joined.MemberEpoch < 1 {
		t.Fatalf("joining: %v, epoch %d", kerr.ErrorForCode(joined.ErrorCode), joined.MemberEpoch)
	}
	for _, tc := range []struct {
		name       string
		version    int16
		group      string
		member     string
		generation int32
		want       *kerr.Error
	}{
		{"unknown group, v5", 5, "nog", "m", 3, kerr.IllegalGeneration},
		{"unknown group, v6", 6, "nog", "m", 3, kerr.GroupIDNotFound},
		{"newer member epoch, v5", 5, "cg", "m1", joined.MemberEpoch + 1, kerr.IllegalGeneration},
		{"newer member epoch, v6", 6, "cg", "m1", joined.MemberEpoch + 1, kerr.StaleMemberEpoch},
		{"member epoch, v5", 5, "cg", "m1", joined.MemberEpoch, nil},
		{"member epoch, v6", 6, "cg", "m1", joined.MemberEpoch, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.Group, req.ProducerID = tc.version, tc.group, 7
			req.MemberID, req.Generation = tc.member, tc.generation
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got := c.TxnOffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode; got != want {
				t.Errorf("answered %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(want))
			}
		})
	}
}

// TestTxnOffsetsDeleted: deleting an offset (OffsetDelete), its topic or its
// group also deletes the transactional commits of it still pending, as
// Kafka's OffsetMetadataManager does (a tombstone removes the open
// transactions' offsets of its partition): the transaction's commit marker
// then brings nothing back, and the log ends with the partition's tombstone,
// so a replay agrees.
func TestTxnOffsetsDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		del  func(t *testing.T, c *Coordinator)
	}{
		{"OffsetDelete", func(t *testing.T, c *Coordinator) {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "g"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.OffsetDelete(context.Background(), req)
			if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("OffsetDelete: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
			}
		}},
		{"TopicsDeleted", func(_ *testing.T, c *Coordinator) { c.TopicsDeleted("t") }},
		{"DeleteGroups", func(t *testing.T, c *Coordinator) {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = []string{"g"}
			if code := c.DeleteGroups(context.Background(), req).Groups[0].ErrorCode; code != 0 {
				t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(code))
			}
		}},
	} {
		for _, committed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/committed=%v", tc.name, committed), func(t *testing.T) {
				store := newTxnMemStore()
				cfg := DefaultConfig()
				cfg.OffsetsTopicPartitions = 1
				c := New(cfg, store, nil)
				t.Cleanup(c.Close)
				if err := loadAll(context.Background(), c, store.memStore); err != nil {
					t.Fatal(err)
				}
				if committed {
					commitSimple(t, c, "g", 3)
				}
				if code := txnCommit(c, "g", 7, -1, 5).Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
				}
				tc.del(t, c)
				waitTombstone(t, store.memStore, offsetKey("g", topicPartition{"t", 0}))
				if off, code := fetchStable(c, "g", true); code != 0 || off != -1 {
					t.Fatalf("after the delete: %d %v, want -1 and no pending commit", off, kerr.ErrorForCode(code))
				}
				store.endTxn(t, c, 0, 7, true)
				if off, code := fetchStable(c, "g", true); code != 0 || off != -1 {
					t.Fatalf("the commit marker brought back offset %d (%v)", off, kerr.ErrorForCode(code))
				}
				waitIdle(t, c)
				reloaded := New(cfg, store, nil)
				t.Cleanup(reloaded.Close)
				if err := loadAll(context.Background(), reloaded, store.memStore); err != nil {
					t.Fatal(err)
				}
				if off, code := fetchStable(reloaded, "g", true); code != 0 || off != -1 {
					t.Fatalf("after a reload: offset %d (%v), want -1", off, kerr.ErrorForCode(code))
				}
			})
		}
	}
}

// commitSimple commits t/0 of group as a consumer outside group management.
func commitSimple(t *testing.T, c *Coordinator, group string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 9, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if code := c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: %v", kerr.ErrorForCode(code))
	}
}

// waitTombstone waits until partition 0's log ends key with a tombstone.
func waitTombstone(t *testing.T, s *memStore, key []byte) {
	t.Helper()
	wait.For(t, "the offset's tombstone to end the log", func() bool {
		var last *Record
		for _, r := range s.log(0) {
			if bytes.Equal(r.Key, key) {
				last = &r
			}
		}
		return last != nil && last.Value == nil
	})
}

// TestTxnOffsetsKeepGroup: as Kafka's cleanupExpiredOffsets, an offset with a
// transactional commit pending does not expire, and a group with a
// transaction open is not deleted; a TxnOffsetCommit outside group management
// creates the (simple) group, as Kafka's does.
func TestTxnOffsetsKeepGroup(t *testing.T) {
	store := newTxnMemStore()
	var now atomic.Int64
	now.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 1
	cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	c := New(cfg, store, nil)
	t.Cleanup(c.Close)
	if err := loadAll(context.Background(), c, store.memStore); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		var ids []string
		for _, g := range c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()).Groups {
			ids = append(ids, g.Group)
		}
		return ids
	}

	txnCommit(c, "pend", 7, -1, 5)
	if got := listed(); !slices.Equal(got, []string{"pend"}) {
		t.Fatalf("groups after a TxnOffsetCommit: %q, want the simple group", got)
	}
	commitSimple(t, c, "g", 3)
	txnCommit(c, "g", 8, -1, 5)
	now.Add(int64(cfg.OffsetsRetention + time.Minute))
	c.expireOffsets()
	waitIdle(t, c)
	if got := listed(); !slices.Equal(got, []string{"g", "pend"}) {
		t.Fatalf("groups after the retention check: %q", got)
	}
	store.endTxn(t, c, 0, 8, false)
	if off, _ := fetchStable(c, "g", true); off != 3 {
		t.Fatalf("offset %d after the transaction aborted, want the committed 3 kept", off)
	}
}

// waitIdle waits until no group of c has a write queued or running.
func waitIdle(t *testing.T, c *Coordinator) {
	t.Helper()
	wait.For(t, "the group writes to end", func() bool {
		busy := false
		parts, _ := c.loadedPartitions()
		for _, p := range parts {
			for _, g := range p.snapshot() {
				g.withLock(func() { busy = busy || g.writing || len(g.writeQ) > 0 })
			}
		}
		return !busy
	})
}

// TestTxnOffsetCommitRacesDeleteGroups: a DeleteGroups that comes while a
// TxnOffsetCommit's append is in flight deletes the transaction's commit too,
// as in Kafka, where the commit applies at once and the deletion's tombstones
// follow it in the log: the commit marker brings neither the offset nor the
// group back, live or after a reload.
func TestTxnOffsetCommitRacesDeleteGroups(t *testing.T) {
	store := newTxnMemStore()
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 1
	c := New(cfg, store, nil)
	t.Cleanup(c.Close)
	ctx := context.Background()
	if err := loadAll(ctx, c, store.memStore); err != nil {
		t.Fatal(err)
	}
	store.setBlock()
	committed, deleted := make(chan int16, 1), make(chan int16, 1)
	go func() { committed <- txnCommit(c, "g", 7, -1, 5).Topics[0].Partitions[0].ErrorCode }()
	wait.For(t, "the TxnOffsetCommit's append to wait", func() bool { return store.blocked() == 1 })
	go func() {
		deleted <- c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}).Groups[0].ErrorCode
	}()
	wait.For(t, "DeleteGroups to take the group", func() bool {
		dead := false
		withGroupLocked(c, "g", func(g *group) { dead = g.state == stateDead })
		return dead
	})
	store.unblock()
	if code := <-committed; code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	if code := <-deleted; code != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(code))
	}
	store.endTxn(t, c, 0, 7, true)
	waitIdle(t, c)
	reloaded := New(cfg, store, nil)
	t.Cleanup(reloaded.Close)
	if err := loadAll(ctx, reloaded, store.memStore); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Coordinator{c, reloaded} {
		if groups := c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest()).Groups; len(groups) != 0 {
			t.Errorf("groups after the commit marker: %+v, want none", groups)
		}
		if off, code := fetchStable(c, "g", true); code != 0 || off != -1 {
			t.Errorf("offset after the commit marker: %d (%v), want -1", off, kerr.ErrorForCode(code))
		}
	}
}

// TestCommitToModernGroups: what OffsetCommit and TxnOffsetCommit answer for a
// share group, a KIP-848 consumer group and a streams group, each with a
// member, as Kafka 4's group coordinator does. A share group has no committed
// offsets: every commit is GROUP_ID_NOT_FOUND (ShareGroup.validateOffsetCommit),
// at every version (Kafka maps that code to ILLEGAL_GENERATION before
// TxnOffsetCommit v6 only for a group that does not exist). A consumer or streams
// group takes a TxnOffsetCommit that names no member, generation -1, whatever
// its members (KAFKA-18060), and refuses a plain one (UNKNOWN_MEMBER_ID).
func TestCommitToModernGroups(t *testing.T) {
	ctx := context.Background()
	store := newTxnMemStore()
	cfg := DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	c := New(cfg, store, nil)
	t.Cleanup(c.Close)
	if err := loadAll(ctx, c, store.memStore); err != nil {
		t.Fatal(err)
	}
	sg := kmsg.NewPtrShareGroupHeartbeatRequest()
	sg.GroupID, sg.MemberID, sg.MemberEpoch, sg.SubscribedTopicNames = "share", "m", 0, []string{"t"}
	if r := c.ShareGroupHeartbeat(ctx, sg); r.ErrorCode != 0 {
		t.Fatalf("share group heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.RebalanceTimeoutMillis = "consumer", "m", 10000
	cg.SubscribedTopicNames, cg.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := c.ConsumerGroupHeartbeat(ctx, cg); r.ErrorCode != 0 {
		t.Fatalf("consumer group heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	st := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	st.Group, st.MemberID, st.RebalanceTimeoutMillis = "streams", "m", 10000
	top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	top.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"t"}}}
	st.Topology = &top
	st.ActiveTasks, st.StandbyTasks, st.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	if r, _ := c.StreamsGroupHeartbeat(ctx, st); r.ErrorCode != 0 {
		t.Fatalf("streams group heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	txn := func(group string, version int16, generation int32, member string) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.Group, req.ProducerID = version, group, 7
		req.Generation, req.MemberID = generation, member
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
		return c.TxnOffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode
	}
	plain := func(group string, version int16) int16 {
		return simpleCommit(c, group, version, map[topicPartition]int64{{"t", 0}: 5}).Topics[0].Partitions[0].ErrorCode
	}
	for _, tt := range []struct {
		name   string
		commit func() int16
		want   int16
	}{
		{"share, TxnOffsetCommit v3 generation -1", func() int16 { return txn("share", 3, -1, "") }, kerr.GroupIDNotFound.Code},
		{"share, TxnOffsetCommit v0", func() int16 { return txn("share", 0, -1, "") }, kerr.GroupIDNotFound.Code},
		{"share, TxnOffsetCommit v5 with a member", func() int16 { return txn("share", 5, 1, "m") }, kerr.GroupIDNotFound.Code},
		{"share, TxnOffsetCommit v6 with a member", func() int16 { return txn("share", 6, 1, "m") }, kerr.GroupIDNotFound.Code},
		{"share, OffsetCommit v9", func() int16 { return plain("share", 9) }, kerr.GroupIDNotFound.Code},
		{"share, OffsetCommit v2", func() int16 { return plain("share", 2) }, kerr.GroupIDNotFound.Code},
		{"consumer, TxnOffsetCommit v3 generation -1", func() int16 { return txn("consumer", 3, -1, "") }, 0},
		{"consumer, OffsetCommit v9 generation -1", func() int16 { return plain("consumer", 9) }, kerr.UnknownMemberID.Code},
		{"streams, TxnOffsetCommit v3 generation -1", func() int16 { return txn("streams", 3, -1, "") }, 0},
		{"streams, OffsetCommit v9 generation -1", func() int16 { return plain("streams", 9) }, kerr.UnknownMemberID.Code},
	} {
		if got := tt.commit(); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tt.want))
		}
	}
	// The share group took no offsets: its only transaction's marker commits none.
	store.endTxn(t, c, PartitionFor("share", cfg.OffsetsTopicPartitions), 7, true)
	if offs, err := c.CommittedOffsets("share"); err != nil || len(offs) != 0 {
		t.Errorf("share group offsets %v %v, want none", offs, err)
	}
}
