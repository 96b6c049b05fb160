package txn

import (
	"errors"
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
		{"add with a newer epoch", addPartitions(&ongoing, 7, 3, nil, 10), kerr.InvalidProducerEpoch, false, 0},
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
				tr = endTxn(cur, pid, epoch, rapid.Bool().Draw(t, "commit"), now)
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
				back.State != next.State || !slices.Equal(back.Partitions, next.Partitions) || back.StartMs != next.StartMs {
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
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _, _ = decodeRecord(group.Record{Key: key, Value: value})
	})
}
