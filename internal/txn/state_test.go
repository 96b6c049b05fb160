package txn

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/group"
)

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func TestTransitionsTable(t *testing.T) {
	ongoing := Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5}
	empty := Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: Empty, StartMs: -1}
	prepared := ongoing
	prepared.State = PrepareCommit
	done := complete(prepared, 9)
	tests := []struct {
		name      string
		tr        transition
		code      *kerr.Error
		write     bool
		wantState State
	}{
		{"add to empty starts", addPartitions(&empty, 7, 2, []TopicPartition{tp("b", 1)}, 10), nil, true, Ongoing},
		{"add known partition: no write", addPartitions(&ongoing, 7, 2, []TopicPartition{tp("a", 0)}, 10), nil, false, 0},
		{"add with a stale epoch", addPartitions(&ongoing, 7, 1, nil, 10), kerr.ProducerFenced, false, 0},
		{"add with a newer epoch", addPartitions(&ongoing, 7, 3, nil, 10), kerr.ProducerFenced, false, 0},
		{"end with a newer epoch", endTxn(&ongoing, 7, 3, true, 10), kerr.ProducerFenced, false, 0},
		{"add for another producer", addPartitions(&ongoing, 8, 2, nil, 10), kerr.InvalidProducerIDMapping, false, 0},
		{"add for an unknown id", addPartitions(nil, 8, 2, nil, 10), kerr.InvalidProducerIDMapping, false, 0},
		{"add while preparing", addPartitions(&prepared, 7, 2, nil, 10), kerr.ConcurrentTransactions, false, 0},
		{"commit ongoing", endTxn(&ongoing, 7, 2, true, 10), nil, true, PrepareCommit},
		{"abort ongoing", endTxn(&ongoing, 7, 2, false, 10), nil, true, PrepareAbort},
		{"end without a transaction", endTxn(&empty, 7, 2, true, 10), kerr.InvalidTxnState, false, 0},
		{"commit again while committing", endTxn(&prepared, 7, 2, true, 10), kerr.ConcurrentTransactions, false, 0},
		{"abort while committing", endTxn(&prepared, 7, 2, false, 10), kerr.InvalidTxnState, false, 0},
		{"retried commit of a committed one", endTxn(&done, 7, 2, true, 10), nil, false, 0},
		{"abort of a committed one", endTxn(&done, 7, 2, false, 10), kerr.InvalidTxnState, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := int16(0)
			if tt.code != nil {
				want = tt.code.Code
			}
			if tt.tr.code != want || tt.tr.write != tt.write {
				t.Fatalf("code %d write %v, want %d %v", tt.tr.code, tt.tr.write, want, tt.write)
			}
			if tt.write && tt.tr.next.State != tt.wantState {
				t.Fatalf("state %v, want %v", tt.tr.next.State, tt.wantState)
			}
		})
	}
}

// TestEndTxnV2: EndTxn v5 (KIP-890) bumps the epoch on every end, answers
// retries made with the epoch before the bump, allows an abort without a
// transaction, and moves to a new producer id when the epoch is exhausted.
func TestEndTxnV2(t *testing.T) {
	newPID := func() (int64, error) { return 99, nil }
	end := func(m *Meta, pid int64, epoch int16, commit bool) transition {
		t.Helper()
		tr, err := endTxnV2(m, pid, epoch, commit, newPID, 10)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	ongoing := Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5}
	tr := end(&ongoing, 7, 2, true)
	if !tr.write || tr.next.State != PrepareCommit || tr.next.ProducerEpoch != 3 || !tr.next.TV2 || len(tr.next.Partitions) != 1 {
		t.Fatalf("commit: %+v", tr)
	}
	prepared := tr.next
	if got := end(&prepared, 7, 2, true); got.code != kerr.ConcurrentTransactions.Code || got.write {
		t.Fatalf("retry while committing: %+v", got)
	}
	done := complete(prepared, 11)
	if pid, epoch := done.Answered(); pid != 7 || epoch != 3 {
		t.Fatalf("answered %d/%d, want 7/3", pid, epoch)
	}
	for _, tt := range []struct {
		name   string
		epoch  int16
		commit bool
		code   *kerr.Error
		write  bool
	}{
		{"retried commit", 2, true, nil, false},
		{"retried end the other way", 2, false, kerr.InvalidTxnState, false},
		{"older epoch", 1, true, kerr.ProducerFenced, false},
		{"commit without a transaction", 3, true, kerr.InvalidTxnState, false},
		{"abort without a transaction", 3, false, nil, true},
		{"newer epoch", 4, false, kerr.ProducerFenced, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := end(&done, 7, tt.epoch, tt.commit)
			if got.code != code(tt.code) || got.write != tt.write {
				t.Fatalf("code %d write %v, want %d %v", got.code, got.write, code(tt.code), tt.write)
			}
		})
	}
	if got := end(&done, 7, 3, false); got.next.State != PrepareAbort || got.next.ProducerEpoch != 4 || len(got.next.Partitions) != 0 {
		t.Fatalf("empty abort: %+v", got.next)
	}
	// The next transaction ends with EndTxn v4 (a client of transaction
	// version 1 took the id over): TV2 is cleared, so its markers go as
	// version 1 at the batches' epoch, and an epoch-1 end is a zombie's.
	init, err := initProducer(&done, newPID, 1000, -1, -1, 12)
	if err != nil {
		t.Fatal(err)
	}
	next := addPartitions(&init.next, 7, 4, []TopicPartition{tp("b", 0)}, 12).next
	v4 := endTxn(&next, 7, 4, true, 13).next
	if v4.TV2 || v4.ProducerEpoch != 4 || v4.markerVersion() != 1 {
		t.Fatalf("EndTxn v4 after a v5 end: %+v, marker version %d", v4, v4.markerVersion())
	}
	v1 := complete(v4, 14)
	if _, back, err := decodeRecord(encodeRecord("tx", v1)); err != nil || v1.TV2 || back.TV2 {
		t.Fatalf("completed after a v4 end: %+v, record %+v %v", v1, back, err)
	}
	if got := end(&v1, 7, 3, true); got.code != kerr.ProducerFenced.Code {
		t.Fatalf("epoch-1 end after a v4 end: %+v", got)
	}

	exhausted := ongoing
	exhausted.ProducerEpoch = math.MaxInt16 - 1
	tr = end(&exhausted, 7, math.MaxInt16-1, false)
	if tr.next.ProducerEpoch != math.MaxInt16 || tr.next.NextProducerID != 99 {
		t.Fatalf("end at an exhausted epoch: %+v", tr.next)
	}
	if pid, epoch := tr.next.Answered(); pid != 99 || epoch != 0 {
		t.Fatalf("answered %d/%d, want 99/0", pid, epoch)
	}
	done = complete(tr.next, 12)
	if done.ProducerID != 99 || done.ProducerEpoch != 0 || done.PrevProducerID != 7 {
		t.Fatalf("completed after overflow: %+v", done)
	}
	if got := end(&done, 7, math.MaxInt16-1, false); got.code != 0 || got.write {
		t.Fatalf("retry with the exhausted id: %+v", got)
	}
	_, back, err := decodeRecord(encodeRecord("tx", tr.next))
	if err != nil || back.NextProducerID != 99 || !back.TV2 {
		t.Fatalf("prepared record round trip: %+v %v", back, err)
	}
	_, back, err = decodeRecord(encodeRecord("tx", done))
	if err != nil || back.PrevProducerID != 7 || back.ProducerID != 99 || !back.TV2 {
		t.Fatalf("completed record round trip: %+v %v", back, err)
	}
}

func TestInitProducerTransitions(t *testing.T) {
	pids := int64(100)
	newPID := func() (int64, error) { pids++; return pids, nil }
	tr, _ := initProducer(nil, newPID, 1000, -1, -1, 1)
	if !tr.write || tr.next.ProducerID != 101 || tr.next.ProducerEpoch != 0 || tr.next.State != Empty {
		t.Fatalf("new id: %+v", tr)
	}
	m := tr.next
	tr, _ = initProducer(&m, newPID, 1000, -1, -1, 2)
	if tr.next.ProducerID != 101 || tr.next.ProducerEpoch != 1 {
		t.Fatalf("re-init must bump the epoch: %+v", tr.next)
	}
	m = tr.next
	m.State, m.Partitions, m.StartMs = Ongoing, []TopicPartition{tp("a", 0)}, 2
	tr, _ = initProducer(&m, newPID, 1000, -1, -1, 3)
	if tr.code != kerr.ConcurrentTransactions.Code || !tr.write || tr.next.State != PrepareAbort || tr.next.ProducerEpoch != 2 {
		t.Fatalf("re-init over an open transaction must fence and abort it: %+v", tr)
	}
	tr, _ = initProducer(&m, newPID, 1000, 101, 0, 3)
	if tr.code != kerr.ProducerFenced.Code {
		t.Fatalf("KIP-360 re-init with a stale epoch: %+v", tr)
	}
	m.State, m.ProducerEpoch = CompleteAbort, 32766
	tr, _ = initProducer(&m, newPID, 1000, -1, -1, 4)
	if tr.next.ProducerID == 101 || tr.next.ProducerEpoch != 0 {
		t.Fatalf("an exhausted epoch moves to a new producer id: %+v", tr.next)
	}
	_, err := initProducer(nil, func() (int64, error) { return 0, errors.New("no ids") }, 1000, -1, -1, 1)
	if err == nil {
		t.Fatal("an id allocation failure must surface")
	}
}

// TestFenceAtExhaustedEpochs: a fence (InitProducerId over an open
// transaction, the timeout's abort) bumps 32766 to 32767 and aborts at 32767
// without a bump, as Kafka does; the id keeps its producer id until the next
// InitProducerId moves it to a new one.
func TestFenceAtExhaustedEpochs(t *testing.T) {
	newPID := func() (int64, error) { return 99, nil }
	for _, tt := range []struct {
		epoch, fenced int16
	}{
		{math.MaxInt16 - 2, math.MaxInt16 - 1},
		{math.MaxInt16 - 1, math.MaxInt16},
		{math.MaxInt16, math.MaxInt16},
	} {
		ongoing := Meta{ProducerID: 7, ProducerEpoch: tt.epoch, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, TV2: true}
		init, err := initProducer(&ongoing, newPID, 1000, -1, -1, 10)
		if err != nil {
			t.Fatal(err)
		}
		for name, prep := range map[string]Meta{"InitProducerId": init.next, "timeout": expire(ongoing, 10)} {
			if prep.State != PrepareAbort || prep.ProducerID != 7 || prep.ProducerEpoch != tt.fenced {
				t.Fatalf("%s at epoch %d: %+v, want PrepareAbort of producer 7 at %d", name, tt.epoch, prep, tt.fenced)
			}
			done := complete(prep, 11)
			if done.ProducerID != 7 || done.ProducerEpoch != tt.fenced {
				t.Fatalf("%s at epoch %d: completed %+v, want producer 7 at %d", name, tt.epoch, done, tt.fenced)
			}
			// No client may hold 32767: an end from 32766 is not the retry of one to it.
			if tr, _ := endTxnV2(&done, 7, tt.epoch, false, newPID, 12); tt.epoch == math.MaxInt16-1 && tr.code != code(kerr.ProducerFenced) {
				t.Errorf("%s at epoch %d: EndTxn v5 abort at the fenced epoch: code %d write %v, want PRODUCER_FENCED", name, tt.epoch, tr.code, tr.write)
			}
			next, _ := initProducer(&done, newPID, 1000, -1, -1, 12)
			if want := tt.fenced >= math.MaxInt16-1; (next.next.ProducerID == 99) != want {
				t.Errorf("%s at epoch %d: the next InitProducerId: %+v, new producer id %v", name, tt.epoch, next.next, want)
			}
		}
	}
}

// TestInitProducerRetry: a KIP-360 InitProducerId with the epoch before the
// one the id's last InitProducerId or EndTxn v5 gave is answered with the
// current producer id and epoch, without a write, while the id has no
// transaction (Kafka's lastProducerEpoch); after a new incarnation's
// InitProducerId or a fence it is fenced.
func TestInitProducerRetry(t *testing.T) {
	newPID := func() (int64, error) { return 99, nil }
	must := func(tr transition, err error) Meta {
		t.Helper()
		if err != nil || (tr.code != 0 && tr.code != kerr.ConcurrentTransactions.Code) || !tr.write {
			t.Fatalf("%+v %v", tr, err)
		}
		return tr.next
	}
	empty := Meta{ProducerID: 7, ProducerEpoch: 4, TimeoutMs: 1000, State: Empty, StartMs: -1, LastProducerEpoch: -1}
	bumped := must(initProducer(&empty, newPID, 1000, 7, 4, 1))
	ongoing := addPartitions(&bumped, 7, 5, []TopicPartition{tp("a", 0)}, 2).next
	ended := complete(must(endTxnV2(&ongoing, 7, 5, true, newPID, 3)), 4)
	exhausted := empty
	exhausted.ProducerEpoch = math.MaxInt16 - 1
	moved := must(initProducer(&exhausted, newPID, 1000, 7, math.MaxInt16-1, 1))
	for _, tt := range []struct {
		name      string
		m         Meta
		pid       int64
		epoch     int16
		code      *kerr.Error
		wantPID   int64
		wantEpoch int16
	}{
		{"retry of the bump", bumped, 7, 4, nil, 7, 5},
		{"the current epoch bumps", bumped, 7, 5, nil, 7, 6},
		{"an epoch before the retried one", bumped, 7, 3, kerr.ProducerFenced, 0, 0},
		{"retry once a transaction began", ongoing, 7, 4, kerr.ProducerFenced, 0, 0},
		{"retry after a new incarnation", must(initProducer(&bumped, newPID, 1000, -1, -1, 2)), 7, 4, kerr.ProducerFenced, 0, 0},
		{"retry after a fence", complete(must(initProducer(&ongoing, newPID, 1000, -1, -1, 3)), 4), 7, 4, kerr.ProducerFenced, 0, 0},
		{"retry after EndTxn v5", ended, 7, 5, nil, 7, 6},
		{"retry of a move to a new producer id", moved, 7, math.MaxInt16 - 1, nil, 99, 0},
		{"the new producer id at the old epoch", moved, 99, math.MaxInt16 - 1, kerr.ProducerFenced, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := initProducer(&tt.m, newPID, 1000, tt.pid, tt.epoch, 5)
			if err != nil || tr.code != code(tt.code) {
				t.Fatalf("code %d %v, want %d", tr.code, err, code(tt.code))
			}
			got := tt.m // a retry writes nothing: the answer is the current state
			if tr.write {
				got = tr.next
			}
			if tt.code == nil && (got.ProducerID != tt.wantPID || got.ProducerEpoch != tt.wantEpoch) {
				t.Fatalf("answered %d/%d (write %v), want %d/%d", got.ProducerID, got.ProducerEpoch, tr.write, tt.wantPID, tt.wantEpoch)
			}
		})
	}
}

// TestTransitionsProperty drives one transactional id through random requests
// (some with wrong producer ids or epochs) and checks the invariants Kafka's
// coordinator keeps after every step: the epoch never goes back, a refused
// request changes nothing, only Ongoing and Prepare states hold partitions,
// partitions are sorted and unique, and every state survives a record round trip.
func TestTransitionsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pids := int64(0)
		newPID := func() (int64, error) { pids++; return pids, nil }
		var cur *Meta
		topics := []string{"a", "b", "c"}
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now := int64(step)
			pid, epoch := int64(-1), int16(-1)
			if cur != nil {
				pid, epoch = cur.ProducerID, cur.ProducerEpoch
			}
			if rapid.Bool().Draw(t, "wrong producer") {
				pid += int64(rapid.IntRange(-1, 1).Draw(t, "pid delta"))
				epoch += int16(rapid.IntRange(-1, 1).Draw(t, "epoch delta"))
			}
			var tr transition
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				var err error
				if tr, err = initProducer(cur, newPID, 1000, -1, -1, now); err != nil {
					t.Fatal(err)
				}
			case 1:
				var add []TopicPartition
				for range rapid.IntRange(1, 3).Draw(t, "n") {
					add = append(add, tp(rapid.SampledFrom(topics).Draw(t, "topic"), int32(rapid.IntRange(0, 2).Draw(t, "p"))))
				}
				tr = addPartitions(cur, pid, epoch, add, now)
			case 2:
				if rapid.Bool().Draw(t, "tv2") {
					var err error
					if tr, err = endTxnV2(cur, pid, epoch, rapid.Bool().Draw(t, "commit"), newPID, now); err != nil {
						t.Fatal(err)
					}
				} else {
					tr = endTxn(cur, pid, epoch, rapid.Bool().Draw(t, "commit"), now)
				}
			case 3:
				if cur != nil && (cur.State == PrepareCommit || cur.State == PrepareAbort) {
					tr = transition{write: true, next: complete(*cur, now)}
				}
			case 4:
				if cur != nil && cur.State == Ongoing {
					tr = transition{write: true, next: expire(*cur, now)}
				}
			}
			if !tr.write {
				continue // refused or a no-op: the state stays as it was
			}
			next := tr.next
			if cur != nil && next.ProducerID == cur.ProducerID && next.ProducerEpoch < cur.ProducerEpoch {
				t.Fatalf("epoch went back: %d -> %d", cur.ProducerEpoch, next.ProducerEpoch)
			}
			switch next.State {
			case Ongoing, PrepareCommit, PrepareAbort:
				if len(next.Partitions) == 0 && next.State == Ongoing {
					t.Fatalf("ongoing without partitions: %+v", next)
				}
			case Empty, CompleteCommit, CompleteAbort:
				if len(next.Partitions) != 0 {
					t.Fatalf("%v holds partitions %v", next.State, next.Partitions)
				}
			default:
				t.Fatalf("unexpected state %v", next.State)
			}
			if !slices.IsSortedFunc(next.Partitions, compareTP) || len(slices.CompactFunc(slices.Clone(next.Partitions), func(a, b TopicPartition) bool { return a == b })) != len(next.Partitions) {
				t.Fatalf("partitions not sorted and unique: %v", next.Partitions)
			}
			id, back, err := decodeRecord(encodeRecord("tx", next))
			if err != nil || id != "tx" || back == nil || back.ProducerID != next.ProducerID || back.ProducerEpoch != next.ProducerEpoch ||
				back.State != next.State || !slices.Equal(back.Partitions, next.Partitions) || back.StartMs != next.StartMs || back.TV2 != next.TV2 ||
				back.LastProducerEpoch != next.LastProducerEpoch {
				t.Fatalf("record round trip: %+v -> %+v, %v", next, back, err)
			}
			cur = &next
		}
	})
}

// FuzzDecodeRecord: no input panics the replay decoder.
func FuzzDecodeRecord(f *testing.F) {
	r := encodeRecord("tx", Meta{ProducerID: 1, State: Ongoing, Partitions: []TopicPartition{tp("a", 1)}})
	f.Add(r.Key, r.Value)
	owed := encodeRecord("tx", Meta{ProducerID: 1, State: Ongoing, TV2: true, Partitions: []TopicPartition{tp("a", 1)},
		Owed: &Owed{Commit: true, ProducerID: 1, ProducerEpoch: 2, Partitions: []TopicPartition{tp("b", 0), tp("b", 2)}}})
	f.Add(owed.Key, owed.Value)
	last := encodeRecord("tx", Meta{ProducerID: 1, ProducerEpoch: 3, State: Empty, LastProducerEpoch: 2})
	f.Add(last.Key, last.Value)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _, _ = decodeRecord(group.Record{Key: key, Value: value})
	})
}

// TestMarkerVersion: the markers of a Prepare state carry transaction version 2
// (KIP-1228: partitions refuse one whose epoch is not above the producer's)
// only when the Prepare state's epoch is above the one the transaction's
// batches were written at, for every way a transaction-version-2 transaction
// ends (else a partition would refuse the marker and the transaction would
// hang), and always then except at epoch math.MaxInt16-1, where a saturated
// bump cannot be told from a real one.
func TestMarkerVersion(t *testing.T) {
	newPID := func() (int64, error) { return 99, nil }
	for _, e := range []int16{0, 5, math.MaxInt16 - 3, math.MaxInt16 - 2, math.MaxInt16 - 1} {
		ongoing := Meta{ProducerID: 7, ProducerEpoch: e, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, TV2: true}
		ended, err := endTxnV2(&ongoing, 7, e, true, newPID, 10)
		if err != nil {
			t.Fatal(err)
		}
		fenced, err := initProducer(&ongoing, newPID, 1000, -1, -1, 10)
		if err != nil {
			t.Fatal(err)
		}
		for name, next := range map[string]Meta{"EndTxn v5": ended.next, "InitProducerId": fenced.next, "timeout": expire(ongoing, 10)} {
			bumped, v := next.ProducerEpoch > e, next.markerVersion()
			switch {
			case v == 2 && !bumped:
				t.Errorf("%s at epoch %d: prepared at the batches' epoch with marker version 2", name, e)
			case v != 2 && bumped && next.ProducerEpoch != math.MaxInt16-1:
				t.Errorf("%s at epoch %d: prepared at %d with marker version %d, want 2", name, e, next.ProducerEpoch, v)
			}
		}
	}
	v1 := Meta{ProducerID: 7, ProducerEpoch: 3, State: PrepareCommit}
	if got := v1.markerVersion(); got != 1 {
		t.Fatalf("transaction version 1: marker version %d, want 1", got)
	}
}

// TestFencedEndIsNotARetry: once a new incarnation's InitProducerId fenced a
// transaction-version-2 producer (one epoch up, abort), the fenced producer's
// EndTxn v5 abort at its old epoch is PRODUCER_FENCED. It used to be taken as
// the retry of an end that bumped to the fence's epoch, answered with that
// epoch, and the zombie could go on with a transaction at it. (The timeout's
// abort is taken as such a retry: TestTimedOutProducerAbortsAndGoesOn.) A
// state loaded from a record that did not keep the epoch its end began at
// still takes the epoch before its own as a retry.
func TestFencedEndIsNotARetry(t *testing.T) {
	ongoing := Meta{ProducerID: 7, ProducerEpoch: 4, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, TV2: true, LastProducerEpoch: 3}
	byInit, err := initProducer(&ongoing, func() (int64, error) { return 99, nil }, 1000, -1, -1, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		fenced Meta
	}{
		{"InitProducerId", byInit.next},
	} {
		t.Run(tt.name, func(t *testing.T) {
			done := complete(tt.fenced, 21)
			if done.ProducerEpoch != 5 || done.State != CompleteAbort {
				t.Fatalf("fenced: %+v", done)
			}
			tr, err := endTxnV2(&done, 7, 4, false, nil, 22)
			if err != nil || tr.code != kerr.ProducerFenced.Code || tr.write {
				t.Fatalf("the fenced producer's abort at epoch 4: %+v, %v, want PRODUCER_FENCED", tr, err)
			}
			old := done
			old.LastProducerEpoch = lastEpochUnknown
			if tr, err := endTxnV2(&old, 7, 4, false, nil, 22); err != nil || tr.code != 0 || tr.write {
				t.Fatalf("an abort at epoch 4 on a state loaded without its last epoch: %+v, %v, want the retry's answer", tr, err)
			}
		})
	}
}

// TestTimedOutProducerAbortsAndGoesOn: the transaction timeout's abort of a
// transaction-version-2 producer bumps its epoch once and keeps the epoch
// before (Kafka 4.4's endTransaction for a fence: prepareAbortOrCommit from
// the unbumped epoch), so the producer's own EndTxn v5 abort at its old epoch
// is taken as the retry of that abort: CONCURRENT_TRANSACTIONS while its
// markers are written, then answered with the new epoch, and the producer goes
// on instead of being fenced. Its KIP-360 InitProducerId at the old epoch is
// answered with the new one too. Also for a producer whose first transaction
// timed out (no EndTxn v5 yet).
func TestTimedOutProducerAbortsAndGoesOn(t *testing.T) {
	for _, tv2 := range []bool{true, false} {
		ongoing := Meta{ProducerID: 7, ProducerEpoch: 4, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, TV2: tv2, LastProducerEpoch: -1}
		prep := expire(ongoing, 2000)
		if tr, err := endTxnV2(&prep, 7, 4, false, nil, 2001); err != nil || tr.code != kerr.ConcurrentTransactions.Code || tr.write {
			t.Fatalf("TV2 %v: abort at the old epoch while the timeout's markers are written: %+v %v, want CONCURRENT_TRANSACTIONS", tv2, tr, err)
		}
		done := complete(prep, 2002)
		tr, err := endTxnV2(&done, 7, 4, false, nil, 2003)
		if err != nil || tr.code != 0 || tr.write {
			t.Fatalf("TV2 %v: abort at the old epoch after the timeout: %+v %v, want the retry's answer", tv2, tr, err)
		}
		if pid, epoch := done.Answered(); pid != 7 || epoch != 5 {
			t.Fatalf("TV2 %v: answered %d/%d, want 7/5", tv2, pid, epoch)
		}
		tr, err = initProducer(&done, nil, 1000, 7, 4, 2003)
		if err != nil || tr.code != 0 || tr.write {
			t.Fatalf("TV2 %v: KIP-360 InitProducerId at the old epoch after the timeout: %+v %v, want the retry's answer", tv2, tr, err)
		}
	}
}

// TestEndTxnV2RetryOtherWay: an EndTxn v5 at the epoch before an end's bump
// (a retry's epoch) that asks for the other outcome is INVALID_TXN_STATE, as
// Kafka 4.4's endTransaction answers a retry that does not match the state,
// not PRODUCER_FENCED: while the end's markers are written, once it is
// complete, and on a resumed state.
func TestEndTxnV2RetryOtherWay(t *testing.T) {
	ongoing := Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, LastProducerEpoch: -1}
	for _, commit := range []bool{true, false} {
		tr, err := endTxnV2(&ongoing, 7, 2, commit, nil, 10)
		if err != nil || !tr.write {
			t.Fatalf("end: %+v %v", tr, err)
		}
		prep := tr.next
		prep.Preadded = []TopicPartition{tp("a", 0)}
		for name, m := range map[string]Meta{"prepared": prep, "complete": complete(prep, 11), "resumed": resumed(prep, 11)} {
			got, err := endTxnV2(&m, 7, 2, !commit, nil, 12)
			if err != nil || got.code != kerr.InvalidTxnState.Code || got.write {
				t.Errorf("%s (commit %v): the other outcome at the retry's epoch: code %d write %v, want INVALID_TXN_STATE", name, commit, got.code, got.write)
			}
		}
	}
}

// TestStartTimestampAsKafka: the transaction's start time (DescribeTransactions'
// TransactionStartTimeMs, ListTransactions' duration filter) is kept through
// its Prepare and Complete states, as Kafka 4.4's prepareAbortOrCommit and
// prepareComplete keep txnStartTimestamp; an EndTxn v5 abort without a
// transaction starts one at its time; InitProducerId clears it (-1).
func TestStartTimestampAsKafka(t *testing.T) {
	newPID := func() (int64, error) { return 99, nil }
	ongoing := Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, LastProducerEpoch: -1}
	v5, err := endTxnV2(&ongoing, 7, 2, true, newPID, 10)
	if err != nil {
		t.Fatal(err)
	}
	emptyAbort, err := endTxnV2(&Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: CompleteCommit, StartMs: 1, LastProducerEpoch: -1}, 7, 2, false, newPID, 20)
	if err != nil {
		t.Fatal(err)
	}
	init, err := initProducer(&Meta{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 1000, State: CompleteCommit, StartMs: 5, LastProducerEpoch: -1}, newPID, 1000, -1, -1, 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		m    Meta
		want int64
	}{
		{"EndTxn v5", v5.next, 5},
		{"EndTxn v5, complete", complete(v5.next, 11), 5},
		{"EndTxn v4, complete", complete(endTxn(&ongoing, 7, 2, false, 10).next, 11), 5},
		{"timeout, complete", complete(expire(ongoing, 2000), 2001), 5},
		{"EndTxn v5 abort without a transaction", emptyAbort.next, 20},
		{"EndTxn v5 abort without a transaction, complete", complete(emptyAbort.next, 21), 20},
		{"InitProducerId", init.next, -1},
	} {
		if tt.m.StartMs != tt.want {
			t.Errorf("%s: start %d, want %d", tt.name, tt.m.StartMs, tt.want)
		}
	}
}

// TestKIP360InitOverOpenTransaction: a KIP-360 InitProducerId with the
// producer's own id and current epoch over its open transaction fences and
// aborts it (CONCURRENT_TRANSACTIONS), keeping the epoch before, as Kafka
// 4.4's transaction-version-2 abort of the fence does; the client's retry
// with the same id and epoch is then answered with the bumped epoch, instead
// of PRODUCER_FENCED. A new incarnation's fence (no producer id given) still
// clears it (TestInitProducerRetry).
func TestKIP360InitOverOpenTransaction(t *testing.T) {
	for _, tv2 := range []bool{true, false} {
		ongoing := Meta{ProducerID: 7, ProducerEpoch: 4, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tp("a", 0)}, StartMs: 5, TV2: tv2, LastProducerEpoch: -1}
		tr, err := initProducer(&ongoing, nil, 1000, 7, 4, 10)
		if err != nil || tr.code != kerr.ConcurrentTransactions.Code || !tr.write || tr.next.State != PrepareAbort || tr.next.ProducerEpoch != 5 {
			t.Fatalf("TV2 %v: KIP-360 InitProducerId over an open transaction: %+v %v", tv2, tr, err)
		}
		done := complete(tr.next, 11)
		tr, err = initProducer(&done, nil, 1000, 7, 4, 12)
		if err != nil || tr.code != 0 || tr.write {
			t.Fatalf("TV2 %v: its retry once aborted: %+v %v, want the current producer id and epoch", tv2, tr, err)
		}
		if done.ProducerID != 7 || done.ProducerEpoch != 5 {
			t.Fatalf("TV2 %v: answered %d/%d, want 7/5", tv2, done.ProducerID, done.ProducerEpoch)
		}
	}
}
