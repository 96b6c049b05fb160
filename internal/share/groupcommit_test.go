package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// gatedStore is a Store in memory whose first Save after arm blocks until release
// is closed (then fails with failFirst), so a test can hold a write in flight.
// Only the saves after arm are counted (calls, saves); those before it (the
// acquisitions a test sets up with) are kept as pre.
type gatedStore struct {
	release   chan struct{}
	entered   chan struct{} // closed when the first counted Save starts
	failFirst error

	mu    sync.Mutex
	armed bool
	init  *Snapshot  // the initialization, if any
	pre   *Snapshot  // the last save before arm
	saves []Snapshot // the successful saves after arm, in order
	calls int
}

func newGatedStore(failFirst error) *gatedStore {
	return &gatedStore{release: make(chan struct{}), entered: make(chan struct{}), failFirst: failFirst}
}

// arm makes the next Save block, and starts counting.
func (s *gatedStore) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *gatedStore) Load(context.Context, Key, int32) (Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch n := len(s.saves); {
	case n > 0:
		return s.saves[n-1], true, nil
	case s.pre != nil:
		return *s.pre, true, nil
	case s.init != nil:
		return *s.init, true, nil
	}
	return Snapshot{}, false, nil
}

// Initialize is not a write the test counts.
func (s *gatedStore) Initialize(_ context.Context, _ Key, stateEpoch int32, start int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.init == nil {
		s.init = &Snapshot{StateEpoch: stateEpoch, Start: start}
	}
	return nil
}

func (s *gatedStore) Save(ctx context.Context, _ Key, snap Snapshot) error {
	s.mu.Lock()
	if !s.armed {
		s.pre = &snap
		s.mu.Unlock()
		return nil
	}
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.failFirst != nil {
			return s.failFirst
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves = append(s.saves, snap)
	return nil
}

func (s *gatedStore) writes() (calls, saved int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, len(s.saves)
}

type testParts struct {
	img *metadata.Image
	rm  *replica.Manager
}

func (t testParts) Image() *metadata.Image             { return t.img }
func (t testParts) SyncMetadata(context.Context) error { return nil }
func (t testParts) Partition(topic string, index int32) (*replica.Partition, error) {
	return t.rm.Partition(topic, index)
}

var gcTopicID = metadata.UUID{7}

// newGroupCommitManager is newTestManager's, with records one-record batches in
// the partition.
func newGroupCommitManager(t *testing.T, store Store, records int) (*Manager, *replica.Partition) {
	t.Helper()
	m, rp := newTestManager(t, store)
	appendRecords(t, rp, records)
	return m, rp
}

// newTestManager is a share Manager on node 1 leading partition 0 of topic "t"
// (one replica, empty); groups start at the earliest offset with one-minute locks.
func newTestManager(t testing.TB, store Store) (*Manager, *replica.Partition) {
	t.Helper()
	return newTestManagerAt(t, store, 1)
}

// newTestManagerAt is newTestManager's under the data partition's leaderEpoch.
func newTestManagerAt(t testing.TB, store Store, leaderEpoch int32) (*Manager, *replica.Partition) {
	t.Helper()
	parts, rp := newTestParts(t, leaderEpoch)
	m := NewManager(Config{Defaults: testGroupConfig()}, store, parts, nil)
	t.Cleanup(m.Close)
	return m, rp
}

// testGroupConfig is the tests' group config: the earliest offset, one-minute
// locks.
func testGroupConfig() GroupConfig {
	cfg := DefaultGroupConfig()
	cfg.LockDuration = time.Minute
	cfg.AutoOffsetReset = "earliest"
	return cfg
}

// newTestParts is node 1 leading partition 0 of topic "t" (one replica, empty)
// under leaderEpoch, with more metadata records applied after.
func newTestParts(t testing.TB, leaderEpoch int32, more ...metadata.Record) (testParts, *replica.Partition) {
	t.Helper()
	rm, err := replica.NewManager(vfs.NewMem(), "/logs", 1, slog.New(slog.DiscardHandler), replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	img, err := metadata.ApplyAll(metadata.NewImage(), append([]metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "t", ID: gcTopicID},
		&metadata.PartitionRecord{TopicID: gcTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: leaderEpoch},
	}, more...))
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := rm.Apply(img); err != nil {
		t.Fatal(err)
	}
	rp, err := rm.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	return testParts{img: img, rm: rm}, rp
}

// appendRecords appends n one-record batches and waits for the high watermark
// to pass them.
func appendRecords(t *testing.T, rp *replica.Partition, n int) {
	t.Helper()
	// The log's end, not its high watermark: records appended before (an
	// open transaction's, acks=1) may not be below it yet.
	want := rp.LogEndOffset() + int64(n)
	for range n {
		if _, err := rp.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the high watermark", func() bool { return rp.HighWatermark() >= want })
}

// fetchOne opens member's share session and acquires one record; it returns its
// offset.
func fetchOne(t *testing.T, m *Manager, member string) int64 {
	t.Helper()
	resp := m.ShareFetch(context.Background(), openFetch(member))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%s: share fetch: %+v", member, resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].FirstOffset != p.AcquiredRecords[0].LastOffset {
		t.Fatalf("%s: want one acquired record, got code %d, %+v", member, p.ErrorCode, p.AcquiredRecords)
	}
	return p.AcquiredRecords[0].FirstOffset
}

// openFetch is a ShareFetch opening member's session of group g on partition 0
// of the test topic, for one record.
func openFetch(member string) *kmsg.ShareFetchRequest {
	g := "g"
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID = 1, &g, &member
	req.MaxRecords, req.MaxBytes = 1, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = gcTopicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

// accept acknowledges offset as ACCEPT in member's session (epoch 1) and returns
// the partition's code.
func accept(m *Manager, member string, offset int64) int16 {
	return acknowledgeAs(m, member, offset, Accept)
}

// acknowledgeAs acknowledges offset as typ in member's session (epoch 1) and
// returns the partition's code.
func acknowledgeAs(m *Manager, member string, offset int64, typ AckType) int16 {
	g := "g"
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &g, &member, 1
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = gcTopicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = offset, offset, []int8{int8(typ)}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.ShareAcknowledge(context.Background(), req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// waiting is how many saves wait for the next write of the group's share partition.
func waiting(m *Manager) int {
	m.mu.Lock()
	sp := m.mu.shares[Key{Group: "g", TopicID: gcTopicID, Partition: 0}]
	m.mu.Unlock()
	if sp == nil {
		return 0
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.next == nil {
		return 0
	}
	return sp.next.waiters
}

// runAcks has 16 members each acquire one record, then acknowledges the first
// member's while the store holds its write, then the 15 others' concurrently;
// once those wait on the next write another member fetches, and its acquisition
// (saved before it is answered) joins that write. Then it lets the first write
// end. It returns the acknowledgement codes and the late member's fetch.
func runAcks(t *testing.T, m *Manager, rp *replica.Partition, store *gatedStore) ([]int16, *kmsg.ShareFetchResponse) {
	const members = 16
	offsets := make([]int64, members)
	for i := range members {
		offsets[i] = fetchOne(t, m, fmt.Sprintf("m%d", i))
	}
	store.arm()
	codes := make([]int16, members)
	var wg sync.WaitGroup
	wg.Add(members)
	go func() {
		defer wg.Done()
		codes[0] = accept(m, "m0", offsets[0])
	}()
	select {
	case <-store.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first acknowledgement never reached the store")
	}
	for i := 1; i < members; i++ {
		go func() {
			defer wg.Done()
			codes[i] = accept(m, fmt.Sprintf("m%d", i), offsets[i])
		}()
	}
	wait.For(t, "15 acknowledgements waiting on the next write", func() bool { return waiting(m) == members-1 })
	// The partition is not locked during the write: another member acquires,
	// and its save joins the next write.
	appendRecords(t, rp, 1)
	late := make(chan *kmsg.ShareFetchResponse, 1)
	go func() { late <- m.ShareFetch(context.Background(), openFetch("late")) }()
	wait.For(t, "the late acquisition waiting on the next write", func() bool { return waiting(m) == members })
	close(store.release)
	wg.Wait()
	return codes, <-late
}

// lateFetch is the offset and delivery count the late member of runAcks
// acquired, or its partition's error code.
func lateFetch(t *testing.T, resp *kmsg.ShareFetchResponse) (offset int64, count, code int16) {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("late: share fetch: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 {
		return -1, 0, p.ErrorCode
	}
	return p.AcquiredRecords[0].FirstOffset, p.AcquiredRecords[0].DeliveryCount, 0
}

// TestAcksShareWrites: concurrent acknowledgements of a share partition share one
// state write (group commit) instead of one write each under the partition's lock,
// acquisitions go on while a write is in flight, and each acknowledgement is
// answered only once a write holding it is durable. Sixteen members acknowledging
// one record each, the first alone and the fifteen others while its write is in
// flight, take two writes: 0.125 per acknowledged record (one per record, 16,
// before the group commit). A member that acquires meanwhile shares the second.
func TestAcksShareWrites(t *testing.T) {
	store := newGatedStore(nil)
	m, rp := newGroupCommitManager(t, store, 16)
	codes, late := runAcks(t, m, rp, store)
	for i, c := range codes {
		if c != 0 {
			t.Errorf("member m%d: acknowledgement code %d", i, c)
		}
	}
	if o, n, code := lateFetch(t, late); o != 16 || n != 1 {
		t.Errorf("the late member acquired offset %d at count %d (code %d), want 16 at 1", o, n, code)
	}
	calls, saved := store.writes()
	if calls != 2 || saved != 2 {
		t.Fatalf("%d writes (%d durable) for 16 acknowledged records, want 2", calls, saved)
	}
	t.Logf("state writes per acknowledged record: %.3f", float64(calls)/16)
	last := store.saves[1]
	if last.Start != 16 {
		t.Fatalf("the last write starts at %d, want 16 (every record accepted): %+v", last.Start, last)
	}
	if first := store.saves[0]; first.Start != 1 {
		t.Fatalf("the first write starts at %d, want 1 (m0's record alone): %+v", first.Start, first)
	}
}

// TestFailedWriteFailsWaitingAcks: when the write in flight fails, the
// acknowledgements applied after it (waiting on the next write) fail too, as the
// in-memory state they changed is dropped; the reload delivers the records again,
// at the delivery counts saved with their acquisitions. The acquisition waiting
// on the same write hands nothing out.
func TestFailedWriteFailsWaitingAcks(t *testing.T) {
	store := newGatedStore(errors.New("state partition unavailable"))
	m, rp := newGroupCommitManager(t, store, 16)
	codes, late := runAcks(t, m, rp, store)
	for i, c := range codes {
		if c != kerr.UnknownServerError.Code {
			t.Errorf("member m%d: acknowledgement code %d, want UNKNOWN_SERVER_ERROR", i, c)
		}
	}
	if o, _, code := lateFetch(t, late); code != kerr.UnknownServerError.Code {
		t.Errorf("the late member's fetch, saved by the failed write: offset %d, code %d, want UNKNOWN_SERVER_ERROR", o, code)
	}
	if calls, saved := store.writes(); calls != 1 || saved != 0 {
		t.Fatalf("%d writes (%d durable), want the failed one only", calls, saved)
	}
	resp := m.ShareFetch(context.Background(), openFetch("again"))
	if o, n, code := lateFetch(t, resp); o != 0 || n != 2 {
		t.Fatalf("after the failed write a member acquired offset %d at count %d (code %d), want 0 at 2 (nothing accepted; delivered once)", o, n, code)
	}
}
