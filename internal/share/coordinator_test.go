package share

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/replica"
)

// memStateLog is a StateLog in memory: the records of each partition, appended
// while it leads.
type memStateLog struct {
	mu      sync.Mutex
	recs    map[int32][]group.Record
	deposed bool            // appends fail as on a node that lost the partition
	epochs  map[int32]int32 // the leader epoch each partition is led at (0 unless set): appends of another fail
}

func (l *memStateLog) Append(_ context.Context, p, epoch int32, records []group.Record) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deposed {
		return 0, fmt.Errorf("%w: not the leader", group.ErrNotCoordinator)
	}
	if led := l.epochs[p]; epoch != led {
		return 0, fmt.Errorf("%w: a write of leader epoch %d, led at %d", group.ErrNotCoordinator, epoch, led)
	}
	if l.recs == nil {
		l.recs = map[int32][]group.Record{}
	}
	first := int64(len(l.recs[p]))
	l.recs[p] = append(l.recs[p], records...)
	return first, nil
}

// replay yields partition p's records, as offsets.Store does on a load.
func (l *memStateLog) replay(p int32) func(func(group.Record, error) bool) {
	l.mu.Lock()
	recs := slices.Clone(l.recs[p])
	l.mu.Unlock()
	return func(yield func(group.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// coordStore is the Store of a share-partition leader whose requests reach c
// (TopicStore's mapping of codes to errors).
type coordStore struct{ c *Coordinator }

func (s coordStore) Load(ctx context.Context, k Key, leaderEpoch int32) (Snapshot, bool, error) {
	snap, found, code := s.c.Read(ctx, k, leaderEpoch)
	return snap, found, kerr.ErrorForCode(code)
}

func (s coordStore) Initialize(ctx context.Context, k Key, stateEpoch int32, start int64) error {
	return kerr.ErrorForCode(s.c.Initialize(ctx, k, stateEpoch, start))
}

func (s coordStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	return kerr.ErrorForCode(s.c.Write(ctx, k, snap))
}

// TestWritesCarryTheLoadsEpoch: a key's writes carry the leader epoch its
// partition was loaded at; once the node leads the partition at a newer one
// (before the reload), the log refuses them and the write is NOT_COORDINATOR.
func TestWritesCarryTheLoadsEpoch(t *testing.T) {
	ctx := context.Background()
	k := Key{Group: "g", TopicID: [16]byte{3}, Partition: 1}
	p := statePartition(k, 4)
	log := &memStateLog{epochs: map[int32]int32{p: 3}}
	c := NewCoordinator(log, 4)
	if err := c.LoadPartitionAt(ctx, p, 3, log.replay(p)); err != nil {
		t.Fatal(err)
	}
	if code := c.Initialize(ctx, k, 0, 5); code != 0 {
		t.Fatalf("initialize at the load's epoch: code %d", code)
	}
	log.mu.Lock()
	log.epochs[p] = 4
	log.mu.Unlock()
	if code := c.Write(ctx, k, Snapshot{LeaderEpoch: 1, Start: 6}); code != kerr.NotCoordinator.Code {
		t.Fatalf("write led at a newer epoch: code %d, want NOT_COORDINATOR", code)
	}
}

// TestCoordinatorFencing: the share coordinator refuses the writes of a deposed
// share-partition leader and of a state reset meanwhile, and rebuilds the same
// view from its partition's records when it becomes leader again.
func TestCoordinatorFencing(t *testing.T) {
	ctx := context.Background()
	log := &memStateLog{}
	c := NewCoordinator(log, 4)
	k := Key{Group: "g", TopicID: [16]byte{3}, Partition: 1}
	p := statePartition(k, 4)
	if _, _, code := c.Read(ctx, k, 1); code != kerr.NotCoordinator.Code {
		t.Fatalf("read before the partition is loaded: code %d, want NOT_COORDINATOR", code)
	}
	if err := c.LoadPartitionAt(ctx, p, 0, log.replay(p)); err != nil {
		t.Fatal(err)
	}
	batches := []StateBatch{{First: 5, Last: 6, State: Acknowledged, DeliveryCount: 1}}
	steps := []struct {
		what string
		do   func() int16
		want int16
	}{
		{"no state yet: read", func() int16 { _, found, code := c.Read(ctx, k, 1); return foundCode(found, code) }, -1},
		{"initialize epoch 0", func() int16 { return c.Initialize(ctx, k, 0, 5) }, 0},
		{"initialize epoch 0 again (a second leader that found no state)", func() int16 { return c.Initialize(ctx, k, 0, 9) }, kerr.FencedStateEpoch.Code},
		{"leader 1 reads", func() int16 { _, found, code := c.Read(ctx, k, 1); return foundCode(found, code) }, 0},
		{"leader 1 writes", func() int16 { return c.Write(ctx, k, Snapshot{LeaderEpoch: 1, Start: 5, Batches: batches}) }, 0},
		{"leader 2 reads (fences leader 1)", func() int16 { _, found, code := c.Read(ctx, k, 2); return foundCode(found, code) }, 0},
		{"leader 1 writes late", func() int16 { return c.Write(ctx, k, Snapshot{LeaderEpoch: 1, Start: 7}) }, kerr.FencedLeaderEpoch.Code},
		{"leader 1 reloads", func() int16 { _, _, code := c.Read(ctx, k, 1); return code }, kerr.FencedLeaderEpoch.Code},
		{"leader 2 writes", func() int16 { return c.Write(ctx, k, Snapshot{LeaderEpoch: 2, Start: 6}) }, 0},
		{"offsets reset: state epoch 1", func() int16 { return c.Initialize(ctx, k, 1, 100) }, 0},
		{"leader 2 writes its old state", func() int16 { return c.Write(ctx, k, Snapshot{LeaderEpoch: 2, Start: 7}) }, kerr.FencedStateEpoch.Code},
		{"leader 2 writes the reset state", func() int16 { return c.Write(ctx, k, Snapshot{StateEpoch: 1, LeaderEpoch: 2, Start: 101}) }, 0},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: code %d, want %d", st.what, got, st.want)
		}
	}
	want := Snapshot{StateEpoch: 1, LeaderEpoch: 2, Start: 101}
	if got, found, code := c.Read(ctx, k, -1); code != 0 || !found || !reflect.DeepEqual(got, want) {
		t.Fatalf("state: %+v %v %d, want %+v", got, found, code, want)
	}

	// Another node becomes the coordinator: it rebuilds the view and fences alike.
	c2 := NewCoordinator(log, 4)
	if err := c2.LoadPartitionAt(ctx, p, 0, log.replay(p)); err != nil {
		t.Fatal(err)
	}
	if got, found, code := c2.Read(ctx, k, -1); code != 0 || !found || !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt state: %+v %v %d, want %+v", got, found, code, want)
	}
	if code := c2.Write(ctx, k, Snapshot{StateEpoch: 1, LeaderEpoch: 1}); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("deposed leader's write at the new coordinator: code %d", code)
	}
	if code := c2.Delete(ctx, k); code != 0 {
		t.Fatalf("delete: code %d", code)
	}
	// A leader that still holds the deleted state does not bring it back.
	if code := c2.Write(ctx, k, Snapshot{StateEpoch: 1, LeaderEpoch: 2, Start: 102}); code != kerr.InvalidRequest.Code {
		t.Fatalf("write after delete: code %d, want INVALID_REQUEST", code)
	}
	if _, found, code := c2.Read(ctx, k, 3); code != 0 || found {
		t.Fatalf("read after delete: found %v, code %d", found, code)
	}
	c3 := NewCoordinator(log, 4)
	if err := c3.LoadPartitionAt(ctx, p, 0, log.replay(p)); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := c3.Read(ctx, k, -1); found {
		t.Fatal("a deleted key came back on a rebuild")
	}

	// A partition an older Strata wrote without a coordinator: a late write of a
	// leader that loaded the state before a reset does not come back.
	legacy := &memStateLog{}
	reset := Snapshot{StateEpoch: 2, LeaderEpoch: 3, Start: 40}
	for _, v := range []Snapshot{{StateEpoch: 1, LeaderEpoch: 3, Start: 10}, reset, {StateEpoch: 1, LeaderEpoch: 4, Start: 12}} {
		_, _ = legacy.Append(ctx, p, 0, []group.Record{{Key: encodeKey(k), Value: encodeSnapshot(v)}})
	}
	c4 := NewCoordinator(legacy, 4)
	if err := c4.LoadPartitionAt(ctx, p, 0, legacy.replay(p)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c4.Read(ctx, k, -1); !reflect.DeepEqual(got, reset) {
		t.Fatalf("legacy partition: %+v, want %+v", got, reset)
	}

	// The old coordinator's node no longer leads the partition.
	log.mu.Lock()
	log.deposed = true
	log.mu.Unlock()
	if code := c.Write(ctx, k, Snapshot{StateEpoch: 1, LeaderEpoch: 2}); code != kerr.NotCoordinator.Code {
		t.Fatalf("write on a deposed coordinator: code %d, want NOT_COORDINATOR", code)
	}
	c.UnloadPartition(p)
	if code := c.Write(ctx, k, Snapshot{StateEpoch: 1, LeaderEpoch: 2}); code != kerr.NotCoordinator.Code {
		t.Fatalf("write after unload: code %d, want NOT_COORDINATOR", code)
	}
}

// foundCode is code, or -1 for a successful read that found no state.
func foundCode(found bool, code int16) int16 {
	if code == 0 && !found {
		return -1
	}
	return code
}

// TestFailoverOverlapNeverRedeliversAcknowledged: while two nodes both believe
// they lead a data partition (the old leader, epoch 1, has not yet heard of the
// new one, epoch 2), the old one's acknowledgement made after the new one loaded
// the state is refused, so the new leader, which delivers the record again, never
// delivers a record whose acknowledgement was answered. Without the coordinator's
// leader-epoch check the late acknowledgement was answered and its record
// delivered and accepted a second time.
func TestFailoverOverlapNeverRedeliversAcknowledged(t *testing.T) {
	log := &memStateLog{}
	coord := NewCoordinator(log, DefaultStateTopicPartitions)
	for p := range int32(DefaultStateTopicPartitions) {
		if err := coord.LoadPartitionAt(context.Background(), p, 0, log.replay(p)); err != nil {
			t.Fatal(err)
		}
	}
	store := coordStore{coord}
	old, oldRP := newTestManagerAt(t, store, 1)
	appendRecords(t, oldRP, 4)
	// The new leader's replica holds the same records (it was in sync).
	young, youngRP := newTestManagerAt(t, store, 2)
	appendRecords(t, youngRP, 4)

	acked := map[int64]bool{} // offsets whose ACCEPT was answered without error
	o0 := fetchOne(t, old, "a0")
	o1 := fetchOne(t, old, "a1")
	if code := accept(old, "a0", o0); code != 0 {
		t.Fatalf("accept of %d at the old leader before the failover: code %d", o0, code)
	}
	acked[o0] = true

	// The new leader loads the state (its first request) and delivers what was
	// not acknowledged, o1 included: locks are not persisted (their delivery
	// counts are).
	delivered := map[int64]int{}
	for i := range 3 {
		delivered[fetchOne(t, young, fmt.Sprintf("b%d", i))]++
	}
	// The old leader, still serving, answers a1's acknowledgement of o1.
	if code := accept(old, "a1", o1); code == 0 {
		acked[o1] = true
	} else if code != kerr.NotLeaderForPartition.Code {
		t.Errorf("late accept at the old leader: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	for o := range delivered {
		if acked[o] {
			t.Errorf("offset %d: acknowledged at the old leader and delivered again by the new one", o)
		}
	}
	if delivered[o1] == 0 {
		t.Fatalf("the new leader did not deliver %d again (delivered %v)", o1, delivered)
	}
	// The old leader reloads and finds itself fenced.
	if code := fetchCode(old, "a2"); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("the old leader's next fetch: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
}

// fetchCode is the partition's code of a ShareFetch of member (new session).
func fetchCode(m *Manager, member string) int16 {
	resp := m.ShareFetch(context.Background(), openFetch(member))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestCoordinatorRefusesNewerVersions: a state partition holding a key or a
// value of a version newer than this build's does not load (the leader's
// error), rather than lose that state by skipping or misreading it.
func TestCoordinatorRefusesNewerVersions(t *testing.T) {
	k := Key{Group: "g", TopicID: [16]byte{3}, Partition: 1}
	good := encodeSnapshot(Snapshot{StateEpoch: 1, Start: 5})
	withVersion := func(b []byte, v uint16) []byte {
		b = slices.Clone(b)
		binary.BigEndian.PutUint16(b, v)
		return b
	}
	for _, tc := range []struct {
		name       string
		key, value []byte
		ok         bool
	}{
		{"current versions", encodeKey(k), good, true},
		{"newer value version", encodeKey(k), withVersion(good, stateVersion+1), false},
		{"newer key version", withVersion(encodeKey(k), keyVersion+1), good, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &memStateLog{recs: map[int32][]group.Record{0: {{Key: tc.key, Value: tc.value}}}}
			err := NewCoordinator(log, 1).LoadPartitionAt(context.Background(), 0, 0, log.replay(0))
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrCorruptState) {
				t.Fatalf("loading: %v (want success: %v)", err, tc.ok)
			}
		})
	}
}

// failingStateLog is a StateLog whose appends fail with err once set.
type failingStateLog struct {
	memStateLog
	err error
}

func (l *failingStateLog) Append(ctx context.Context, p, epoch int32, records []group.Record) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	return l.memStateLog.Append(ctx, p, epoch, records)
}

// TestCoordinatorWriteFailureCodes checks the codes of state writes that fail,
// as Kafka 4.4's ShareCoordinatorService maps them
// (CoordinatorOperationExceptionHelper): a lost partition or failed log
// NOT_COORDINATOR, too few in-sync replicas or a timeout
// COORDINATOR_NOT_AVAILABLE, a batch too large UNKNOWN_SERVER_ERROR.
func TestCoordinatorWriteFailureCodes(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		err  error
		want int16
	}{
		{"lost leadership", fmt.Errorf("%w: deposed", group.ErrNotCoordinator), kerr.NotCoordinator.Code},
		{"not enough replicas", replica.ErrNotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{"not enough replicas after append", replica.ErrNotEnoughReplicasAfterAppend, kerr.CoordinatorNotAvailable.Code},
		{"high-water mark timeout", replica.ErrTimeout, kerr.CoordinatorNotAvailable.Code},
		{"deadline", context.DeadlineExceeded, kerr.CoordinatorNotAvailable.Code},
		{"too large", fmt.Errorf("%w: 2 MiB", group.ErrRecordTooLarge), kerr.UnknownServerError.Code},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &failingStateLog{}
			c := NewCoordinator(log, 1)
			if err := c.LoadPartitionAt(ctx, 0, 0, log.replay(0)); err != nil {
				t.Fatal(err)
			}
			k := Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}
			if code := c.Initialize(ctx, k, 0, 0); code != 0 {
				t.Fatalf("initialize: code %d", code)
			}
			log.err = tt.err
			for _, op := range []struct {
				name string
				do   func() int16
			}{
				{"initialize", func() int16 { return c.Initialize(ctx, k, 1, 0) }},
				{"read with a newer leader epoch", func() int16 { _, _, code := c.Read(ctx, k, 3); return code }},
				{"write", func() int16 { return c.Write(ctx, k, Snapshot{LeaderEpoch: -1, Start: 1}) }},
				{"delete", func() int16 { return c.Delete(ctx, k) }},
			} {
				if got := op.do(); got != tt.want {
					t.Errorf("%s: code %d, want %d", op.name, got, tt.want)
				}
			}
		})
	}
}
