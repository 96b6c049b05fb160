package replica

import (
	"errors"
	"math"
	"testing"
)

func TestProducerStateCheck(t *testing.T) {
	type batch struct {
		epoch    int16
		firstSeq int32
		n        int32
	}
	tests := []struct {
		name    string
		history []batch // appended in order at offsets 0, n, ...
		next    batch
		wantErr error
		wantDup bool
		wantOff int64
	}{
		{name: "unknown producer any seq", next: batch{0, 17, 3}},
		{name: "in sequence", history: []batch{{0, 0, 3}}, next: batch{0, 3, 2}},
		{name: "gap", history: []batch{{0, 0, 3}}, next: batch{0, 4, 1}, wantErr: ErrOutOfOrderSequence},
		{name: "behind but not duplicate", history: []batch{{0, 0, 3}, {0, 3, 3}}, next: batch{0, 1, 1}, wantErr: ErrOutOfOrderSequence},
		{name: "duplicate of last", history: []batch{{0, 0, 3}, {0, 3, 3}}, next: batch{0, 3, 3}, wantDup: true, wantOff: 3},
		{name: "duplicate of older", history: []batch{{0, 0, 3}, {0, 3, 3}, {0, 6, 1}}, next: batch{0, 0, 3}, wantDup: true, wantOff: 0},
		{name: "old epoch fenced", history: []batch{{2, 0, 1}}, next: batch{1, 1, 1}, wantErr: ErrInvalidProducerEpoch},
		{name: "new epoch starts at zero", history: []batch{{1, 0, 5}}, next: batch{2, 0, 1}},
		{name: "new epoch nonzero seq", history: []batch{{1, 0, 5}}, next: batch{2, 5, 1}, wantErr: ErrOutOfOrderSequence},
		{name: "wraps at MaxInt32", history: []batch{{0, math.MaxInt32 - 1, 2}}, next: batch{0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newProducerState()
			var off int64
			for _, b := range tt.history {
				s.record(7, b.epoch, b.firstSeq, b.n, off, off+int64(b.n)-1, -1)
				off += int64(b.n)
			}
			got, err := s.check(7, tt.next.epoch, tt.next.firstSeq, tt.next.n, false)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got.duplicate != tt.wantDup || (tt.wantDup && got.original.firstOffset != tt.wantOff) {
				t.Fatalf("check = %+v, want duplicate=%v offset=%d", got, tt.wantDup, tt.wantOff)
			}
		})
	}
}

func TestProducerStateKeepsFiveBatches(t *testing.T) {
	s := newProducerState()
	for i := int32(0); i < 7; i++ {
		s.record(1, 0, i, 1, int64(i), int64(i), -1)
	}
	if r, _ := s.check(1, 0, 1, 1, false); r.duplicate {
		t.Fatal("batch 1 should have been forgotten (only the last 5 are kept)")
	}
	if r, _ := s.check(1, 0, 2, 1, false); !r.duplicate || r.original.firstOffset != 2 {
		t.Fatalf("batch 2 should still be a duplicate at offset 2, got %+v", r)
	}
}

// TestProducerStateMarkerFences: a marker at a newer epoch (KIP-890's bump at
// every end of a transaction) moves the producer to it: a late batch of the
// ended transaction is refused, and the next transaction starts at sequence 0
// of the new epoch; an older marker changes nothing.
func TestProducerStateMarkerFences(t *testing.T) {
	s := newProducerState()
	s.record(7, 3, 0, 5, 0, 4, -1)
	s.fence(7, 4, 0, -1)
	if _, err := s.check(7, 3, 5, 1, false); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("late batch of the ended transaction: %v", err)
	}
	if _, err := s.check(7, 4, 0, 1, false); err != nil {
		t.Fatalf("first batch of the next transaction: %v", err)
	}
	s.record(7, 4, 0, 1, 6, 6, -1)
	s.fence(7, 2, 0, -1)
	if _, err := s.check(7, 4, 1, 1, false); err != nil {
		t.Fatalf("an older marker fenced the producer: %v", err)
	}
	s.fence(9, 1, 0, -1) // a producer known only from its marker
	if _, err := s.check(9, 0, 0, 1, false); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("batch older than the marker of an unseen producer: %v", err)
	}
}

// TestIdleStateMakesNoMaps: a partition's producer and transaction state make
// their maps on first use. A broker hosting 10,000 idle partitions held two
// empty maps each for them (about 100 bytes per partition).
func TestIdleStateMakesNoMaps(t *testing.T) {
	var producers *producerState
	var txns *txnState
	allocs := testing.AllocsPerRun(100, func() {
		producers, txns = newProducerState(), newTxnState()
	})
	if allocs != 2 {
		t.Fatalf("an idle partition's producer and transaction state: %.0f allocations, want 2 (the two structs)", allocs)
	}
	// The first write makes them.
	producers.record(7, 0, 0, 1, 0, 0, -1)
	put(&txns.open, 7, 0)
	if _, ok := producers.entries[7]; !ok {
		t.Fatal("producer 7 not recorded after its first batch")
	}
	if first, ok := txns.open[7]; !ok || first != 0 {
		t.Fatalf("producer 7's open transaction: %d, %v", first, ok)
	}
}
