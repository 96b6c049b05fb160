package txn

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/wait"
)

// committedOn runs a transaction-version-2 producer "tx" through one
// transaction on tps and commits it with EndTxn v5, its markers held back
// while gated; it returns the producer id and epoch the next transaction uses.
func committedOn(t *testing.T, f *fixture, tps []TopicPartition, gated bool) (int64, int16, chan struct{}) {
	t.Helper()
	ctx := context.Background()
	pid, epoch, _ := f.c.InitProducerID(ctx, "tx", 10000, -1, -1)
	if got := f.c.AddPartitions(ctx, "tx", pid, epoch, tps); got != 0 {
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

// unackedWrites is how many batches store took through AppendUnacked.
func unackedWrites(store *memStore) int {
	store.mu.Lock()
	defer store.mu.Unlock()
	return store.unacked
}

// TestPreaddedNextAdd: an EndTxn v5 pre-adds the transaction's partitions
// (but __consumer_offsets ones) to the producer's next transaction, in its
// Prepare state; the next transaction's first add of pre-added partitions
// is then answered with its Ongoing state written unacked, whether the
// markers are still being written (the state names them as owed) or not.
// Every other add waits for its state's commit as before: one that is not
// all pre-added, a second add of the transaction (the first consumed the
// pre-added partitions), any add once the completed state was written
// alone, and every add while Config.Preadd is off.
func TestPreaddedNextAdd(t *testing.T) {
	ctx := context.Background()
	a0, a1, offsets := tp("a", 0), tp("a", 1), tp(group.OffsetsTopic, 3)
	for _, tc := range []struct {
		name   string
		preadd bool // Config.Preadd's answer
		// completed: the markers are written before the add; alone: and
		// the completed state after them, on its own.
		gated, alone bool
		adds         [][]TopicPartition
		unacked      []bool // per add: written unacked
	}{
		{name: "markers in flight", preadd: true, gated: true, adds: [][]TopicPartition{{a0}, {a1}}, unacked: []bool{true, false}},
		{name: "markers written", preadd: true, adds: [][]TopicPartition{{a1, a0}}, unacked: []bool{true}},
		{name: "not all pre-added", preadd: true, gated: true, adds: [][]TopicPartition{{a0, tp("b", 0)}, {a1}}, unacked: []bool{false, false}},
		{name: "offsets not pre-added", preadd: true, adds: [][]TopicPartition{{offsets}}, unacked: []bool{false}},
		{name: "completed state written alone", preadd: true, alone: true, adds: [][]TopicPartition{{a0}}, unacked: []bool{false}},
		{name: "gate closed", gated: true, adds: [][]TopicPartition{{a0}}, unacked: []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			delay := time.Hour
			if tc.alone {
				delay = time.Millisecond
			}
			f := newFixtureWith(t, store, 0, delay)
			f.c.cfg.Preadd = func() bool { return tc.preadd }
			pid, epoch, gate := committedOn(t, f, []TopicPartition{a0, a1, offsets}, tc.gated)
			prep := lastRecord(t, store)
			want := []TopicPartition{a0, a1}
			if !tc.preadd {
				want = nil
			}
			if prep.State != PrepareCommit || !slices.Equal(prep.Preadded, want) {
				t.Fatalf("EndTxn wrote %v pre-adding %v, want PrepareCommit pre-adding %v", prep.State, prep.Preadded, want)
			}
			if !tc.gated {
				waitClosed(t, "completion", f.c.Completed("tx"))
			}
			if tc.alone {
				wait.For(t, "the completed state written alone", func() bool { return lastRecord(t, store).State == CompleteCommit })
			}
			for i, add := range tc.adds {
				before := unackedWrites(store)
				if got := f.c.AddPartitions(ctx, "tx", pid, epoch, add); got != 0 {
					t.Fatalf("add %d of the next transaction: %d", i, got)
				}
				if got := unackedWrites(store) > before; got != tc.unacked[i] {
					t.Fatalf("add %d of %v: written unacked %v, want %v", i, add, got, tc.unacked[i])
				}
				m := lastRecord(t, store)
				if m.State != Ongoing || m.ProducerEpoch != epoch || len(m.Preadded) != 0 {
					t.Fatalf("add %d wrote %+v", i, m)
				}
				if owes := m.Owed != nil; owes != tc.gated {
					t.Fatalf("add %d wrote owed markers %+v; want some: %v", i, m.Owed, tc.gated)
				}
			}
			if gate != nil {
				close(gate)
				waitClosed(t, "completion", f.c.Completed("tx"))
			}
			// The transaction ends as any: the markers on its partitions.
			if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != 0 {
				t.Fatalf("EndTxn of the next transaction: %d", got)
			}
			waitClosed(t, "completion", f.c.Completed("tx"))
			mk := f.markers.all()
			var added []TopicPartition
			for _, add := range tc.adds {
				added = union(added, add)
			}
			if last := mk[len(mk)-1]; last.ProducerEpoch != epoch+1 || !slices.Equal(last.Partitions, added) {
				t.Fatalf("the next transaction's markers %+v, want at epoch %d on %v", last, epoch+1, added)
			}
		})
	}
}

// TestPreaddedResume: the next transaction's Ongoing state, written unacked
// on pre-added partitions, is lost with the coordinator. The next
// coordinator finds the Prepare state that pre-added them: it writes its
// markers again, serving nothing of the id meanwhile, and then takes the
// producer's next transaction as begun on them (the producer may have
// written there). Whatever the producer does next ends it correctly: a
// retry of the EndTxn whose answer it lost is answered from the completed
// state, its commit marks the pre-added partitions, and InitProducerId and
// the transaction's timeout abort it there.
func TestPreaddedResume(t *testing.T) {
	ctx := context.Background()
	a0, b0 := tp("a", 0), tp("b", 0)
	for _, tc := range []struct {
		name string
		// then runs the producer's next steps against the next coordinator
		// f, at epoch (the one the lost add was at); the markers written
		// last must be at wantEpoch, commit or not, on want.
		then      func(t *testing.T, f *fixture, pid int64, epoch int16)
		wantEpoch int16 // over epoch
		commit    bool
		want      []TopicPartition
	}{
		{
			name: "retried end, then the next transaction",
			then: func(t *testing.T, f *fixture, pid int64, epoch int16) {
				if p, e, got := f.c.EndTxn(ctx, "tx", pid, epoch-1, true, true); got != 0 || p != pid || e != epoch {
					t.Fatalf("retried EndTxn commit: %d %d %d, want %d %d 0", p, e, got, pid, epoch)
				}
				if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch-1, false, true)); got == 0 {
					t.Fatal("a retried EndTxn abort of the committed transaction succeeded")
				}
				if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{b0}); got != 0 {
					t.Fatalf("add of b-0: %d", got)
				}
				if got := endCode(f.c.EndTxn(ctx, "tx", pid, epoch, true, true)); got != 0 {
					t.Fatalf("EndTxn: %d", got)
				}
			},
			wantEpoch: 1, commit: true, want: []TopicPartition{a0, b0},
		},
		{
			name: "InitProducerId",
			then: func(t *testing.T, f *fixture, pid int64, epoch int16) {
				if _, _, got := f.c.InitProducerID(ctx, "tx", 10000, -1, -1); got != code(kerr.ConcurrentTransactions) {
					t.Fatalf("InitProducerId: %d, want CONCURRENT_TRANSACTIONS while the transaction aborts", got)
				}
			},
			wantEpoch: 1, want: []TopicPartition{a0},
		},
		{
			name: "timeout",
			then: func(t *testing.T, f *fixture, pid int64, epoch int16) {
				f.clock.Advance(11 * time.Second)
				f.c.expireTxns()
			},
			wantEpoch: 1, want: []TopicPartition{a0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{loseUnacked: true}
			old := newFixtureWith(t, store, 0, time.Hour)
			pid, epoch, gate := committedOn(t, old, []TopicPartition{a0}, true)
			if got := old.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{a0}); got != 0 {
				t.Fatalf("the next transaction's add: %d", got)
			}
			close(gate)
			waitClosed(t, "completion", old.c.Completed("tx"))
			old.c.UnloadPartition(0) // the crash
			old.c.Close()
			if m := lastRecord(t, store); m.State != PrepareCommit || !slices.Equal(m.Preadded, []TopicPartition{a0}) {
				t.Fatalf("the log ends at %+v, want the PrepareCommit state pre-adding a-0", m)
			}

			gate = make(chan struct{})
			f := newFixtureMarkers(t, store, 2, time.Hour, &memMarkers{gate: gate})
			wait.For(t, "the markers written again", func() bool {
				f.markers.mu.Lock()
				defer f.markers.mu.Unlock()
				return f.markers.calls == 1
			})
			if got := f.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{a0}); got != code(kerr.ConcurrentTransactions) {
				t.Fatalf("add before the markers are written again: %d, want CONCURRENT_TRANSACTIONS", got)
			}
			close(gate)
			m := f.waitState(t, "tx", Ongoing)
			if m.ProducerEpoch != epoch || !slices.Equal(m.Partitions, []TopicPartition{a0}) || m.StartMs != f.clock.Now().UnixMilli() {
				t.Fatalf("resumed as %+v, want Ongoing at epoch %d on a-0, begun now", m, epoch)
			}
			again := Markers{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: 2, Commit: true, TransactionVersion: 2, Partitions: []TopicPartition{a0}}
			if mk := f.markers.all(); len(mk) != 1 || !reflect.DeepEqual(mk[0], again) {
				t.Fatalf("markers written again %+v, want %+v", mk, again)
			}

			tc.then(t, f, pid, epoch)
			waitClosed(t, "completion", f.c.Completed("tx"))
			mk := f.markers.all()
			last := mk[len(mk)-1]
			if len(mk) != 2 || last.ProducerEpoch != epoch+tc.wantEpoch || last.Commit != tc.commit || !slices.Equal(last.Partitions, tc.want) {
				t.Fatalf("markers %+v, want the last at epoch %d, commit %v, on %v", mk, epoch+tc.wantEpoch, tc.commit, tc.want)
			}
		})
	}
}

// TestPreaddedRecord: the pre-added partitions round-trip through the
// record's tagged field, which Kafka's own decoder skips; a record without
// it pre-adds nothing; a damaged value is a corrupt record.
func TestPreaddedRecord(t *testing.T) {
	m := Meta{ProducerID: 9, ProducerEpoch: 5, TimeoutMs: 1000, State: PrepareCommit, StartMs: 1, LastUpdateMs: 2, TV2: true,
		Partitions: []TopicPartition{tp("a", 0), tp("a", 3), tp("c", 1)}, Preadded: []TopicPartition{tp("a", 0), tp("a", 3), tp("c", 1)}}
	rec := encodeRecord("tx", m)
	if _, got, err := decodeRecord(rec); err != nil || !reflect.DeepEqual(*got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(rec.Value); err != nil || v.State != PrepareCommit || v.ProducerEpoch != 5 || len(v.Topics) != 2 {
		t.Fatalf("kmsg read %+v: %v", v, err)
	}
	plain := m
	plain.Preadded = nil
	if _, got, err := decodeRecord(encodeRecord("tx", plain)); err != nil || got.Preadded != nil {
		t.Fatalf("record without the tag: %+v, %v", got, err)
	}
	damagedTagsRefused(t, preaddedTag, appendTopics([]byte{preaddedVersion}, m.Preadded), PrepareCommit)
}
