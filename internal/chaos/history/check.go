package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The anomaly classes Check reports.
const (
	// LostWrite: an acknowledged send absent from the final log, although the log
	// (or some reader) reached past its offset.
	LostWrite = "lost-write"
	// Unseen: an acknowledged send absent from the final log, which ends at or
	// before its offset. After a full drain it is as bad as LostWrite.
	Unseen = "unseen"
	// InconsistentOffsets: two different values observed at one partition and
	// offset (by acknowledgements, polls or the final log).
	InconsistentOffsets = "inconsistent-offsets"
	// Duplicate: one value observed at two positions. With idempotence, never.
	Duplicate = "duplicate"
	// PollSkip: a reader's successive records of a partition jumped over offsets
	// that hold records in the final log.
	PollSkip = "poll-skip"
	// NonmonotonicPoll: a reader's successive records of a partition went back or
	// repeated an offset.
	NonmonotonicPoll = "nonmonotonic-poll"
	// NonmonotonicSend: one producer's successive acknowledged sends of a key got
	// non-increasing offsets or different partitions.
	NonmonotonicSend = "nonmonotonic-send"
	// FailedWriteRead: a value whose send definitely failed was read.
	FailedWriteRead = "failed-write-read"
	// Phantom: a reader saw a value that the final log does not hold.
	Phantom = "phantom"
	// KeyOrder: the final log holds one producer's acknowledged values of a key
	// in another order than they were sent.
	KeyOrder = "key-order"
	// Unprocessed: a final record below the group's drained end that no member
	// of the committing group ever processed (at-least-once broken).
	Unprocessed = "unprocessed"
)

// Classes lists every class Check reports, in report order.
var Classes = []string{
	LostWrite, Unseen, InconsistentOffsets, Duplicate, PollSkip, NonmonotonicPoll,
	NonmonotonicSend, FailedWriteRead, Phantom, KeyOrder, Unprocessed,
}

// examplesPerClass bounds the details kept per class; counts are complete.
const examplesPerClass = 5

// Anomaly is one finding.
type Anomaly struct {
	Class  string
	Detail string
}

// Result is what Check found.
type Result struct {
	Acked, Unknown, Failed int // sends by outcome
	Polled                 int // records returned by polls (group included)
	FinalRecords           int
	// GroupProcessed counts records processed by the group, repeats included;
	// GroupDuplicates the repeats (at-least-once allows them).
	GroupProcessed, GroupDuplicates int
	// Counts holds the number of anomalies per class; Examples the first few of each.
	Counts   map[string]int
	Examples []Anomaly
}

// OK reports whether no anomaly was found.
func (r *Result) OK() bool {
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return true
}

// Add records an anomaly; the harness adds its own (replica agreement) this way.
func (r *Result) Add(class, format string, args ...any) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	r.Counts[class]++
	if r.Counts[class] <= examplesPerClass {
		r.Examples = append(r.Examples, Anomaly{class, fmt.Sprintf(format, args...)})
	}
}

// Summary is one line per class with anomalies, or "no anomalies".
func (r *Result) Summary() string {
	if r.OK() {
		return "no anomalies"
	}
	var b strings.Builder
	for _, class := range slices.Sorted(maps.Keys(r.Counts)) {
		if r.Counts[class] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s: %d\n", class, r.Counts[class])
		for _, a := range r.Examples {
			if a.Class == class {
				fmt.Fprintf(&b, "  %s\n", a.Detail)
			}
		}
	}
	return b.String()
}

type pos struct {
	p int32
	o int64
}

func (p pos) String() string { return fmt.Sprintf("%d/%d", p.p, p.o) }

// observer remembers the first value seen at each position and the first
// position of each value, flagging InconsistentOffsets and Duplicate.
type observer struct {
	res        *Result
	atPos      map[pos]string
	posOf      map[string]pos
	flaggedPos map[pos]bool    // reported as inconsistent
	flaggedVal map[string]bool // reported as duplicate
}

func (ob *observer) see(at pos, value, who string) {
	if v, ok := ob.atPos[at]; !ok {
		ob.atPos[at] = value
	} else if v != value && !ob.flaggedPos[at] {
		ob.flaggedPos[at] = true
		ob.res.Add(InconsistentOffsets, "%s holds %q and %q (the latter seen by %s)", at, v, value, who)
	}
	if p, ok := ob.posOf[value]; !ok {
		ob.posOf[value] = at
	} else if p != at && !ob.flaggedVal[value] {
		ob.flaggedVal[value] = true
		ob.res.Add(Duplicate, "%q at %s and at %s (the latter seen by %s)", value, p, at, who)
	}
}

// Check judges a history; see the class constants for what is flagged.
func Check(h History) Result {
	res := Result{Counts: map[string]int{}}
	for _, c := range Classes {
		res.Counts[c] = 0
	}
	ob := &observer{res: &res, atPos: map[pos]string{}, posOf: map[string]pos{}, flaggedPos: map[pos]bool{}, flaggedVal: map[string]bool{}}

	// The final log: what survived, and how far each partition reaches.
	final, finalPos, finalEnd := indexFinal(&res, ob, h.Final)
	// readEnd is one past the highest offset any reader reached, per partition.
	readEnd := maps.Clone(finalEnd)
	for _, pl := range h.Polls {
		for _, r := range pl.Records {
			readEnd[pl.Partition] = max(readEnd[pl.Partition], r.Offset+1)
		}
	}

	// Sends.
	sendOf := make(map[string]*Send, len(h.Sends))
	type producerKey struct {
		producer int
		key      string
	}
	byKey := map[producerKey][]*Send{}
	for i := range h.Sends {
		s := &h.Sends[i]
		sendOf[s.Value] = s
		switch s.Outcome {
		case OK:
			res.Acked++
			ob.see(pos{s.Partition, s.Offset}, s.Value, fmt.Sprintf("producer %d's acknowledgement", s.Producer))
			byKey[producerKey{s.Producer, s.Key}] = append(byKey[producerKey{s.Producer, s.Key}], s)
		case Failed:
			res.Failed++
		default:
			res.Unknown++
		}
	}
	for _, s := range h.Sends {
		if s.Outcome != OK {
			continue
		}
		at := pos{s.Partition, s.Offset}
		if _, ok := finalPos[s.Value]; ok {
			continue // there; at another position it is flagged as inconsistent or duplicate
		}
		if readEnd[s.Partition] > s.Offset {
			res.Add(LostWrite, "producer %d's %q (key %q) acknowledged at %s is missing; the log reaches %d", s.Producer, s.Value, s.Key, at, readEnd[s.Partition])
		} else {
			res.Add(Unseen, "producer %d's %q (key %q) acknowledged at %s is missing; the final log ends at %d", s.Producer, s.Value, s.Key, at, finalEnd[s.Partition])
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b producerKey) int {
		if a.producer != b.producer {
			return cmp.Compare(a.producer, b.producer)
		}
		return strings.Compare(a.key, b.key)
	}) {
		sends := byKey[k]
		slices.SortFunc(sends, func(a, b *Send) int { return cmp.Compare(a.Seq, b.Seq) })
		for i := 1; i < len(sends); i++ {
			prev, cur := sends[i-1], sends[i]
			if cur.Partition != prev.Partition || cur.Offset <= prev.Offset {
				res.Add(NonmonotonicSend, "producer %d key %q: send %d acknowledged at %d/%d after send %d at %d/%d",
					k.producer, k.key, cur.Seq, cur.Partition, cur.Offset, prev.Seq, prev.Partition, prev.Offset)
			}
		}
		// The same values in final-log order must keep their send order.
		var inLog []*Send
		for _, s := range sends {
			if _, ok := finalPos[s.Value]; ok {
				inLog = append(inLog, s)
			}
		}
		slices.SortStableFunc(inLog, func(a, b *Send) int {
			pa, pb := finalPos[a.Value], finalPos[b.Value]
			if c := cmp.Compare(pa.p, pb.p); c != 0 {
				return c
			}
			return cmp.Compare(pa.o, pb.o)
		})
		for i := 1; i < len(inLog); i++ {
			if inLog[i].Seq < inLog[i-1].Seq {
				res.Add(KeyOrder, "producer %d key %q: send %d is at %s, after send %d at %s",
					k.producer, k.key, inLog[i].Seq, finalPos[inLog[i].Value], inLog[i-1].Seq, finalPos[inLog[i-1].Value])
			}
		}
	}

	// Polls.
	last := map[readerPart]int64{}
	processed := map[string]int{}
	failedSeen := map[string]bool{}
	phantoms := map[string]bool{}
	for _, pl := range h.Polls {
		for _, r := range pl.Records {
			at := pos{pl.Partition, r.Offset}
			res.Polled++
			ob.see(at, r.Value, pl.Reader)
			if _, ok := finalPos[r.Value]; !ok && !phantoms[r.Value] {
				phantoms[r.Value] = true
				what := "the final log does not hold it"
				if sendOf[r.Value] == nil {
					what = "and nobody sent it"
				}
				res.Add(Phantom, "%s read %q at %s; %s", pl.Reader, r.Value, at, what)
			}
			if s := sendOf[r.Value]; s != nil && s.Outcome == Failed && !failedSeen[r.Value] {
				failedSeen[r.Value] = true
				res.Add(FailedWriteRead, "%s read %q at %s, whose send failed (%s)", pl.Reader, r.Value, at, s.Err)
			}
			if pl.Group {
				processed[r.Value]++
				res.GroupProcessed++
				continue
			}
			checkOrder(&res, last, final, pl, r.Offset)
		}
	}
	for _, n := range processed {
		res.GroupDuplicates += n - 1
	}
	if h.GroupEnd != nil {
		for _, p := range slices.Sorted(maps.Keys(h.Final)) {
			for _, r := range h.Final[p] {
				if r.Offset < h.GroupEnd[p] && processed[r.Value] == 0 {
					res.Add(Unprocessed, "%q at %d/%d, below the group's end %d, was never processed", r.Value, p, r.Offset, h.GroupEnd[p])
				}
			}
		}
	}
	return res
}

// readerPart is one reader's view of one partition.
type readerPart struct {
	reader string
	p      int32
}

// checkOrder checks that a reader's record at offset, in poll pl, follows the
// one it read before in that partition (last): a regression is
// NonmonotonicPoll, a jump over a record final holds PollSkip.
func checkOrder(res *Result, last map[readerPart]int64, final map[pos]string, pl Poll, offset int64) {
	rp := readerPart{pl.Reader, pl.Partition}
	prev, ok := last[rp]
	last[rp] = offset
	if !ok {
		return
	}
	switch {
	case offset <= prev:
		res.Add(NonmonotonicPoll, "%s read %d/%d after %d/%d", pl.Reader, pl.Partition, offset, pl.Partition, prev)
	case offset > prev+1:
		for o := prev + 1; o < offset; o++ {
			if v, ok := final[pos{pl.Partition, o}]; ok {
				res.Add(PollSkip, "%s read %d/%d after %d/%d, skipping %q at %d", pl.Reader, pl.Partition, offset, pl.Partition, prev, v, o)
				break
			}
		}
	}
}

// indexFinal feeds the final log to ob and returns the value at each position,
// each value's first position and one past each partition's highest offset.
func indexFinal(res *Result, ob *observer, log map[int32][]Record) (final map[pos]string, finalPos map[string]pos, finalEnd map[int32]int64) {
	final, finalPos, finalEnd = map[pos]string{}, map[string]pos{}, map[int32]int64{}
	for _, p := range slices.Sorted(maps.Keys(log)) {
		for _, r := range log[p] {
			at := pos{p, r.Offset}
			ob.see(at, r.Value, "the final read")
			final[at] = r.Value
			if _, ok := finalPos[r.Value]; !ok {
				finalPos[r.Value] = at
			}
			finalEnd[p] = max(finalEnd[p], r.Offset+1)
			res.FinalRecords++
		}
	}
	return final, finalPos, finalEnd
}
