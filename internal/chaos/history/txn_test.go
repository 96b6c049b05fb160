package history

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// cleanTxn builds the history of a correct transactional run: two producers,
// eleven transactions each of three writes over the three partitions; every
// fourth transaction aborted, transactions 5 committed with an unknown outcome
// (in the log) and 9 aborted with an unknown outcome (not in it); each
// partition gets a control marker after each transaction touching it. A reader
// polls every partition in chunks of four; the copy stage committed partition
// p's input up to its (p+2)th record and copied exactly those.
func cleanTxn() TxnHistory {
	h := TxnHistory{Final: map[int32][]Record{}, StableEnd: map[int32]int64{}, End: map[int32]int64{},
		Output: map[int32][]Record{}, CopyCommitted: map[int32]int64{}}
	next := map[int32]int64{}
	for seq := range int64(11) {
		for prod := range 2 {
			t := Txn{Producer: prod, Seq: seq, Outcome: TxnCommitted}
			visible := true
			switch {
			case seq%4 == 3:
				t.Outcome, t.Err, visible = TxnAborted, "aborted", false
			case seq == 5:
				t.Outcome, t.Err = TxnUnknown, "timed out"
			case seq == 9:
				t.Outcome, t.Err, visible = TxnUnknown, "timed out", false
			}
			for i := range int32(parts) {
				p := (i + int32(prod)) % parts
				w := TxnWrite{Partition: p, Value: fmt.Sprintf("t%d-%02d-%d", prod, seq, i), Acked: true, Offset: next[p]}
				next[p]++
				t.Writes = append(t.Writes, w)
				if visible {
					h.Final[p] = append(h.Final[p], Record{Offset: w.Offset, Value: w.Value})
				}
			}
			for p := range int32(parts) {
				next[p]++ // the commit or abort marker
			}
			h.Txns = append(h.Txns, t)
		}
	}
	for p := range int32(parts) {
		h.StableEnd[p], h.End[p] = next[p], next[p]
		recs := h.Final[p]
		for i := 0; i < len(recs); i += 4 {
			h.Polls = append(h.Polls, Poll{Reader: "r1", Partition: p, Records: slices.Clone(recs[i:min(i+4, len(recs))])})
		}
		n := int(p) + 2
		h.CopyCommitted[p] = recs[n].Offset
		for _, r := range recs[:n] {
			h.Output[0] = append(h.Output[0], Record{Offset: int64(len(h.Output[0])), Value: r.Value})
		}
	}
	return h
}

func TestCleanTxnHistoryHasNoAnomaly(t *testing.T) {
	r := CheckTxn(cleanTxn())
	if !r.OK() {
		t.Fatalf("clean history flagged:\n%s", r.Summary())
	}
	// 22 transactions of 3 writes: 4 of them with an unknown outcome.
	if r.Acked+r.Failed+r.Unknown != 66 || r.Unknown != 12 {
		t.Fatalf("outcomes: %d committed, %d unknown, %d aborted writes; want 66 in all, 12 unknown", r.Acked, r.Unknown, r.Failed)
	}
	for _, c := range TxnClasses {
		if _, ok := r.Counts[c]; !ok {
			t.Errorf("class %s has no count", c)
		}
	}
}

// txnOf returns the transaction seq of prod in h.
func txnOf(h *TxnHistory, prod int, seq int64) *Txn {
	for i := range h.Txns {
		if h.Txns[i].Producer == prod && h.Txns[i].Seq == seq {
			return &h.Txns[i]
		}
	}
	panic("no such transaction")
}

// dropFinal removes value from the final log.
func dropFinal(h *TxnHistory, value string) {
	for p, recs := range h.Final {
		h.Final[p] = slices.DeleteFunc(recs, func(r Record) bool { return r.Value == value })
	}
}

// dropPolled removes value from every poll.
func dropPolled(h *TxnHistory, value string) {
	for i := range h.Polls {
		h.Polls[i].Records = slices.DeleteFunc(h.Polls[i].Records, func(r Record) bool { return r.Value == value })
	}
}

func TestCheckTxnFindsEachAnomaly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(h *TxnHistory)
		want  []string // exactly these classes flagged
	}{
		{"a reader returns an aborted write", func(h *TxnHistory) {
			w := txnOf(h, 0, 3).Writes[0]
			h.Polls = append(h.Polls, Poll{Reader: "r2", Partition: w.Partition, Records: []Record{{Offset: w.Offset, Value: w.Value}}})
		}, []string{AbortedRead}},
		{"the final log holds an aborted transaction", func(h *TxnHistory) {
			for _, w := range txnOf(h, 1, 7).Writes {
				h.Final[w.Partition] = append(h.Final[w.Partition], Record{Offset: w.Offset, Value: w.Value})
				slices.SortFunc(h.Final[w.Partition], func(a, b Record) int { return int(a.Offset - b.Offset) })
			}
		}, []string{AbortedRead, PollSkip}},
		{"a committed write is lost, readers never saw it", func(h *TxnHistory) {
			v := txnOf(h, 0, 4).Writes[1].Value
			dropFinal(h, v)
			dropPolled(h, v)
		}, []string{LostWrite}},
		{"half of an unknown transaction is visible", func(h *TxnHistory) {
			v := txnOf(h, 1, 5).Writes[2].Value
			dropFinal(h, v)
			dropPolled(h, v)
		}, []string{TornTxn}},
		{"a reader sees part of a committed transaction and reads past the rest", func(h *TxnHistory) {
			dropPolled(h, txnOf(h, 0, 6).Writes[1].Value)
		}, []string{PollSkip, TornTxn}},
		{"a value at two offsets", func(h *TxnHistory) {
			r := h.Final[1][len(h.Final[1])-1] // past the copy stage's offset
			r.Offset = h.End[1]
			h.Final[1] = append(h.Final[1], r)
			h.End[1]++
			h.StableEnd[1]++
		}, []string{Duplicate}},
		{"an acknowledgement at another offset than the log's", func(h *TxnHistory) {
			txnOf(h, 0, 0).Writes[0].Offset = 2 // where producer 1's first write to partition 0 is
		}, []string{InconsistentOffsets, Duplicate}},
		{"a hanging transaction", func(h *TxnHistory) {
			h.StableEnd[2] -= 4
		}, []string{StuckLSO}},
		{"a reader goes back", func(h *TxnHistory) {
			h.Polls = append(h.Polls, Poll{Reader: "r1", Partition: 0, Records: slices.Clone(h.Final[0][:1])})
		}, []string{NonmonotonicPoll}},
		{"a reader returns what nobody wrote", func(h *TxnHistory) {
			h.Polls = append(h.Polls, Poll{Reader: "r2", Partition: 0, Records: []Record{{Offset: 1, Value: "ghost"}}})
		}, []string{Phantom}},
		{"an input below the committed offset is not in the output", func(h *TxnHistory) {
			h.Output[0] = h.Output[0][1:]
		}, []string{TxnOffsetMismatch}},
		{"an input past the committed offset is in the output", func(h *TxnHistory) {
			h.CopyCommitted[2] = h.Final[2][1].Offset
		}, []string{TxnOffsetMismatch}},
		{"an input copied twice", func(h *TxnHistory) {
			r := h.Output[0][0]
			r.Offset = int64(len(h.Output[0]))
			h.Output[0] = append(h.Output[0], r)
		}, []string{Duplicate}},
		{"the output holds an aborted write", func(h *TxnHistory) {
			w := txnOf(h, 1, 3).Writes[0]
			h.Output[0] = append(h.Output[0], Record{Offset: int64(len(h.Output[0])), Value: w.Value})
		}, []string{AbortedRead}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanTxn()
			tc.plant(&h)
			r := CheckTxn(h)
			if got := flagged(r); !slices.Equal(got, slices.Sorted(slices.Values(tc.want))) {
				t.Fatalf("flagged %v, want %v:\n%s", got, tc.want, r.Summary())
			}
		})
	}
}

// TestCheckTxnWithoutCopyStage: no copy stage, no offset checks.
func TestCheckTxnWithoutCopyStage(t *testing.T) {
	h := cleanTxn()
	h.CopyCommitted, h.Output = nil, map[int32][]Record{0: {{Offset: 0, Value: "t0-00-0"}}}
	if r := CheckTxn(h); !r.OK() {
		t.Fatalf("flagged without a copy stage:\n%s", r.Summary())
	}
	if got := maps.Clone(CheckTxn(cleanTxn()).Counts); len(got) != len(TxnClasses) {
		t.Fatalf("counts %v, want one per class", got)
	}
}
