package history

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The anomaly classes CheckTxn reports beyond Check's (it also reports
// LostWrite, Duplicate, InconsistentOffsets, PollSkip, NonmonotonicPoll and
// Phantom, with the meanings they have there, over committed data).
const (
	// AbortedRead: a read_committed reader, or the final read_committed read,
	// returned a value of an aborted transaction.
	AbortedRead = "aborted-read"
	// TornTxn: part of a transaction is visible and part is not: the final log
	// holds some of its values and lacks others, or a reader saw one of its
	// values and read past another's offset without seeing it.
	TornTxn = "torn-transaction"
	// StuckLSO: after every fault healed and every producer stopped, a
	// partition's last stable offset stayed below its high-water mark (a
	// hanging transaction).
	StuckLSO = "stuck-lso"
	// TxnOffsetMismatch: the read-process-write stage's committed input offsets
	// and its committed output disagree: an input record below the committed
	// offset missing from the output, or one at or past it present there.
	TxnOffsetMismatch = "txn-offset-mismatch"
)

// TxnClasses lists every class CheckTxn reports, in report order.
var TxnClasses = []string{
	LostWrite, AbortedRead, TornTxn, Duplicate, InconsistentOffsets, PollSkip, NonmonotonicPoll,
	Phantom, StuckLSO, TxnOffsetMismatch,
}

// TxnOutcome is what a transactional producer learned about one transaction.
type TxnOutcome uint8

const (
	// TxnUnknown: EndTxn failed or was never answered; the transaction may have
	// committed or aborted, but must have done one of them whole.
	TxnUnknown TxnOutcome = iota
	// TxnCommitted: EndTxn(commit) succeeded.
	TxnCommitted
	// TxnAborted: EndTxn(abort) succeeded, or the transaction was aborted before
	// its end (a failed write aborts it).
	TxnAborted
)

func (o TxnOutcome) String() string {
	switch o {
	case TxnUnknown:
		return "unknown"
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	}
	return fmt.Sprintf("TxnOutcome(%d)", uint8(o))
}

// TxnWrite is one record a transaction wrote.
type TxnWrite struct {
	Partition int32
	Value     string // unique within the run
	Acked     bool   // its produce was acknowledged, at Offset
	Offset    int64
}

// Txn is one transaction of one transactional producer.
type Txn struct {
	Producer int   // which transactional id
	Seq      int64 // the producer's transaction order, from 0
	Writes   []TxnWrite
	Outcome  TxnOutcome
	At       time.Time // when the outcome arrived
	Err      string    // why, when not committed
}

// TxnHistory is one transactional run's complete record: transactions over
// several partitions of an input topic, read_committed readers of it, and a
// read-process-write stage copying it to an output topic with the input offsets
// committed in the same transactions.
type TxnHistory struct {
	Txns []Txn
	// Polls are the read_committed readers' polls of the input topic.
	Polls []Poll
	// Final is every record of the input topic read with read_committed from
	// offset 0 after healing, per partition in offset order.
	Final map[int32][]Record
	// StableEnd and End are each input partition's last stable offset and
	// high-water mark once the run waited for them to meet.
	StableEnd, End map[int32]int64
	// Output is the output topic read with read_committed after the copy stage
	// was drained; CopyCommitted the input offsets its group committed. Nil
	// CopyCommitted: no copy stage.
	Output        map[int32][]Record
	CopyCommitted map[int32]int64
}

// CheckTxn judges a transactional history; see TxnClasses.
func CheckTxn(h TxnHistory) Result {
	res := Result{Counts: map[string]int{}}
	for _, c := range TxnClasses {
		res.Counts[c] = 0
	}
	ob := &observer{res: &res, atPos: map[pos]string{}, posOf: map[string]pos{}, flaggedPos: map[pos]bool{}, flaggedVal: map[string]bool{}}

	type written struct {
		txn *Txn
		w   TxnWrite
	}
	writeOf := map[string]written{}
	for i := range h.Txns {
		t := &h.Txns[i]
		switch t.Outcome {
		case TxnCommitted:
			res.Acked += len(t.Writes)
		case TxnAborted:
			res.Failed += len(t.Writes)
		default:
			res.Unknown += len(t.Writes)
		}
		for _, w := range t.Writes {
			writeOf[w.Value] = written{t, w}
		}
	}
	txnName := func(t *Txn) string {
		return fmt.Sprintf("producer %d's transaction %d (%s)", t.Producer, t.Seq, t.Outcome)
	}

	// The final read_committed log.
	final, finalPos, _ := indexFinal(&res, ob, h.Final)
	aborted := map[string]bool{} // values already reported as aborted reads
	seenRead := func(value string, at pos, who string) {
		wr, ok := writeOf[value]
		if !ok {
			if !aborted[value] {
				aborted[value] = true
				res.Add(Phantom, "%s read %q at %s, which nobody sent", who, value, at)
			}
			return
		}
		if wr.txn.Outcome == TxnAborted && !aborted[value] {
			aborted[value] = true
			res.Add(AbortedRead, "%s read %q at %s, written by %s", who, value, at, txnName(wr.txn))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(h.Final)) {
		for _, r := range h.Final[p] {
			seenRead(r.Value, pos{p, r.Offset}, "the final read")
		}
	}

	// Transactions: committed ones whole, unknown ones whole or not at all.
	for i := range h.Txns {
		t := &h.Txns[i]
		var in, out []TxnWrite
		for _, w := range t.Writes {
			if w.Acked {
				ob.see(pos{w.Partition, w.Offset}, w.Value, fmt.Sprintf("producer %d's acknowledgement", t.Producer))
			}
			if _, ok := finalPos[w.Value]; ok {
				in = append(in, w)
			} else {
				out = append(out, w)
			}
		}
		switch {
		case t.Outcome == TxnCommitted:
			for _, w := range out {
				res.Add(LostWrite, "%q of %s (partition %d) is missing from the final log", w.Value, txnName(t), w.Partition)
			}
		case t.Outcome == TxnUnknown && len(in) > 0 && len(out) > 0:
			res.Add(TornTxn, "%s: %d of its %d values in the final log (%q there, %q not)", txnName(t), len(in), len(t.Writes), in[0].Value, out[0].Value)
		}
	}

	// Readers: only committed data, in order, nothing skipped, no transaction
	// seen in part.
	last := map[readerPart]int64{}
	readerSaw := map[string]map[*Txn]bool{}
	for _, pl := range h.Polls {
		for _, r := range pl.Records {
			at := pos{pl.Partition, r.Offset}
			res.Polled++
			ob.see(at, r.Value, pl.Reader)
			seenRead(r.Value, at, pl.Reader)
			if wr, ok := writeOf[r.Value]; ok {
				if readerSaw[pl.Reader] == nil {
					readerSaw[pl.Reader] = map[*Txn]bool{}
				}
				readerSaw[pl.Reader][wr.txn] = true
			}
			if _, ok := finalPos[r.Value]; !ok && writeOf[r.Value].txn != nil && writeOf[r.Value].txn.Outcome != TxnAborted {
				res.Add(Phantom, "%s read %q at %s; the final log does not hold it", pl.Reader, r.Value, at)
			}
			checkOrder(&res, last, final, pl, r.Offset)
		}
	}
	// A reader that saw part of a committed transaction and read past where
	// the rest is saw it torn (its first poll of a partition may start anywhere:
	// readers begin at the log start, so it does not).
	first := map[readerPart]int64{}
	for _, pl := range h.Polls {
		for _, r := range pl.Records {
			rp := readerPart{pl.Reader, pl.Partition}
			if _, ok := first[rp]; !ok {
				first[rp] = r.Offset
			}
		}
	}
	for _, reader := range slices.Sorted(maps.Keys(readerSaw)) {
		seen := map[string]bool{}
		for _, pl := range h.Polls {
			if pl.Reader == reader {
				for _, r := range pl.Records {
					seen[r.Value] = true
				}
			}
		}
		txns := slices.SortedFunc(maps.Keys(readerSaw[reader]), func(a, b *Txn) int {
			if a.Producer != b.Producer {
				return a.Producer - b.Producer
			}
			return int(a.Seq - b.Seq)
		})
		for _, t := range txns {
			for _, w := range t.Writes {
				at, ok := finalPos[w.Value]
				if !ok || seen[w.Value] {
					continue
				}
				rp := readerPart{reader, at.p}
				if l, ok := last[rp]; ok && l > at.o && first[rp] <= at.o {
					res.Add(TornTxn, "%s saw part of %s but read past %q at %s without it", reader, txnName(t), w.Value, at)
					break
				}
			}
		}
	}

	// Hanging transactions.
	for _, p := range slices.Sorted(maps.Keys(h.End)) {
		if lso, hwm := h.StableEnd[p], h.End[p]; lso < hwm {
			res.Add(StuckLSO, "partition %d: last stable offset %d below the high-water mark %d after healing", p, lso, hwm)
		}
	}

	// The copy stage: output == committed input below the committed offsets,
	// each exactly once.
	if h.CopyCommitted != nil {
		copied := map[string]int{}
		oob := &observer{res: &res, atPos: map[pos]string{}, posOf: map[string]pos{}, flaggedPos: map[pos]bool{}, flaggedVal: map[string]bool{}}
		for _, p := range slices.Sorted(maps.Keys(h.Output)) {
			for _, r := range h.Output[p] {
				oob.see(pos{p, r.Offset}, r.Value, "the output's final read")
				copied[r.Value]++
				if _, ok := finalPos[r.Value]; !ok {
					seenRead(r.Value, pos{p, r.Offset}, "the output's final read")
					if wr, ok := writeOf[r.Value]; ok && wr.txn.Outcome != TxnAborted {
						res.Add(TxnOffsetMismatch, "the output holds %q, which the input's final log does not", r.Value)
					}
				}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(h.Final)) {
			end, ok := h.CopyCommitted[p]
			if !ok {
				end = 0
			}
			for _, r := range h.Final[p] {
				n := copied[r.Value]
				switch {
				case r.Offset < end && n == 0:
					res.Add(TxnOffsetMismatch, "input %q at %d/%d is below the committed offset %d but not in the output", r.Value, p, r.Offset, end)
				case r.Offset >= end && n > 0:
					res.Add(TxnOffsetMismatch, "input %q at %d/%d is at or past the committed offset %d but in the output", r.Value, p, r.Offset, end)
				}
			}
		}
	}
	return res
}
