package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

const parts = 3

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clean builds the history of a correct run: two producers, six keys (key kN on
// partition N%3), every tenth send timed out but written and every tenth timed out
// and not written; a reader polling every partition in chunks of seven; a group
// of two members that processed every record, member g2 five of them twice.
func clean() History {
	h := History{Final: map[int32][]Record{}}
	next := map[int32]int64{}
	seq := map[int]int64{}
	for i := range 120 {
		prod := i % 2
		key := fmt.Sprintf("k%d", i%6)
		p := int32(i % 6 % parts)
		s := Send{Producer: prod, Seq: seq[prod], Key: key, Value: fmt.Sprintf("p%d-%03d", prod, seq[prod]), At: base.Add(time.Duration(i) * time.Millisecond)}
		seq[prod]++
		switch i % 10 {
		case 9:
			s.Outcome, s.Err = Unknown, "timed out"
			h.Sends = append(h.Sends, s)
			continue
		case 7:
			s.Outcome, s.Err = Unknown, "timed out"
		default:
			s.Outcome, s.Partition, s.Offset = OK, p, next[p]
		}
		h.Final[p] = append(h.Final[p], Record{Offset: next[p], Key: key, Value: s.Value})
		next[p]++
		h.Sends = append(h.Sends, s)
	}
	for p := range int32(parts) {
		recs := h.Final[p]
		for i := 0; i < len(recs); i += 7 {
			h.Polls = append(h.Polls, Poll{Reader: "r1", Partition: p, Records: slices.Clone(recs[i:min(i+7, len(recs))])})
		}
		member := "g1"
		if p == 2 {
			member = "g2"
		}
		h.Polls = append(h.Polls, Poll{Reader: member, Group: true, Partition: p, Records: slices.Clone(recs)})
	}
	h.Polls = append(h.Polls, Poll{Reader: "g2", Group: true, Partition: 2, Records: slices.Clone(h.Final[2][:5])})
	h.GroupEnd = maps.Clone(next)
	return h
}

// flagged lists the classes with anomalies.
func flagged(r Result) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(r.Counts)) {
		if r.Counts[c] > 0 {
			out = append(out, c)
		}
	}
	return out
}

func TestCleanHistoryHasNoAnomaly(t *testing.T) {
	r := Check(clean())
	if !r.OK() {
		t.Fatalf("clean history flagged:\n%s", r.Summary())
	}
	if r.Acked != 96 || r.Unknown != 24 || r.Failed != 0 {
		t.Fatalf("outcomes: %d acked, %d unknown, %d failed; want 96, 24, 0", r.Acked, r.Unknown, r.Failed)
	}
	if r.FinalRecords != 108 || r.GroupProcessed != 113 || r.GroupDuplicates != 5 {
		t.Fatalf("final %d, group processed %d with %d repeats; want 108, 113, 5", r.FinalRecords, r.GroupProcessed, r.GroupDuplicates)
	}
}

// sendAt finds the index of the send whose value sits at partition p, offset o
// of the final log.
func sendAt(t *testing.T, h History, p int32, o int64) int {
	t.Helper()
	for _, r := range h.Final[p] {
		if r.Offset == o {
			for i, s := range h.Sends {
				if s.Value == r.Value {
					return i
				}
			}
		}
	}
	t.Fatalf("no send at %d/%d", p, o)
	return -1
}

// dropValue removes v from the final log and from every poll.
func dropValue(h *History, v string) {
	for p := range h.Final {
		h.Final[p] = slices.DeleteFunc(h.Final[p], func(r Record) bool { return r.Value == v })
	}
	for i := range h.Polls {
		h.Polls[i].Records = slices.DeleteFunc(h.Polls[i].Records, func(r Record) bool { return r.Value == v })
	}
}

// replaceValue puts value to where from was, in the final log, polls and sends.
func replaceValue(h *History, from, to string) {
	for p := range h.Final {
		for i := range h.Final[p] {
			if h.Final[p][i].Value == from {
				h.Final[p][i].Value = to
			}
		}
	}
	for i := range h.Polls {
		for j := range h.Polls[i].Records {
			if h.Polls[i].Records[j].Value == from {
				h.Polls[i].Records[j].Value = to
			}
		}
	}
}

// TestFlagsEachAnomaly plants one anomaly per case in a clean history and
// requires exactly the classes it implies to be flagged: a checker that cannot
// fail proves nothing.
func TestFlagsEachAnomaly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, h *History)
		want  []string
	}{
		{"lost acknowledged write", func(t *testing.T, h *History) {
			// An acknowledged record in the middle of partition 1 vanished; later
			// records are there, so readers read past it.
			dropValue(h, h.Sends[sendAt(t, *h, 1, 10)].Value)
		}, []string{LostWrite}},
		{"unseen acknowledged write", func(t *testing.T, h *History) {
			// The log of partition 0 lost its tail from the last acknowledged
			// record on, and nobody had read that far.
			truncateAtLastAck(t, h, 0)
		}, []string{Unseen}},
		{"reordered write", func(t *testing.T, h *History) {
			// Producer 0's two successive sends of one key landed the other way
			// round, everywhere (acknowledgements, log, reads).
			var a, b int = -1, -1
			for i, s := range h.Sends {
				if s.Producer != 0 || s.Key != "k0" || s.Outcome != OK {
					continue
				}
				if a < 0 {
					a = i
				} else {
					b = i
					break
				}
			}
			va, vb := h.Sends[a].Value, h.Sends[b].Value
			replaceValue(h, va, "swap")
			replaceValue(h, vb, va)
			replaceValue(h, "swap", vb)
			h.Sends[a].Offset, h.Sends[b].Offset = h.Sends[b].Offset, h.Sends[a].Offset
		}, []string{KeyOrder, NonmonotonicSend}},
		{"two values at one offset", func(t *testing.T, h *History) {
			// The reader saw, at 2/3, a value whose send timed out and never landed.
			var ghost string
			for _, s := range h.Sends {
				if s.Outcome == Unknown && s.Key == "k5" && !inFinal(*h, s.Value) {
					ghost = s.Value
				}
			}
			for i := range h.Polls {
				pl := &h.Polls[i]
				if pl.Reader == "r1" && pl.Partition == 2 && pl.Records[0].Offset == 0 {
					pl.Records[3].Value = ghost
				}
			}
		}, []string{InconsistentOffsets, Phantom}},
		{"duplicate", func(t *testing.T, h *History) {
			// The log holds one record twice (a retried send written again).
			recs := h.Final[1]
			dup := recs[4]
			dup.Offset = recs[len(recs)-1].Offset + 1
			h.Final[1] = append(recs, dup)
		}, []string{Duplicate}},
		{"poll skip", func(t *testing.T, h *History) {
			// The reader's second poll of partition 0 left a record out.
			n := 0
			for i := range h.Polls {
				if pl := &h.Polls[i]; pl.Reader == "r1" && pl.Partition == 0 {
					if n++; n == 2 {
						pl.Records = slices.Delete(pl.Records, 2, 3)
					}
				}
			}
		}, []string{PollSkip}},
		{"nonmonotonic poll", func(t *testing.T, h *History) {
			// The reader went back and read partition 1's record 2 again.
			h.Polls = append(h.Polls, Poll{Reader: "r1", Partition: 1, Records: []Record{h.Final[1][2]}})
		}, []string{NonmonotonicPoll}},
		{"failed write read", func(t *testing.T, h *History) {
			// A send reported as definitely failed was written and read.
			for i, s := range h.Sends {
				if s.Outcome == Unknown && inFinal(*h, s.Value) {
					h.Sends[i].Outcome, h.Sends[i].Err = Failed, "MESSAGE_TOO_LARGE"
					return
				}
			}
			t.Fatal("no unknown send landed")
		}, []string{FailedWriteRead}},
		{"phantom", func(t *testing.T, h *History) {
			// A reader saw a record past the end of the final log.
			end := h.Final[2][len(h.Final[2])-1].Offset + 1
			h.Polls = append(h.Polls, Poll{Reader: "r1", Partition: 2, Records: []Record{{Offset: end, Key: "k2", Value: "ghost"}}})
		}, []string{Phantom}},
		{"unprocessed by the group", func(t *testing.T, h *History) {
			for i := range h.Polls {
				if pl := &h.Polls[i]; pl.Group && pl.Partition == 1 {
					pl.Records = slices.Delete(pl.Records, 6, 7)
				}
			}
		}, []string{Unprocessed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			tc.plant(t, &h)
			r := Check(h)
			got := flagged(r)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Fatalf("flagged %v, want %v:\n%s", got, want, r.Summary())
			}
			t.Logf("%s", strings.TrimSpace(r.Summary()))
		})
	}
}

// truncateAtLastAck cuts partition p's final log (and what was read of it) at
// its last acknowledged record, as if the log lost that tail, and returns that
// record.
func truncateAtLastAck(t *testing.T, h *History, p int32) Record {
	t.Helper()
	recs := h.Final[p]
	for i := len(recs) - 1; i >= 0; i-- {
		if h.Sends[sendAt(t, *h, p, recs[i].Offset)].Outcome != OK {
			continue
		}
		cut := recs[i]
		for _, r := range slices.Clone(recs[i:]) {
			dropValue(h, r.Value)
		}
		h.GroupEnd[p] = cut.Offset
		return cut
	}
	t.Fatalf("partition %d has no acknowledged record", p)
	return Record{}
}

func inFinal(h History, v string) bool {
	for _, recs := range h.Final {
		for _, r := range recs {
			if r.Value == v {
				return true
			}
		}
	}
	return false
}

func TestRecorderDropsEmptyPolls(t *testing.T) {
	var rec Recorder
	rec.AddPoll(Poll{Reader: "r", Partition: 0})
	if _, polls := rec.Snapshot(); len(polls) != 0 {
		t.Fatalf("empty poll kept: %v", polls)
	}
}
