package share

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestPartitionScripts runs testdata/*.txt against one Partition. A script is a list
// of commands ("> cmd args") each followed by its output; "#" lines are comments.
// Time starts at 0 and moves only with "advance".
//
//	limits lock=30s deliveries=3 window=100 [deadletter=true]
//	start OFFSET                          (a fresh partition at OFFSET)
//	acquire MEMBER batches=0-4,5c,6-9 [max=N] [strict=]   (c: a control batch)
//	ack MEMBER FIRST-LAST TYPE[,TYPE...]       (accept|release|reject|gap|renew)
//	expire | release MEMBER | advance DUR | logstart OFFSET | unarchive O,O | archive O,O
//	deadletters                           (the Archiving offsets: offset#count:why)
//	state                                 (start, end, every offset in flight)
//	snapshot                              (prints it and restores a new partition from it)
func TestPartitionScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var got, want []string
	var cmd string
	h := &scriptHarness{p: NewPartition(0), lim: Limits{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 200}}
	flush := func() {
		if cmd == "" {
			return
		}
		if !*rewrite && !slices.Equal(got, want) {
			t.Errorf("%s: %q:\n--- want\n%s\n--- got\n%s", path, cmd, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		cmd, got, want = "", nil, nil
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "> "):
			flush()
			cmd = strings.TrimSpace(line[2:])
			out.WriteString(line + "\n")
			got = h.run(t, cmd)
		case line == "" || strings.HasPrefix(line, "#"):
			flush()
			out.WriteString(line + "\n")
		default:
			want = append(want, line)
		}
	}
	flush()
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptHarness struct {
	p   *Partition
	lim Limits
	now time.Duration
}

func (h *scriptHarness) at() time.Time { return time.Unix(0, 0).Add(h.now) }

func (h *scriptHarness) run(t *testing.T, cmd string) []string {
	f := strings.Fields(cmd)
	args := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	switch f[0] {
	case "limits":
		h.lim.LockDuration = mustDur(t, args["lock"])
		h.lim.DeliveryLimit = int16(mustInt(t, args["deliveries"]))
		h.lim.MaxInFlight = mustInt(t, args["window"])
		h.lim.DeadLetter = args["deadletter"] == "true"
	case "start":
		h.p = NewPartition(mustInt(t, f[1]))
	case "acquire":
		var bs []Batch
		for _, s := range strings.Split(args["batches"], ",") {
			control := strings.HasSuffix(s, "c")
			s = strings.TrimSuffix(s, "c")
			a, b, ok := strings.Cut(s, "-")
			if !ok {
				b = a
			}
			bs = append(bs, Batch{First: mustInt(t, a), Last: mustInt(t, b), Control: control})
		}
		maxRecords := 500
		if m, ok := args["max"]; ok {
			maxRecords = int(mustInt(t, m))
		}
		var parts []string
		_, strict := args["strict"]
		for _, a := range h.p.Acquire(f[1], h.at(), h.lim, bs, maxRecords, strict) {
			parts = append(parts, fmt.Sprintf("%d-%d#%d", a.First, a.Last, a.DeliveryCount))
		}
		if len(parts) == 0 {
			return []string{"acquired nothing"}
		}
		return []string{"acquired " + strings.Join(parts, " ")}
	case "ack": // ack MEMBER FIRST-LAST TYPES [FIRST-LAST TYPES ...]: one request's batches
		var batches []AckBatch
		for i := 2; i+1 < len(f); i += 2 {
			a, b, _ := strings.Cut(f[i], "-")
			batch := AckBatch{First: mustInt(t, a), Last: mustInt(t, b)}
			for _, s := range strings.Split(f[i+1], ",") {
				batch.Types = append(batch.Types, map[string]AckType{"gap": Gap, "accept": Accept, "release": Release, "reject": Reject, "renew": Renew, "bad": 9}[s])
			}
			batches = append(batches, batch)
		}
		archived, err := h.p.Acknowledge(f[1], h.at(), h.lim, batches)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		return []string{fmt.Sprintf("ok archived=%v", archived)}
	case "expire":
		archived, next := h.p.Expire(h.at(), h.lim)
		n := "none"
		if !next.IsZero() {
			n = next.Sub(time.Unix(0, 0)).String()
		}
		return []string{fmt.Sprintf("archived=%v next=%s", archived, n)}
	case "release":
		return []string{fmt.Sprintf("archived=%v", h.p.ReleaseMember(f[1], h.lim))}
	case "advance":
		h.now += mustDur(t, f[1])
	case "logstart":
		h.p.AdvanceTo(mustInt(t, f[1]))
	case "unarchive", "archive":
		var os []int64
		for _, s := range strings.Split(f[1], ",") {
			os = append(os, mustInt(t, s))
		}
		if f[0] == "archive" {
			h.p.Archive(os)
		} else {
			h.p.Unarchive(os)
		}
	case "deadletters":
		var parts []string
		for _, d := range h.p.DeadLetters() {
			parts = append(parts, fmt.Sprintf("%d#%d:%s", d.Offset, d.DeliveryCount, map[Failure]string{FailureUnknown: "unknown", FailureRejected: "rejected", FailureDeliveries: "deliveries"}[d.Why]))
		}
		return []string{"deadletters " + strings.Join(parts, " ")}
	case "state":
		s := fmt.Sprintf("start=%d end=%d fetch=%d", h.p.Start(), h.p.End(), h.p.FetchOffset())
		var parts []string
		for o := h.p.Start(); o < h.p.End(); o++ {
			r := h.p.at(o)
			x := fmt.Sprintf("%d:%s#%d", o, r.state, r.count)
			if r.member != "" {
				x += "@" + r.member
			}
			parts = append(parts, x)
		}
		if len(parts) > 0 {
			s += " " + strings.Join(parts, " ")
		}
		return []string{s}
	case "failspent":
		return []string{fmt.Sprintf("spent=%v", h.p.FailSpent(h.lim))}
	case "snapshot":
		snap := h.p.Snapshot()
		s := fmt.Sprintf("start=%d", snap.Start)
		for _, b := range snap.Batches {
			s += fmt.Sprintf(" %d-%d:%s#%d", b.First, b.Last, b.State, b.DeliveryCount)
		}
		h.p = Restore(snap)
		return []string{s}
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	return nil
}

func mustInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func mustDur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("bad duration %q", s)
	}
	return d
}
