package txn

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// gateMarkers makes f's marker writes wait until the returned channel is
// closed.
func gateMarkers(f *fixture) chan struct{} {
	gate := f.gateMarkers()
	return gate
}

// lastRecord decodes the last record of store's partition 0.
func lastRecord(t *testing.T, store *memStore) Meta {
	t.Helper()
	store.mu.Lock()
	recs := store.logs[0]
	store.mu.Unlock()
	_, m, err := decodeRecord(recs[len(recs)-1])
	if err != nil || m == nil {
		t.Fatalf("last record: %+v, %v", m, err)
	}
	return *m
}

// committedTxn runs a transaction-version-2 producer "tx" through one
// transaction on partition a-0 and commits it with EndTxn v5; it returns the
// producer id and epoch the next transaction uses.
func committedTxn(t *testing.T, f *fixture, gated bool) (int64, int16, chan struct{}) {
	t.Helper()
	ctx := context.Background()
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); got != 0 {
		t.Fatalf("AddPartitions: %d", got)
	}
	var gate chan struct{}
	if gated {
		gate = gateMarkers(f)
	}
	nextPID, nextEpoch, code := f.c.EndTxn(ctx, "tx", pid, epoch, true, true)
	if code != 0 || nextPID != pid || nextEpoch != epoch+1 {
		t.Fatalf("EndTxn v5: %d %d %d", nextPID, nextEpoch, code)
	}
	return nextPID, nextEpoch, gate
}

// overlappedTxn is committedTxn with the markers held back, and the next
// transaction's add of b-0 served meanwhile (the overlap); it returns the
// gate that lets the markers through.
func overlappedTxn(t *testing.T, f *fixture) chan struct{} {
	t.Helper()
	pid, epoch, gate := committedTxn(t, f, true)
	if got := f.c.AddPartitions(context.Background(), "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != 0 {
		t.Fatalf("overlapping add: %d", got)
	}
	return gate
}

// TestOverlapAcceptsNextAdd: while the markers of a transaction-version-2
// commit are written, the producer's next transaction's adds are served, each
// written as an Ongoing state naming the markers as owed; every other request
// for the id gets CONCURRENT_TRANSACTIONS, and the timeout's abort skips it.
// Once the markers are written, the id's states no longer name them. A
// transaction-version-1 end and a Prepare state at a saturating epoch keep
// the id busy until their markers are written.
func TestOverlapAcceptsNextAdd(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	f := newFixtureWith(t, store, 0, time.Hour)
	c := f.c
	pid, epoch, gate := committedTxn(t, f, true)
	want := &Owed{Commit: true, ProducerID: pid, ProducerEpoch: epoch, Partitions: []TopicPartition{tp("a", 0)}}

	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 1)}); got != 0 {
		t.Fatalf("the next transaction's add while the markers are written: %d, want 0", got)
	}
	if m := lastRecord(t, store); m.State != Ongoing || !reflect.DeepEqual(m.Owed, want) || !slices.Equal(m.Partitions, []TopicPartition{tp("b", 1)}) {
		t.Fatalf("written %+v (owed %+v), want Ongoing on b-1 owing %+v", m, m.Owed, want)
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 2)}); got != 0 {
		t.Fatalf("a second add: %d", got)
	}
	if m := lastRecord(t, store); !reflect.DeepEqual(m.Owed, want) || len(m.Partitions) != 2 {
		t.Fatalf("second add wrote %+v (owed %+v)", m, m.Owed)
	}
	if got := c.AddPartitions(ctx, "tx", pid, epoch-1, []TopicPartition{tp("b", 3)}); got != code(kerr.ProducerFenced) {
		t.Fatalf("an add at the old epoch: %d, want PRODUCER_FENCED", got)
	}
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("EndTxn while the markers are written: %d", got)
	}
	if _, _, got := c.InitProducerID(ctx, "tx", 10000, -1, -1); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId while the markers are written: %d", got)
	}
	_, before := store.states(t, 0)
	f.clock.Advance(time.Minute)
	c.expireTxns()
	if _, after := store.states(t, 0); after != before {
		t.Fatal("the timeout's abort wrote a state while the markers were owed")
	}

	close(gate)
	waitClosed(t, "markers written", c.Completed("tx"))
	if mk := f.markers.all(); len(mk) != 1 || mk[0].TransactionVersion != 2 || !mk[0].Commit {
		t.Fatalf("markers %+v", mk)
	}
	d, _ := c.Describe("tx")
	if d.State != Ongoing || d.Owed != nil || len(d.Partitions) != 2 {
		t.Fatalf("after the markers: %+v (owed %+v)", d.Meta, d.Owed)
	}
	f.clock.Advance(-time.Minute)
	if got := endCode(c.EndTxn(ctx, "tx", pid, epoch, false, true)); got != 0 {
		t.Fatalf("EndTxn of the next transaction: %d", got)
	}
	if m := lastRecord(t, store); m.State != PrepareAbort || m.Owed != nil {
		t.Fatalf("the next end wrote %+v (owed %+v), want no markers owed", m, m.Owed)
	}
	f.waitState(t, "tx", CompleteAbort)

	// A coordinator whose markers are fenced (deposed) serves nothing more of
	// the id: no overlap either.
	deposed := newFixtureWith(t, &memStore{}, 0, time.Hour)
	deposed.markers.mu.Lock()
	deposed.markers.fenced = true
	deposed.markers.mu.Unlock()
	dpid, depoch, _ := committedTxn(t, deposed, false)
	wait.For(t, "the fenced completion to give up", func() bool {
		deposed.markers.mu.Lock()
		calls := deposed.markers.calls
		deposed.markers.mu.Unlock()
		deposed.c.mu.Lock()
		defer deposed.c.mu.Unlock()
		return calls == 1 && deposed.c.parts[0].txns["tx"].prep == nil
	})
	if got := deposed.c.AddPartitions(ctx, "tx", dpid, depoch, []TopicPartition{tp("b", 0)}); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("add on a deposed coordinator: %d, want CONCURRENT_TRANSACTIONS", got)
	}

	// No overlap for transaction version 1, at the saturating epochs, or
	// for an add of a __consumer_offsets partition whose marker is owed (the
	// group coordinator would apply the next transaction's offsets there with
	// the previous outcome).
	offsets := tp(group.OffsetsTopic, 3)
	for _, tc := range []struct {
		name string
		tv2  bool
		meta func(*Meta)
		add  TopicPartition
	}{
		{"transaction version 1", false, nil, tp("b", 0)},
		{"epoch bumped to the last one", true, func(m *Meta) { m.ProducerEpoch = math.MaxInt16 - 2 }, tp("b", 0)},
		{"epoch exhausted", true, func(m *Meta) { m.ProducerEpoch = math.MaxInt16 - 1 }, tp("b", 0)},
		{"offsets partition owed", true, func(m *Meta) { m.Partitions = []TopicPartition{tp("a", 0), offsets} }, offsets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			pid, epoch := int64(5), int16(3)
			m := Meta{ProducerID: pid, ProducerEpoch: epoch, TimeoutMs: 10000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, TV2: tc.tv2}
			if tc.meta != nil {
				tc.meta(&m)
				epoch = m.ProducerEpoch
			}
			store.Append(ctx, 0, 0, []group.Record{encodeRecord("tx", m)})
			f := newFixtureWith(t, store, 0, time.Hour)
			gate := gateMarkers(f)
			defer close(gate)
			nextPID, nextEpoch, got := f.c.EndTxn(ctx, "tx", pid, epoch, true, tc.tv2)
			if got != 0 {
				t.Fatalf("EndTxn: %d", got)
			}
			if nextPID < 0 {
				nextPID, nextEpoch = pid, epoch
			}
			if got := f.c.AddPartitions(ctx, "tx", nextPID, nextEpoch, []TopicPartition{tc.add}); got != code(kerr.ConcurrentTransactions) {
				t.Fatalf("add while the markers are written: %d, want CONCURRENT_TRANSACTIONS", got)
			}
			if tc.add == offsets {
				// Another partition still overlaps.
				if got := f.c.AddPartitions(ctx, "tx", nextPID, nextEpoch, []TopicPartition{tp(group.OffsetsTopic, 4)}); got != 0 {
					t.Fatalf("add of an offsets partition not owed: %d", got)
				}
			}
		})
	}
}

// TestOverlapCrash: a coordinator that stops (a crash, a leader change) at
// each point of the overlap leaves a log from which the next coordinator
// writes every owed marker before it serves the id, and then serves it.
func TestOverlapCrash(t *testing.T) {
	ctx := context.Background()
	owed := Markers{ProducerEpoch: 1, Commit: true, TransactionVersion: 2, Partitions: []TopicPartition{tp("a", 0)}}
	for _, tc := range []struct {
		name string
		// crash runs the old coordinator f up to the crash, the next
		// transaction's add included.
		crash func(t *testing.T, f *fixture, store *memStore)
		// state the id is in once served: Ongoing when the next
		// transaction's state survived, CompleteCommit when it was lost.
		state State
		// next is the next transaction's partitions, which its commit marks:
		// b-0 when its state survived; when it was lost, those the Prepare
		// state pre-added (a-0), on which the next coordinator resumes it.
		next []TopicPartition
	}{
		{
			name: "ongoing committed, markers not",
			crash: func(t *testing.T, f *fixture, store *memStore) {
				overlappedTxn(t, f)
			},
			state: Ongoing,
		},
		{
			name: "markers committed, then ongoing",
			crash: func(t *testing.T, f *fixture, store *memStore) {
				pid, epoch, gate := committedTxn(t, f, true)
				// The add's write is in flight when the markers commit.
				store.mu.Lock()
				done := make(chan int16)
				go func() { done <- f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}) }()
				wait.For(t, "the add to start its write", func() bool {
					f.c.mu.Lock()
					defer f.c.mu.Unlock()
					return f.c.parts[0].txns["tx"].overlapping
				})
				close(gate)
				wait.For(t, "the markers", func() bool { return len(f.markers.all()) == 1 })
				store.mu.Unlock()
				if got := <-done; got != 0 {
					t.Fatalf("overlapping add: %d", got)
				}
				waitClosed(t, "completion", f.c.Completed("tx"))
			},
			state: Ongoing,
		},
		{
			name: "markers committed, ongoing written after",
			crash: func(t *testing.T, f *fixture, store *memStore) {
				gate := overlappedTxn(t, f)
				close(gate)
				waitClosed(t, "completion", f.c.Completed("tx"))
			},
			state: Ongoing,
		},
		{
			name: "ongoing lost",
			crash: func(t *testing.T, f *fixture, store *memStore) {
				pid, epoch, _ := committedTxn(t, f, true)
				store.mu.Lock()
				store.fail = errShutdown
				store.mu.Unlock()
				if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != code(kerr.CoordinatorNotAvailable) {
					t.Fatalf("overlapping add whose write fails: %d", got)
				}
				store.mu.Lock()
				store.fail = nil
				store.mu.Unlock()
			},
			state: Ongoing,
			next:  []TopicPartition{tp("a", 0)},
		},
		{
			name: "second failover during the re-sent markers",
			crash: func(t *testing.T, f *fixture, store *memStore) {
				overlappedTxn(t, f)
				f.c.UnloadPartition(0)
				// The second coordinator re-sends, and stops before they are written.
				second := &fixture{store: store, markers: &memMarkers{gate: make(chan struct{})}, clock: f.clock}
				second.c = New(f.c.cfg, store, second.markers, f.c.newPID, f.c.log)
				defer second.c.Close()
				store.lead(0, 1)
				if err := second.c.LoadPartitionAt(ctx, 0, 1, store.replay(0)); err != nil {
					t.Fatal(err)
				}
				if got := second.c.AddPartitions(ctx, "tx", 1, 1, []TopicPartition{tp("b", 1)}); got != code(kerr.ConcurrentTransactions) {
					t.Fatalf("add before the re-sent markers are written: %d, want CONCURRENT_TRANSACTIONS", got)
				}
				wait.For(t, "the second coordinator to re-send", func() bool {
					second.markers.mu.Lock()
					defer second.markers.mu.Unlock()
					return second.markers.calls == 1
				})
			},
			state: Ongoing,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			old := newFixtureWith(t, store, 0, time.Hour)
			tc.crash(t, old, store)
			old.c.UnloadPartition(0) // the crash: nothing more is written
			old.c.Close()

			gate := make(chan struct{})
			next := newFixtureMarkers(t, store, 2, time.Hour, &memMarkers{gate: gate})
			// Not served before the owed markers are written.
			wait.For(t, "the markers written again", func() bool {
				next.markers.mu.Lock()
				defer next.markers.mu.Unlock()
				return next.markers.calls == 1
			})
			// (A Prepare state found instead is completed, and resumed on its
			// pre-added partitions; nothing overlaps that completion.)
			if tc.state == Ongoing {
				if got := next.c.AddPartitions(ctx, "tx", 1, 1, []TopicPartition{tp("b", 9)}); got != code(kerr.ConcurrentTransactions) {
					t.Fatalf("add before the owed markers are written: %d, want CONCURRENT_TRANSACTIONS", got)
				}
			}
			close(gate)
			m := next.waitState(t, "tx", tc.state)
			mk := next.markers.all()
			w := owed
			w.ProducerID, w.CoordinatorEpoch = 1, 2
			if len(mk) != 1 || !reflect.DeepEqual(mk[0], w) {
				t.Fatalf("markers written by the next coordinator %+v, want %+v", mk, w)
			}
			if m.Owed != nil {
				t.Fatalf("still owed: %+v", m.Owed)
			}
			if tc.state == Ongoing {
				if got := endCode(next.c.EndTxn(ctx, "tx", 1, 1, true, true)); got != 0 {
					t.Fatalf("EndTxn of the next transaction: %d", got)
				}
				next.waitState(t, "tx", CompleteCommit)
				want := tc.next
				if want == nil {
					want = []TopicPartition{tp("b", 0)}
				}
				if mk := next.markers.all(); len(mk) != 2 || !slices.Equal(mk[1].Partitions, want) {
					t.Fatalf("the next transaction's markers %+v, want on %v", mk, want)
				}
			}
		})
	}
}

var errShutdown = errors.New("log closed")

// TestOwedRecord: the owed markers round-trip through the record's tagged
// field; records without it (Kafka's, and Strata's before it) load with
// nothing owed; a damaged value is a corrupt record.
func TestOwedRecord(t *testing.T) {
	m := Meta{ProducerID: 9, ProducerEpoch: 4, TimeoutMs: 1000, State: Ongoing, StartMs: 1, LastUpdateMs: 2, TV2: true,
		Partitions: []TopicPartition{tp("b", 0)},
		Owed:       &Owed{Commit: true, ProducerID: 9, ProducerEpoch: 4, Partitions: []TopicPartition{tp("a", 0), tp("a", 3), tp("c", 1)}}}
	_, got, err := decodeRecord(encodeRecord("tx", m))
	if err != nil || !reflect.DeepEqual(*got, m) {
		t.Fatalf("round trip: %+v (owed %+v), %v", got, got.Owed, err)
	}
	// Kafka's own tools read the record: the tag is skipped.
	rec := encodeRecord("tx", m)
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(rec.Value); err != nil || v.State != Ongoing || v.ProducerEpoch != 4 {
		t.Fatalf("kmsg read %+v: %v", v, err)
	}
	for _, old := range []Meta{
		{ProducerID: 9, ProducerEpoch: 4, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}},            // v0
		{ProducerID: 9, ProducerEpoch: 4, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, TV2: true}, // v1, no tag
	} {
		if _, got, err := decodeRecord(encodeRecord("tx", old)); err != nil || got.Owed != nil {
			t.Fatalf("old record: %+v, %v", got, err)
		}
	}
	damagedTagsRefused(t, owedTag, appendOwed(nil, m.Owed), Ongoing)
}

// damagedTagsRefused checks that a record of state whose tag holds good
// damaged (truncated, trailing bytes, an unknown version, empty) is a
// corrupt record.
func damagedTagsRefused(t *testing.T, tag uint32, good []byte, state State) {
	t.Helper()
	for name, val := range map[string][]byte{
		"truncated":       good[:len(good)-2],
		"trailing bytes":  append(slices.Clone(good), 0),
		"unknown version": append([]byte{9}, good[1:]...),
		"empty":           {},
	} {
		v := kmsg.NewTxnMetadataValue()
		v.Version, v.ProducerID, v.State, v.ClientTransactionVersion = 1, 9, state, 2
		v.UnknownTags.Set(tag, val)
		key := kmsg.NewTxnMetadataKey()
		key.TransactionalID = "tx"
		if _, _, err := decodeRecord(group.Record{Key: key.AppendTo(nil), Value: v.AppendTo(nil)}); err == nil {
			t.Errorf("tag %d %s: decoded", tag, name)
		}
	}
}

// TestOverlapGatedByBrokerFeatures: with Config.Overlap reading the metadata
// as the broker does, a registered broker whose registration lacks
// metadata.FeatureOwedMarkers (a build that would read an owed-marker state
// as a plain one) keeps the overlap off: the next transaction's add while
// the markers are written is CONCURRENT_TRANSACTIONS, as before the
// overlap, and no state names owed markers. Once every broker has it
// recorded, the next end overlaps.
func TestOverlapGatedByBrokerFeatures(t *testing.T) {
	var img atomic.Pointer[metadata.Image]
	img.Store(metadata.NewImage())
	apply := func(recs ...metadata.Record) {
		t.Helper()
		next, err := metadata.ApplyAll(img.Load(), recs)
		if err != nil {
			t.Fatal(err)
		}
		img.Store(next)
	}
	owedMarkers := func(id int32) *metadata.BrokerFeaturesRecord {
		return &metadata.BrokerFeaturesRecord{BrokerID: id, Epoch: 1, Features: metadata.SupportedFeatures}
	}
	apply(&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9091},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		owedMarkers(1))
	store := &memStore{}
	f := newFixtureGated(t, store, 0, time.Hour, &memMarkers{}, func() bool {
		return img.Load().BrokersSupport(metadata.FeatureOwedMarkers, 1)
	})
	ctx := context.Background()

	pid, epoch, gate := committedTxn(t, f, true)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != code(kerr.ConcurrentTransactions) {
		t.Fatalf("the next add while the markers are written, broker 2 without owed markers: %d, want CONCURRENT_TRANSACTIONS", got)
	}
	if m := lastRecord(t, store); m.State != PrepareCommit || m.Owed != nil {
		t.Fatalf("last state %v (owed %+v), want the PrepareCommit, nothing owed", m.State, m.Owed)
	}
	close(gate)
	waitClosed(t, "markers written", f.c.Completed("tx"))

	apply(owedMarkers(2))
	pid, epoch, gate = committedTxn(t, f, true)
	defer close(gate)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("b", 0)}); got != 0 {
		t.Fatalf("the next add while the markers are written, every broker with owed markers: %d, want 0", got)
	}
	if m := lastRecord(t, store); m.State != Ongoing || m.Owed == nil {
		t.Fatalf("last state %v (owed %+v), want Ongoing owing the markers", m.State, m.Owed)
	}
}
