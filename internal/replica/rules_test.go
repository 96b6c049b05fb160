package replica

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/scripttest"
)

// TestRules runs the scripts in testdata/rules/*.txt against the pure
// replication rules (rules.go): golden command scripts (package scripttest;
// -rewrite regenerates the output) whose commands take key=value arguments;
// time is a duration since the script's start.
//
// The leader's side (a tracker, the leader's safe end and the HWM it publishes,
// as Partition composes them):
//
//	lead id= replicas=1,2,3 isr=1,2,3 [pepoch=0] safe=N [hwm=N] [min=1] [lag=DUR] [at=DUR]
//	    (epoch-start is the safe end at the start of the leadership; min is
//	    min.insync.replicas, lag replica.lag.time.max.ms, 10s by default)
//	safe N [at=DUR]             the leader's safe end (and log end) moved
//	min N                       min.insync.replicas changed (a dynamic config)
//	ineligible id=              the broker may not join an ISR (fenced, in
//	                            controlled shutdown: KIP-841)
//	eligible id=                it may again
//	fetch id= offset= [start=N] [at=DUR]  a follower's fetch (its log starting
//	                            at start): progress, HWM, expansion
//	read-replicas offset= [at=DUR]  the followers a consumer fetching at offset
//	                            may be pointed at (KIP-392)
//	tick at= lag=               the ISR maintenance: shrinking
//	commit pepoch= isr= [replicas=] [at=DUR]   the controller committed a change
//	refused id=                 the controller refused the expansion adding id
//	retry                       the ISR maintenance: an unresolved expansion again
//	resign                      the leader's log failed
//
// The follower's side (epochs as epoch@startOffset,... and a log end):
//
//	diverge last-epoch= offset= epochs= leo=          the leader's check
//	truncate epoch= end= epochs= leo=                 the follower's truncation point
//	out-of-range offset= leader-start= leader-hwm= local-start=
//	follower-hwm cur= leader= leo=
func TestRules(t *testing.T) {
	scripttest.Run(t, "testdata/rules/*.txt", func(t *testing.T) func(string) []string {
		return (&rulesHarness{t: t}).run
	})
}

type rulesHarness struct {
	t          *testing.T
	tr         *tracker
	safe       int64
	hwm        int64
	epochStart int64
	minISR     int32
	lag        time.Duration
	now        time.Time // the time of the latest command that named one
	ineligible map[int32]bool
}

var rulesStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (h *rulesHarness) run(cmd string) []string {
	fields := strings.Fields(cmd)
	args := map[string]string{}
	var pos []string
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	num := func(k string, def int64) int64 {
		v, ok := args[k]
		if !ok {
			if def == -999 {
				h.t.Fatalf("%q: missing %s=", cmd, k)
			}
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			h.t.Fatalf("%q: %s: %v", cmd, k, err)
		}
		return n
	}
	at := func() time.Time {
		v, ok := args["at"]
		if !ok {
			return rulesStart
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			h.t.Fatalf("%q: at: %v", cmd, err)
		}
		return rulesStart.Add(d)
	}
	if _, ok := args["at"]; ok {
		h.now = at()
	}
	ids := func(k string) []int32 {
		v, ok := args[k]
		if !ok {
			return nil
		}
		var out []int32
		for s := range strings.SplitSeq(v, ",") {
			if s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				h.t.Fatalf("%q: %s: %v", cmd, k, err)
			}
			out = append(out, int32(n))
		}
		if out == nil {
			out = []int32{}
		}
		return out
	}
	const required = -999
	switch fields[0] {
	case "lead":
		h.safe = num("safe", required)
		h.epochStart = h.safe
		h.hwm = num("hwm", 0)
		h.minISR = int32(num("min", 1))
		h.lag, h.ineligible = 10*time.Second, nil
		if v, ok := args["lag"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				h.t.Fatalf("%q: lag: %v", cmd, err)
			}
			h.lag = d
		}
		h.tr = newTracker(int32(num("id", required)), int32(num("pepoch", 0)), ids("replicas"), ids("isr"), true, at())
		h.advance()
		return h.state()
	case "safe":
		if len(pos) != 1 {
			h.t.Fatalf("%q: want one offset", cmd)
		}
		n, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil {
			h.t.Fatal(err)
		}
		h.safe = n
		h.advance()
		return h.state()
	case "ineligible", "eligible":
		if h.ineligible == nil {
			h.ineligible = map[int32]bool{}
		}
		h.ineligible[int32(num("id", required))] = fields[0] == "ineligible"
		h.advance()
		return h.state()
	case "min":
		if len(pos) != 1 {
			h.t.Fatalf("%q: want one value", cmd)
		}
		n, err := strconv.Atoi(pos[0])
		if err != nil {
			h.t.Fatal(err)
		}
		h.minISR = int32(n)
		h.advance()
		return h.state()
	case "fetch":
		id, offset := int32(num("id", required)), num("offset", required)
		inISR, err := h.tr.fetched(id, offset, num("start", -1), h.safe, at())
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		var out []string
		if !inISR && !h.ineligible[id] {
			if isr := h.tr.proposeExpansion(id, h.hwm, h.epochStart); isr != nil {
				out = append(out, fmt.Sprintf("propose expand isr=%s", fmtIDs(isr)))
			}
		}
		h.advance()
		return append(out, h.state()...)
	case "read-replicas":
		var out []string
		for _, v := range h.tr.readReplicas(num("offset", required), at()) {
			out = append(out, fmt.Sprintf("%d: log end %d, caught up %v ago", v.ID, v.LogEndOffset, v.SinceCaughtUp))
		}
		if out == nil {
			return []string{"none"}
		}
		return out
	case "tick":
		lag, err := time.ParseDuration(args["lag"])
		if err != nil {
			h.t.Fatalf("%q: lag: %v", cmd, err)
		}
		if isr := h.tr.shrinkISR(at(), lag); isr != nil {
			return []string{fmt.Sprintf("propose shrink isr=%s", fmtIDs(isr))}
		}
		return []string{"no change"}
	case "commit":
		if !h.tr.update(int32(num("pepoch", required)), ids("replicas"), ids("isr"), at()) {
			return []string{"stale: ignored"}
		}
		h.advance()
		return h.state()
	case "refused":
		h.tr.expansionRefused(int32(num("id", required)))
		h.advance()
		return h.state()
	case "retry":
		if isr := h.tr.unresolvedExpansion(); isr != nil {
			return []string{fmt.Sprintf("propose expand isr=%s", fmtIDs(isr))}
		}
		return []string{"no change"}
	case "resign":
		if isr := resignISR(h.tr.isr, h.tr.localID); isr != nil {
			return []string{fmt.Sprintf("propose resign isr=%s", fmtIDs(isr))}
		}
		return []string{"no change: the only in-sync replica stays"}
	case "diverge":
		d := divergence(int32(num("last-epoch", required)), num("offset", required), h.epochs(args["epochs"], num("leo", required)))
		if d == nil {
			return []string{"no divergence"}
		}
		return []string{fmt.Sprintf("diverging epoch=%d end=%d", d.Epoch, d.EndOffset)}
	case "truncate":
		d := Diverging{Epoch: int32(num("epoch", required)), EndOffset: num("end", required)}
		return []string{fmt.Sprintf("truncate to %d", truncationOffset(d, h.epochs(args["epochs"], num("leo", required))))}
	case "out-of-range":
		restart, to := outOfRange(num("offset", required), num("leader-start", required), num("leader-hwm", required), num("local-start", required))
		if restart {
			return []string{fmt.Sprintf("restart at %d", to)}
		}
		return []string{fmt.Sprintf("truncate to %d", to)}
	case "follower-hwm":
		return []string{fmt.Sprintf("hwm=%d", followerHighWatermark(num("cur", required), num("leader", required), num("leo", required)))}
	}
	h.t.Fatalf("unknown command %q", cmd)
	return nil
}

// advance raises the published HWM as Partition does: never down.
func (h *rulesHarness) advance() {
	eligible := func(id int32, _ int64) bool { return !h.ineligible[id] }
	l := leaderState{safeEnd: h.safe, logEnd: h.safe, minISR: h.minISR, now: h.now, maxLag: h.lag, eligible: eligible}
	h.hwm = max(h.hwm, h.tr.highWatermark(l))
}

func (h *rulesHarness) state() []string {
	var fs []string
	for _, id := range h.tr.replicas {
		if f := h.tr.followers[id]; f != nil {
			fs = append(fs, fmt.Sprintf("%d@%d", id, f.logEnd))
		}
	}
	adding := ""
	if h.tr.adding != noReplica {
		adding = fmt.Sprintf(" adding=%d", h.tr.adding)
	}
	return []string{fmt.Sprintf("hwm=%d isr=%s pepoch=%d%s followers=[%s]", h.hwm, fmtIDs(h.tr.isr), h.tr.partitionEpoch, adding, strings.Join(fs, " "))}
}

// epochs parses "epoch@start,..." into a model of storage's epoch cache:
// the largest epoch at or below the one asked for, and where it ended.
func (h *rulesHarness) epochs(spec string, leo int64) epochEnds {
	type entry struct {
		epoch int32
		start int64
	}
	var es []entry
	for s := range strings.SplitSeq(spec, ",") {
		if s == "" {
			continue
		}
		e, st, ok := strings.Cut(s, "@")
		en, err1 := strconv.Atoi(e)
		sn, err2 := strconv.ParseInt(st, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			h.t.Fatalf("bad epochs %q", spec)
		}
		es = append(es, entry{int32(en), sn})
	}
	return func(requested int32) (int32, int64) {
		if len(es) > 0 && es[len(es)-1].epoch == requested {
			return requested, leo
		}
		higher := slices.IndexFunc(es, func(e entry) bool { return e.epoch > requested })
		switch {
		case higher < 0:
			return -1, -1
		case higher == 0:
			return requested, es[0].start
		default:
			return es[higher-1].epoch, es[higher].start
		}
	}
}

func fmtIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestExpansionNeedsFetchUnderThisView: an expansion is proposed on the
// follower's progress as this view of the replica set recorded it. A view
// begun since (a new leader epoch) has not heard from the follower, so a
// fetch recorded under the old one earns no proposal.
func TestExpansionNeedsFetchUnderThisView(t *testing.T) {
	now := time.Now()
	old := newTracker(1, 0, []int32{1, 2}, []int32{1}, true, now)
	if _, err := old.fetched(2, 10, 0, 10, now); err != nil {
		t.Fatal(err)
	}
	if isr := old.proposeExpansion(2, 10, 0); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("proposal after a fetch at the HWM: %v, want [1 2]", isr)
	}
	fresh := newTracker(1, 1, []int32{1, 2}, []int32{1}, true, now)
	if isr := fresh.proposeExpansion(2, 10, 0); isr != nil {
		t.Fatalf("proposal by a view that never heard from the follower: %v, want none", isr)
	}
}
