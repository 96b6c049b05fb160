package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/wait"
)

// memStore is an in-memory __transaction_state: the records appended per partition.
type memStore struct {
	mu      sync.Mutex
	logs    map[int32][]group.Record
	appends int   // calls that appended: one batch each
	unacked int   // of them, through AppendUnacked
	fail    error // every Append fails with it while set
	failed  []time.Time
	// loseUnacked: AppendUnacked answers success and keeps nothing, as a
	// crash before the batch's commit would.
	loseUnacked bool
	// epochs is the leader epoch the broker leads each partition at (0
	// unless set): an append of another is refused, as offsets.Store
	// refuses it.
	epochs map[int32]int32
	// stall, while set, holds the next append before it reaches the log,
	// after telling stalled, until stall is closed.
	stall, stalled chan struct{}
}

func (s *memStore) Append(_ context.Context, p, epoch int32, recs []group.Record) (int64, error) {
	s.mu.Lock()
	if stall := s.stall; stall != nil {
		s.stall = nil
		s.mu.Unlock()
		close(s.stalled)
		<-stall
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if cur := s.epochs[p]; epoch != cur {
		return 0, fmt.Errorf("%w: a write of leader epoch %d, led at %d", group.ErrNotCoordinator, epoch, cur)
	}
	if s.fail != nil {
		s.failed = append(s.failed, time.Now())
		return 0, s.fail
	}
	if s.logs == nil {
		s.logs = map[int32][]group.Record{}
	}
	first := int64(len(s.logs[p]))
	s.logs[p] = append(s.logs[p], recs...)
	s.appends++
	return first, nil
}

// states decodes partition p's records and the number of batches appended.
func (s *memStore) states(t *testing.T, p int32) ([]State, int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []State
	for _, r := range s.logs[p] {
		_, m, err := decodeRecord(r)
		if err != nil || m == nil {
			t.Fatalf("record %+v: %v", r, err)
		}
		out = append(out, m.State)
	}
	return out, s.appends
}

// AppendUnacked is Append (memStore commits at once), counted, unless
// loseUnacked.
func (s *memStore) AppendUnacked(ctx context.Context, p, epoch int32, recs []group.Record) error {
	s.mu.Lock()
	lose := s.loseUnacked && s.fail == nil
	if s.fail == nil {
		s.unacked++
	}
	s.mu.Unlock()
	if lose {
		return nil
	}
	_, err := s.Append(ctx, p, epoch, recs)
	return err
}

// lead makes the broker lead partition p at leader epoch epoch.
func (s *memStore) lead(p, epoch int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epochs == nil {
		s.epochs = map[int32]int32{}
	}
	s.epochs[p] = epoch
}

// stallNext holds the next append before it reaches the log until the
// returned release is called; stalled is closed once it waits.
func (s *memStore) stallNext() (stalled <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stall := make(chan struct{})
	s.stall, s.stalled = stall, make(chan struct{})
	return s.stalled, sync.OnceFunc(func() { close(stall) })
}

func (s *memStore) replay(p int32) iter.Seq2[group.Record, error] {
	s.mu.Lock()
	recs := slices.Clone(s.logs[p])
	s.mu.Unlock()
	return func(yield func(group.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// memMarkers records written markers; it fails the first failures calls, waits
// for gate to close while it is set, and answers ErrCoordinatorFenced while
// fenced is set.
type memMarkers struct {
	mu       sync.Mutex
	failures int
	gate     chan struct{}
	fenced   bool
	calls    int
	written  []Markers
}

func (m *memMarkers) WriteMarkers(ctx context.Context, mk Markers) error {
	m.mu.Lock()
	m.calls++
	gate, fenced := m.gate, m.fenced
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-gate:
		}
	}
	if fenced {
		return ErrCoordinatorFenced
	}
	for {
		m.mu.Lock()
		if m.failures == 0 {
			m.written = append(m.written, mk)
			m.mu.Unlock()
			return nil
		}
		m.failures--
		m.mu.Unlock()
		select { // a real writer retries with backoff
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (m *memMarkers) all() []Markers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.written)
}

type fixture struct {
	c       *Coordinator
	store   *memStore
	markers *memMarkers
	clock   *fakeClock
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// gateMarkers makes the fixture's marker writes wait until the returned
// channel is closed.
func (f *fixture) gateMarkers() chan struct{} {
	gate := make(chan struct{})
	f.markers.mu.Lock()
	defer f.markers.mu.Unlock()
	f.markers.gate = gate
	return gate
}

func newFixture(t *testing.T, store *memStore) *fixture {
	t.Helper()
	return newFixtureAt(t, store, 0)
}

// newFixtureAt loads partition 0 at coordinator epoch epoch.
func newFixtureAt(t *testing.T, store *memStore, epoch int32) *fixture {
	t.Helper()
	return newFixtureWith(t, store, epoch, 0)
}

// newFixtureWith loads partition 0 at coordinator epoch epoch, with
// Config.CompleteDelay completeDelay (0: the default).
func newFixtureWith(t *testing.T, store *memStore, epoch int32, completeDelay time.Duration) *fixture {
	t.Helper()
	return newFixtureMarkers(t, store, epoch, completeDelay, &memMarkers{})
}

// newFixtureMarkers is newFixtureWith writing its markers with markers.
func newFixtureMarkers(t *testing.T, store *memStore, epoch int32, completeDelay time.Duration, markers *memMarkers) *fixture {
	t.Helper()
	return newFixtureGated(t, store, epoch, completeDelay, markers, nil)
}

// newFixtureGated is newFixtureMarkers with Config.Overlap overlap.
func newFixtureGated(t *testing.T, store *memStore, epoch int32, completeDelay time.Duration, markers *memMarkers, overlap func() bool) *fixture {
	t.Helper()
	f := &fixture{store: store, markers: markers, clock: &fakeClock{now: time.UnixMilli(1_700_000_000_000)}}
	var pids int64
	var mu sync.Mutex
	f.c = New(Config{Partitions: 1, MaxTimeout: time.Minute, AbortInterval: time.Hour, CompleteDelay: completeDelay, Overlap: overlap, Now: f.clock.Now}, store, f.markers,
		func(context.Context) (int64, error) { mu.Lock(); defer mu.Unlock(); pids++; return pids, nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(f.c.Close)
	store.lead(0, epoch)
	if err := f.c.LoadPartitionAt(context.Background(), 0, epoch, store.replay(0)); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitState polls until id's state is want, with no change in flight.
func (f *fixture) waitState(t *testing.T, id string, want State) Meta {
	t.Helper()
	var m Meta
	wait.For(t, fmt.Sprintf("%s in state %v", id, want), func() bool {
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		if pt := f.c.parts[0]; pt != nil {
			if e := pt.txns[id]; e != nil && !e.busy && !e.overlapping {
				m = e.meta
				return m.State == want
			}
		}
		return false
	})
	return m
}

func code(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

func TestCoordinatorCommitAndErrors(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	c := f.c
	if _, _, got := c.InitProducerID(ctx, "tx", int32(2*time.Minute/time.Millisecond), -1, -1); got != code(kerr.InvalidTransactionTimeout) {
		t.Fatalf("timeout above the maximum: %d", got)
	}
	pid, epoch, got := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got != 0 || epoch != 0 {
		t.Fatalf("InitProducerID: %d %d %d", pid, epoch, got)
	}
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != code(kerr.InvalidTxnState) {
		t.Fatalf("EndTxn without a transaction: %d", got)
	}
	if got := c.AddPartitions(ctx, "nope", pid, epoch, []TopicPartition{tp("a", 0)}); got != code(kerr.InvalidProducerIDMapping) {
		t.Fatalf("unknown transactional id: %d", got)
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch-1, []TopicPartition{tp("a", 0)}); got != code(kerr.ProducerFenced) {
		t.Fatalf("stale epoch: %d", got)
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0), tp("b", 1)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	if got := c.VerifyPartitions("tx", pid, epoch, []TopicPartition{tp("b", 1)}); got != 0 {
		t.Fatalf("VerifyPartitions of an added partition: %d", got)
	}
	if got := c.VerifyPartitions("tx", pid, epoch, []TopicPartition{tp("c", 0)}); got != code(kerr.TransactionAbortable) {
		t.Fatalf("VerifyPartitions of a partition not added: %d", got)
	}
	f.markers.mu.Lock()
	f.markers.failures = 3 // the markers need retries
	f.markers.mu.Unlock()
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	f.waitState(t, "tx", CompleteCommit)
	mk := f.markers.all()
	if len(mk) != 1 || !mk[0].Commit || mk[0].ProducerID != pid || !slices.Equal(mk[0].Partitions, []TopicPartition{tp("a", 0), tp("b", 1)}) {
		t.Fatalf("markers %+v", mk)
	}
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatalf("retried EndTxn of the committed transaction: %d", got)
	}
	c.UnloadPartition(0)
	if _, _, got := c.InitProducerID(ctx, "tx", 1000, -1, -1); got != code(kerr.NotCoordinator) {
		t.Fatalf("after unloading: %d", got)
	}
}

// TestCoordinatorFailover: a new coordinator that loads a partition with a
// prepared transaction writes its markers and completes it; an ongoing one keeps
// its partitions and can still be committed by its producer.
func TestCoordinatorFailover(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	old := newFixture(t, store)
	pidA, epA, _ := old.c.InitProducerID(ctx, "a", 10000, -1, -1)
	pidB, epB, _ := old.c.InitProducerID(ctx, "b", 10000, -1, -1)
	old.c.AddPartitions(ctx, "a", pidA, epA, []TopicPartition{tp("t", 0)})
	old.c.AddPartitions(ctx, "b", pidB, epB, []TopicPartition{tp("t", 1)})
	// The old coordinator dies after writing PrepareAbort, before any marker.
	old.markers.mu.Lock()
	old.markers.failures = 1 << 30
	old.markers.mu.Unlock()
	if got := endCode(old.c.EndTxn(ctx, "a", pidA, epA, false, false)); got != 0 {
		t.Fatal(got)
	}
	old.c.UnloadPartition(0)

	next := newFixture(t, store)
	m := next.waitState(t, "a", CompleteAbort)
	if mk := next.markers.all(); len(mk) != 1 || mk[0].Commit || mk[0].ProducerID != pidA || m.ProducerID != pidA {
		t.Fatalf("the new coordinator wrote %+v", mk)
	}
	if got := endCode(next.c.EndTxn(ctx, "b", pidB, epB, true, false)); got != 0 {
		t.Fatalf("committing the ongoing transaction on the new coordinator: %d", got)
	}
	next.waitState(t, "b", CompleteCommit)
}

// TestCoordinatorTimeout: an ongoing transaction past its timeout is aborted and
// its producer fenced.
func TestCoordinatorTimeout(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 1000, -1, -1)
	f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 0)})
	f.clock.Advance(1000 * time.Millisecond)
	f.c.expireTxns() // at the timeout, not past it: untouched
	if m := f.waitState(t, "tx", Ongoing); m.ProducerEpoch != epoch {
		t.Fatalf("expired early: %+v", m)
	}
	f.clock.Advance(time.Millisecond)
	f.c.expireTxns()
	m := f.waitState(t, "tx", CompleteAbort)
	if m.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch %d after the timeout abort, want %d", m.ProducerEpoch, epoch+1)
	}
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != code(kerr.ProducerFenced) {
		t.Fatalf("the timed-out producer's commit: %d, want PRODUCER_FENCED", got)
	}
}

// storeWith is a __transaction_state whose partition 0 holds m as "tx"'s state.
func storeWith(m Meta) *memStore {
	return &memStore{logs: map[int32][]group.Record{0: {encodeRecord("tx", m)}}}
}

// ongoingAt is an Ongoing transaction of producer pid at epoch on a-0, begun
// at the fixture clock's start, with a 1 s timeout.
func ongoingAt(pid int64, epoch int16, tv2 bool) Meta {
	start := time.UnixMilli(1_700_000_000_000).UnixMilli() // newFixtureGated's clock
	return Meta{ProducerID: pid, ProducerEpoch: epoch, TimeoutMs: 1000, State: Ongoing,
		Partitions: []TopicPartition{tp("a", 0)}, StartMs: start, LastUpdateMs: start, TV2: tv2, LastProducerEpoch: -1}
}

// TestTimeoutAbortFencesAtEpoch32766: the timeout's abort fences a producer
// at epoch 32766 too (to 32767, as Kafka's prepareFenceProducerEpoch, which
// refuses only to bump from 32767). Unfenced, the producer would not learn
// its transaction was aborted: its next batches would begin a new one at the
// same epoch and its commit would commit the second half of a transaction
// whose first half was aborted.
func TestTimeoutAbortFencesAtEpoch32766(t *testing.T) {
	for _, tv2 := range []bool{false, true} {
		ctx := context.Background()
		const pid, epoch = int64(7), int16(math.MaxInt16 - 1)
		f := newFixture(t, storeWith(ongoingAt(pid, epoch, tv2)))
		f.clock.Advance(1001 * time.Millisecond)
		f.c.expireTxns()
		if m := f.waitState(t, "tx", CompleteAbort); m.ProducerID != pid || m.ProducerEpoch != math.MaxInt16 {
			t.Fatalf("tv2=%v: after the timeout abort: producer %d epoch %d, want %d %d", tv2, m.ProducerID, m.ProducerEpoch, pid, math.MaxInt16)
		}
		if mk := f.markers.all(); len(mk) != 1 || mk[0].ProducerEpoch != math.MaxInt16 {
			t.Fatalf("tv2=%v: markers %+v, want one round at epoch %d", tv2, mk, math.MaxInt16)
		}
		if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != code(kerr.ProducerFenced) {
			t.Errorf("tv2=%v: the timed-out producer's add: %d, want PRODUCER_FENCED", tv2, got)
		}
		for _, commit := range []bool{true, false} {
			if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, commit, tv2)); got == 0 {
				t.Errorf("tv2=%v: the timed-out producer's end (commit %v) succeeded", tv2, commit)
			}
		}
	}
}

// TestInitProducerFencesAtEpoch32766: InitProducerId over an open
// transaction at epoch 32766 fences the previous incarnation at once (to
// 32767) and aborts the transaction; the new incarnation's retry moves the
// id to a new producer id, as it does from 32767 in Kafka.
func TestInitProducerFencesAtEpoch32766(t *testing.T) {
	ctx := context.Background()
	const pid, epoch = int64(7), int16(math.MaxInt16 - 1)
	f := newFixture(t, storeWith(ongoingAt(pid, epoch, false)))
	if _, _, got := f.c.InitProducerID(ctx, "tx", 1000, -1, -1); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId over the open transaction: %d", got)
	}
	if m := f.waitState(t, "tx", CompleteAbort); m.ProducerEpoch != math.MaxInt16 {
		t.Fatalf("fenced at epoch %d, want %d", m.ProducerEpoch, math.MaxInt16)
	}
	// Before the new incarnation retries, the old one goes on.
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != code(kerr.ProducerFenced) {
		t.Errorf("the fenced incarnation's add: %d, want PRODUCER_FENCED", got)
	}
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, false)); got == 0 {
		t.Errorf("the fenced incarnation committed a transaction")
	}
	newPID, newEpoch, got := f.c.InitProducerID(ctx, "tx", 1000, -1, -1)
	if got != 0 || newPID == pid || newEpoch != 0 {
		t.Fatalf("the new incarnation's retry: producer %d epoch %d code %d, want a new producer id at epoch 0", newPID, newEpoch, got)
	}
}

// TestInitProducerRetryAfterBump: a KIP-360 InitProducerId (the client's
// producer id and epoch given, as Kafka's producer sends to bump its epoch
// after an abortable error) whose answer was lost is retried with the same id
// and epoch, and answered with the epoch it was given (Kafka's
// prepareIncrementProducerEpoch: "a retry of a successful call"), also by a
// coordinator that loaded the state since; PRODUCER_FENCED, fatal to the
// client, once a new incarnation's InitProducerId fenced that epoch.
func TestInitProducerRetryAfterBump(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixture(t, store)
	pid, epoch, got := f.c.InitProducerID(ctx, "tx", 1000, -1, -1)
	if got != 0 {
		t.Fatal(got)
	}
	pid1, epoch1, got := f.c.InitProducerID(ctx, "tx", 1000, pid, epoch)
	if got != 0 || pid1 != pid || epoch1 != epoch+1 {
		t.Fatalf("KIP-360 bump: %d %d %d", pid1, epoch1, got)
	}
	for name, c := range map[string]*Coordinator{"the same coordinator": f.c, "the next coordinator": newFixture(t, store).c} {
		if pid2, epoch2, got := c.InitProducerID(ctx, "tx", 1000, pid, epoch); got != 0 || pid2 != pid1 || epoch2 != epoch1 {
			t.Errorf("retried KIP-360 InitProducerId, %s: producer %d epoch %d code %d, want %d %d and no error", name, pid2, epoch2, got, pid1, epoch1)
		}
	}
	if _, _, got := f.c.InitProducerID(ctx, "tx", 1000, -1, -1); got != 0 {
		t.Fatal(got)
	}
	if _, _, got := f.c.InitProducerID(ctx, "tx", 1000, pid, epoch); got != code(kerr.ProducerFenced) {
		t.Errorf("the retry after a new incarnation's InitProducerId: %d, want PRODUCER_FENCED", got)
	}
}

// TestEpochAboveCurrentIsFenced: an epoch above the current one is
// PRODUCER_FENCED, as any epoch but the current one is in Kafka 4's
// coordinator (handleAddPartitionsToTransaction,
// handleVerifyPartitionsInTransaction: producerEpoch !=
// txnMetadata.producerEpoch; endTransaction: isValidEpoch false), for
// AddPartitionsToTxn, its VerifyOnly form and EndTxn v4 and v5.
func TestEpochAboveCurrentIsFenced(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatal(got)
	}
	above := epoch + 1
	for name, got := range map[string]int16{
		"AddPartitionsToTxn": f.c.AddPartitions(ctx, "tx", pid, above, []TopicPartition{tp("b", 0)}),
		"VerifyOnly":         f.c.VerifyPartitions("tx", pid, above, []TopicPartition{tp("a", 0)}),
		"EndTxn v4":          endCode(f.c.EndTxn(ctx, "tx", pid, above, true, false)),
		"EndTxn v5":          endCode(f.c.EndTxn(ctx, "tx", pid, above, true, true)),
	} {
		if got != code(kerr.ProducerFenced) {
			t.Errorf("%s at epoch %d above the current %d: %v, want PRODUCER_FENCED", name, above, epoch, kerr.ErrorForCode(got))
		}
	}
}

// TestEndTxnV4AfterV5MarkerVersion: the markers' transaction version
// follows the EndTxn that ends the transaction, as Kafka's
// prepareAbortOrCommit takes each end's version. An id once ended with
// EndTxn v5, taken over by a client of transaction version 1 (an older
// client, a rollback of the application), ends its transaction with EndTxn
// v4, which does not bump the epoch: its markers go as version 1. As version
// 2, at the epoch of the transaction's batches, every partition would refuse
// them (KIP-1228) and the transaction would hang.
func TestEndTxnV4AfterV5MarkerVersion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatal(got)
	}
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != 0 {
		t.Fatal(got)
	}
	f.waitState(t, "tx", CompleteCommit)

	pid, epoch, got := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got != 0 {
		t.Fatal(got)
	}
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != 0 {
		t.Fatal(got)
	}
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatal(got)
	}
	if m := f.waitState(t, "tx", CompleteCommit); m.TV2 {
		t.Errorf("completed after EndTxn v4: %+v, still transaction version 2", m)
	}
	mk := f.markers.all()
	if last := mk[len(mk)-1]; last.TransactionVersion != 1 || last.ProducerEpoch != epoch {
		t.Fatalf("EndTxn v4's markers: transaction version %d at epoch %d, want 1 at %d", last.TransactionVersion, last.ProducerEpoch, epoch)
	}
}

// TestCoordinatorStoreFailure: a failed state write leaves the state as it was
// and answers a retriable code.
func TestCoordinatorStoreFailure(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixture(t, store)
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 1000, -1, -1)
	store.mu.Lock()
	store.fail = errors.New("disk on fire")
	store.mu.Unlock()
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 0)}); got != code(kerr.CoordinatorNotAvailable) {
		t.Fatalf("failed write: %d", got)
	}
	if _, _, got := f.c.InitProducerID(ctx, "new", 1000, -1, -1); got != code(kerr.CoordinatorNotAvailable) {
		t.Fatalf("failed write of a new id: %d", got)
	}
	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != code(kerr.InvalidTxnState) {
		t.Fatalf("the failed add must not have started a transaction: %d", got)
	}
	if got := f.c.AddPartitions(ctx, "new", 0, 0, nil); got != code(kerr.InvalidProducerIDMapping) {
		t.Fatalf("the failed init must not have created the id: %d", got)
	}
}

// TestStoreFailureCodes: a failed state write is answered with the code
// Kafka 4.4's TransactionStateManager maps the append's error to: a lost
// partition NOT_COORDINATOR, a state too large for the log
// UNKNOWN_SERVER_ERROR (not retriable: retrying cannot shrink it), anything
// else COORDINATOR_NOT_AVAILABLE.
func TestStoreFailureCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("%w: moved", group.ErrNotCoordinator), kerr.NotCoordinator},
		{fmt.Errorf("%w: 2 MiB", group.ErrRecordTooLarge), kerr.UnknownServerError},
		{errors.New("timed out"), kerr.CoordinatorNotAvailable},
	} {
		t.Run(tc.want.Message, func(t *testing.T) {
			ctx := context.Background()
			store := &memStore{}
			f := newFixture(t, store)
			pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 1000, -1, -1)
			store.mu.Lock()
			store.fail = tc.err
			store.mu.Unlock()
			if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 0)}); got != code(tc.want) {
				t.Errorf("AddPartitions: %d, want %d", got, code(tc.want))
			}
			if _, _, got := f.c.InitProducerID(ctx, "new", 1000, -1, -1); got != code(tc.want) {
				t.Errorf("InitProducerID: %d, want %d", got, code(tc.want))
			}
		})
	}
}

// TestCompletedStateRetryBacksOff: a completed state that cannot be written
// (the log under __transaction_state failed: it refuses every write until it
// is reopened) is retried with a doubling backoff, not every RetryBackoff.
func TestCompletedStateRetryBacksOff(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	const backoff = 10 * time.Millisecond
	gate := make(chan struct{}) // the markers wait until the store fails
	c := New(Config{Partitions: 1, MaxTimeout: time.Minute, AbortInterval: time.Hour, RetryBackoff: backoff, CompleteDelay: time.Millisecond},
		store, &memMarkers{gate: gate}, func(context.Context) (int64, error) { return 1, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(c.Close)
	if err := c.LoadPartitionAt(ctx, 0, 0, store.replay(0)); err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)})
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	store.mu.Lock()
	store.fail = errors.New("log failed")
	store.mu.Unlock()
	close(gate)
	const tries = 5
	var failed []time.Time
	wait.For(t, "the completed state tried five times", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		failed = slices.Clone(store.failed)
		return len(failed) >= tries
	})
	// Backoffs of 10, 20, 40 and 80 ms between the five tries; at a fixed
	// backoff they would take 40 ms.
	if took, least := failed[tries-1].Sub(failed[0]), 15*backoff; took < least {
		t.Fatalf("%d tries in %v, want at least %v apart (a doubling backoff)", tries, took, least)
	}
}

// endCode is the error code of an EndTxn answer.
func endCode(_ int64, _ int16, code int16) int16 { return code }

// waitClosed fails t unless ch closes within a generous deadline.
func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not signalled", what)
	}
}

// TestCoordinatorCompleted: Completed signals the end of a transactional id's
// change in flight: at once when there is none, once the markers of an ended
// transaction are written (the next add then succeeds), and when the
// partition is unloaded.
func TestCoordinatorCompleted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	c := f.c
	if c.Completed("unknown") != closedChan {
		t.Fatal("Completed of an unknown id is not closed")
	}
	pid, epoch, _ := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if c.Completed("tx") != closedChan {
		t.Fatal("Completed of an idle id is not closed")
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	gate := f.gateMarkers()
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	done := c.Completed("tx")
	select {
	case <-done:
		t.Fatal("Completed is closed before the markers are written")
	default:
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("AddPartitions while the markers are written: %d, want CONCURRENT_TRANSACTIONS", got)
	}
	close(gate)
	waitClosed(t, "markers written", done)
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions once signalled: %d", got)
	}

	// Unloading signals too (the waiter then learns NOT_COORDINATOR).
	gate = make(chan struct{})
	defer close(gate)
	f.markers.mu.Lock()
	f.markers.gate = gate
	f.markers.mu.Unlock()
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, false, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	done = c.Completed("tx")
	c.UnloadPartition(0)
	waitClosed(t, "unloaded", done)
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != code(kerr.NotCoordinator) {
		t.Fatalf("AddPartitions after unloading: %d", got)
	}
}

// TestWriteBeforeReloadIsFenced: this broker leads the partition again at a
// newer leader epoch (a reassignment's bump) while an add's state write is on
// its way to the log, and the partition is loaded again meanwhile. The write
// carries the epoch of the load that began it, so the store refuses it and the
// add is answered NOT_COORDINATOR: the reload never saw it, and answered
// success it left the reloaded coordinator a transaction without the
// partition, whose commit then skipped it (finding 22 of
// docs/reliability.md: a copy stage's offsets left out of its commit).
func TestWriteBeforeReloadIsFenced(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixture(t, store)
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("out", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}

	stalled, release := store.stallNext()
	defer release()
	added := make(chan int16, 1)
	go func() { added <- f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("offsets", 0)}) }()
	<-stalled
	store.lead(0, 1)
	f.c.UnloadPartition(0)
	if err := f.c.LoadPartitionAt(ctx, 0, 1, store.replay(0)); err != nil {
		t.Fatal(err)
	}
	release()
	if got := <-added; got != code(kerr.NotCoordinator) {
		t.Fatalf("add written under the previous load: %d, want NOT_COORDINATOR", got)
	}

	// The client's retry reaches the reloaded coordinator, whose commit
	// names the partition.
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("offsets", 0)}); got != 0 {
		t.Fatalf("retried AddPartitions: %d", got)
	}
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	f.waitState(t, "tx", CompleteCommit)
	mk := f.markers.all()
	if len(mk) != 1 || !slices.Equal(mk[0].Partitions, []TopicPartition{tp("offsets", 0), tp("out", 0)}) || mk[0].CoordinatorEpoch != 1 {
		t.Fatalf("markers %+v, want one round on offsets-0 and out-0 at coordinator epoch 1", mk)
	}
}

// TestCoordinatorEpochOnMarkers: markers carry the epoch the partition was
// loaded at; a partition's TRANSACTION_COORDINATOR_FENCED stops the completion
// (no completed state is written: the newer coordinator owns the transaction).
func TestCoordinatorEpochOnMarkers(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixtureAt(t, store, 7)
	c := f.c
	pid, epoch, _ := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)})
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	f.waitState(t, "tx", CompleteCommit)
	if mk := f.markers.all(); len(mk) != 1 || mk[0].CoordinatorEpoch != 7 {
		t.Fatalf("markers %+v, want one at coordinator epoch 7", mk)
	}

	f.markers.mu.Lock()
	f.markers.fenced = true
	f.markers.mu.Unlock()
	c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)})
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, false, false)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	// The completion gives up: the id stays busy, its last record PrepareAbort.
	wait.For(t, "the fenced markers to be tried", func() bool {
		f.markers.mu.Lock()
		defer f.markers.mu.Unlock()
		return f.markers.calls == 2
	})
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("AddPartitions on the deposed coordinator: %d, want CONCURRENT_TRANSACTIONS", got)
	}
	c.Close() // waits for the completion to return
	store.mu.Lock()
	last := store.logs[0][len(store.logs[0])-1]
	store.mu.Unlock()
	if _, m, err := decodeRecord(last); err != nil || m.State != PrepareAbort {
		t.Fatalf("last state %+v (%v), want PrepareAbort", m, err)
	}
}

// TestCompletedStateWrittenWithNext: once the markers are written, the
// completed state takes effect at once and is written in one batch ahead of
// the id's next state (one commit for both), or alone after CompleteDelay
// when no next state comes; a reload finds the states in order.
func TestCompletedStateWrittenWithNext(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixtureWith(t, store, 0, time.Hour) // the fallback never fires here
	c := f.c
	pid, epoch, _ := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	nextPID, nextEpoch, got := c.EndTxn(ctx, "tx", pid, epoch, true, true)
	if got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	waitClosed(t, "markers written", c.Completed("tx"))
	if d, code := c.Describe("tx"); code != 0 || d.State != CompleteCommit {
		t.Fatalf("described %+v (%d), want CompleteCommit once the markers are written", d, code)
	}
	states, batches := store.states(t, 0)
	if !slices.Equal(states, []State{Empty, Ongoing, PrepareCommit}) {
		t.Fatalf("log %v before the next state", states)
	}
	if got := c.AddPartitions(ctx, "tx", nextPID, nextEpoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("the next transaction's AddPartitions: %d", got)
	}
	states, after := store.states(t, 0)
	if !slices.Equal(states, []State{Empty, Ongoing, PrepareCommit, CompleteCommit, Ongoing}) || after != batches+1 {
		t.Fatalf("log %v in %d more batches, want CompleteCommit and Ongoing in one", states, after-batches)
	}
	reloaded := newFixture(t, store)
	if m := reloaded.waitState(t, "tx", Ongoing); m.ProducerEpoch != nextEpoch {
		t.Fatalf("reloaded %+v", m)
	}

	// No next state: the completed state is written alone after the delay.
	store2 := &memStore{}
	f2 := newFixtureWith(t, store2, 0, time.Millisecond)
	pid, epoch, _ = f2.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	f2.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)})
	if got := endCode(f2.c.EndTxn(ctx, "tx", pid, epoch, false, true)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	wait.For(t, "the completed state written alone", func() bool {
		states, _ := store2.states(t, 0)
		return slices.Equal(states, []State{Empty, Ongoing, PrepareAbort, CompleteAbort})
	})
}

// TestUnloadDuringLoad: a partition unloaded (a newer load of it, or a lost
// leadership) while its replay runs. The unload walks the partition's
// transactions while the replay adds to them, so on a replay that filled the
// partition's own map the race detector (or the runtime's concurrent map
// check) stops the test. A later load answers for every id.
func TestUnloadDuringLoad(t *testing.T) {
	ctx := context.Background()
	const ids = 20000
	store := &memStore{}
	for i := range ids {
		r := encodeRecord(fmt.Sprintf("tx-%d", i), Meta{ProducerID: int64(i), State: Empty, StartMs: -1})
		store.Append(ctx, 0, 0, []group.Record{r})
	}
	c := New(Config{Partitions: 1, MaxTimeout: time.Minute, AbortInterval: time.Hour},
		store, &memMarkers{}, func(context.Context) (int64, error) { return 1, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(c.Close)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				c.UnloadPartition(0)
			}
		}
	})
	for range 3 {
		if err := c.LoadPartitionAt(ctx, 0, 0, store.replay(0)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if err := c.LoadPartitionAt(ctx, 0, 0, store.replay(0)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, ids / 2, ids - 1} {
		if d, code := c.Describe(fmt.Sprintf("tx-%d", i)); code != 0 || d.Meta.ProducerID != int64(i) {
			t.Fatalf("tx-%d after the last load: %+v, code %d", i, d, code)
		}
	}
}

// TestNoProducerIDBlock: a transactional InitProducerId that needs a new
// producer id while the broker has no block to hand one out from is answered
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's TransactionCoordinator answers
// what its ProducerIdManager refuses; it was COORDINATOR_NOT_AVAILABLE.
func TestNoProducerIDBlock(t *testing.T) {
	f := newFixture(t, &memStore{})
	f.c.newPID = func(context.Context) (int64, error) { return 0, errors.New("no producer id block") }
	pid, epoch, code := f.c.InitProducerID(context.Background(), "tx", 1000, -1, -1)
	if code != kerr.CoordinatorLoadInProgress.Code || pid != -1 || epoch != -1 {
		t.Fatalf("InitProducerId without a producer id block: producer %d epoch %d code %v; want -1, -1, COORDINATOR_LOAD_IN_PROGRESS",
			pid, epoch, kerr.ErrorForCode(code))
	}
}

// TestRefusedWhileMarkersWritten: while the markers of an ended transaction
// are written, Kafka 4.4's state is the Prepare state with no transition
// pending, so a request it refuses gets its own answer, not
// CONCURRENT_TRANSACTIONS: a fenced or unknown producer's add or end, and an
// EndTxn asking for the other outcome (INVALID_TXN_STATE). The producer's own
// requests still get CONCURRENT_TRANSACTIONS.
func TestRefusedWhileMarkersWritten(t *testing.T) {
	ctx := context.Background()
	for _, tv2 := range []bool{false, true} {
		f := newFixture(t, &memStore{})
		pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
		if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
			t.Fatalf("AddPartitions: %d", got)
		}
		gate := f.gateMarkers()
		_, next, code0 := f.c.EndTxn(ctx, "tx", pid, epoch, true, tv2)
		if code0 != 0 {
			t.Fatalf("EndTxn: %d", code0)
		}
		retryEpoch := next // the epoch of an end's retry: v5's epoch before the bump
		if tv2 {
			retryEpoch = epoch
		}
		for _, tt := range []struct {
			name string
			got  int16
			want *kerr.Error
		}{
			{"add at an older epoch", f.c.AddPartitions(ctx, "tx", pid, next-1, []TopicPartition{tp("b", 0)}), kerr.ProducerFenced},
			{"add by another producer id", f.c.AddPartitions(ctx, "tx", pid+100, next, []TopicPartition{tp("b", 0)}), kerr.InvalidProducerIDMapping},
			{"end by another producer id", endCode(f.c.EndTxn(ctx, "tx", pid+100, next, true, tv2)), kerr.InvalidProducerIDMapping},
			{"end the other way", endCode(f.c.EndTxn(ctx, "tx", pid, retryEpoch, false, tv2)), kerr.InvalidTxnState},
			{"end the same way", endCode(f.c.EndTxn(ctx, "tx", pid, retryEpoch, true, tv2)), kerr.ConcurrentTransactions},
		} {
			if tt.got != code(tt.want) {
				t.Errorf("TV2 %v, %s while the markers are written: %d, want %v", tv2, tt.name, tt.got, tt.want)
			}
		}
		close(gate)
		f.waitState(t, "tx", CompleteCommit)
	}
}

// TestIdleTransactionalIDExpires: a transactional id without a transaction
// (Empty, or its last one completed) whose state was last updated
// transactional.id.expiration.ms ago (Config.IDExpiration, Kafka's 7 days) is
// removed with a tombstone, as Kafka 4.4's removeExpiredTransactionalIds does:
// DescribeTransactions and ListTransactions no longer know it, a coordinator
// that loads the partition neither, and its next InitProducerId gets a new
// producer id at epoch 0. An id with an open transaction, or updated since,
// stays.
func TestIdleTransactionalIDExpires(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixture(t, store)
	pid, _, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	openPID, openEpoch, _ := f.c.InitProducerID(ctx, "tx-open", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx-open", openPID, openEpoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	f.clock.Advance(time.Hour)
	f.c.InitProducerID(ctx, "tx-recent", 10000, -1, -1)
	f.clock.Advance(7*24*time.Hour - time.Hour - time.Millisecond)
	f.c.expireIDs()
	if _, code := f.c.Describe("tx"); code != 0 {
		t.Fatalf("expired a millisecond early: %d", code)
	}
	f.clock.Advance(time.Millisecond)
	f.c.expireIDs()
	if _, code := f.c.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("an id idle for the expiration: %d, want TRANSACTIONAL_ID_NOT_FOUND", code)
	}
	var listed []string
	all, _ := f.c.List(ListFilter{MinRunningMs: -1})
	for _, d := range all {
		listed = append(listed, d.TransactionalID)
	}
	if !slices.Equal(listed, []string{"tx-open", "tx-recent"}) {
		t.Fatalf("listed %q, want [tx-open tx-recent]", listed)
	}
	next := newFixture(t, store)
	if _, code := next.c.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("a coordinator that loads the partition: %d, want TRANSACTIONAL_ID_NOT_FOUND", code)
	}
	newPID, newEpoch, code := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if code != 0 || newPID == pid || newEpoch != 0 {
		t.Fatalf("InitProducerId of the expired id: %d/%d code %d, want a new producer id (not %d) at epoch 0", newPID, newEpoch, code, pid)
	}
}

// TestInitProducerWhileMarkersWritten: while an end's markers are written, a
// KIP-360 InitProducerId naming another producer id is PRODUCER_FENCED, as
// Kafka 4.4's prepareInitProducerIdTransit checks the id before the Prepare
// state; with the id's own producer id (any epoch) it is
// CONCURRENT_TRANSACTIONS, its epoch judged once the transaction is complete.
func TestInitProducerWhileMarkersWritten(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &memStore{})
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	gate := f.gateMarkers()
	if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != 0 {
		t.Fatalf("EndTxn: %d", got)
	}
	for _, tt := range []struct {
		name  string
		pid   int64
		epoch int16
		want  *kerr.Error
	}{
		{"another producer id", pid + 100, 0, kerr.ProducerFenced},
		{"its producer id, the ended transaction's epoch", pid, epoch, kerr.ConcurrentTransactions},
		{"its producer id, another epoch", pid, epoch + 5, kerr.ConcurrentTransactions},
		{"a new incarnation", -1, -1, kerr.ConcurrentTransactions},
	} {
		if _, _, got := f.c.InitProducerID(ctx, "tx", 10000, tt.pid, tt.epoch); got != code(tt.want) {
			t.Errorf("%s: %d, want %v", tt.name, got, tt.want)
		}
	}
	close(gate)
	f.waitState(t, "tx", CompleteCommit)
}
