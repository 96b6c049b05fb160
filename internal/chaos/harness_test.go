package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/chaos/history"
	"github.com/strata-stream/strata/internal/controller/raftstore"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestScheduleIsSeeded(t *testing.T) {
	draw := func(seed uint64) []Fault {
		s := NewSchedule(seed, ProcessKinds, 4)
		var fs []Fault
		for range 50 {
			fs = append(fs, s.Next())
		}
		return fs
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Fatal("one seed gave two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds gave one schedule")
	}
	kinds, roles := map[Kind]bool{}, map[Role]bool{}
	for _, f := range a {
		kinds[f.Kind], roles[f.Role] = true, true
		if f.Hold < minHold || f.Hold >= maxHold || f.Gap < minGap || f.Gap >= maxGap || f.Partition < 0 || f.Partition >= 4 {
			t.Fatalf("out of bounds: %+v", f)
		}
		if f.Kind == RollingRestart && f.Role != Any {
			t.Fatalf("a rolling restart hits every node, not the %s: %+v", f.Role, f)
		}
		if f.Kind == DataCut && f.Role != Follower {
			t.Fatalf("a data cut is between a follower and its leader, not the %s: %+v", f.Role, f)
		}
	}
	for _, k := range ProcessKinds {
		if !kinds[k] {
			t.Errorf("50 faults and no %s", k)
		}
	}
	for _, r := range []Role{Leader, Follower, Controller, Any} {
		if !roles[r] {
			t.Errorf("50 faults and none of the %s", r)
		}
	}
}

// TestNodeWrapper runs the wrapper script in front of a fake binary that
// prints its arguments.
func TestNodeWrapper(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake strata") // a space, to check the quoting
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := newNodeWrapper(filepath.Join(dir, "it's"), fake); err == nil {
		t.Fatal("wrote a wrapper into a directory that does not exist")
	}
	wdir := filepath.Join(dir, "it's")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newNodeWrapper(wdir, fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.setFlags(2, "--advertised-kafka-addr", "127.0.0.1:9", "--controllers=1@127.0.0.1:7,2@127.0.0.1:8"); err != nil {
		t.Fatal(err)
	}
	if err := w.setFlags(2, "two words"); err == nil {
		t.Fatal("a flag with white space was accepted")
	}
	out, err := exec.Command(w.script, "server", "--node-id", "2", "--controller-addr", "127.0.0.12:5", "--kafka-addr", "127.0.0.12:4").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "server\n--node-id\n2\n--controller-addr\n127.0.0.12:5\n--kafka-addr\n127.0.0.12:4\n" +
		"--advertised-kafka-addr\n127.0.0.1:9\n--controllers=1@127.0.0.1:7,2@127.0.0.1:8\n"
	if string(out) != want {
		t.Fatalf("the binary got\n%s\nwant\n%s", out, want)
	}
	for flag, want := range map[string]string{"--kafka-addr": "127.0.0.12:4", "--controller-addr": "127.0.0.12:5"} {
		if got, err := w.arg(2, flag); err != nil || got != want {
			t.Fatalf("arg(%s) = %q, %v; want %q", flag, got, err, want)
		}
	}
	if _, err := w.arg(2, "--nope"); err == nil {
		t.Fatal("a missing flag was found")
	}
	if _, err := w.arg(3, "--kafka-addr"); err == nil {
		t.Fatal("a node that never started has arguments")
	}
}

// TestFreezeStopsDurableChange: after Freeze nothing changes the disk, and a
// crash image taken later equals one taken at the freeze.
func TestFreezeStopsDurableChange(t *testing.T) {
	mem := vfs.NewMem()
	ffs := newFreezeFS(mem, "")
	f, err := ffs.Create("/seg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("synced")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := ffs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("+unsynced")); err != nil {
		t.Fatal(err)
	}
	ffs.Freeze()
	for name, op := range map[string]func() error{
		"write":    func() error { _, err := f.Write([]byte("x")); return err },
		"writeat":  func() error { _, err := f.WriteAt([]byte("x"), 0); return err },
		"sync":     f.Sync,
		"truncate": func() error { return f.Truncate(0) },
		"create":   func() error { _, err := ffs.Create("/new"); return err },
		"open rw":  func() error { _, err := ffs.OpenReadWrite("/seg"); return err },
		"rename":   func() error { return ffs.Rename("/seg", "/moved") },
		"remove":   func() error { return ffs.Remove("/seg") },
		"removeal": func() error { return ffs.RemoveAll("/seg") },
		"mkdir":    func() error { return ffs.MkdirAll("/d", 0o755) },
		"syncdir":  func() error { return ffs.SyncDir("/") },
	} {
		if err := op(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s on a frozen disk: %v, want EIO", name, err)
		}
	}
	// Reads go on: a frozen node serves from its page cache.
	r, err := ffs.Open("/seg")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 15)
	if n, err := r.ReadAt(buf, 0); err != nil || string(buf[:n]) != "synced+unsynced" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	img := mem.CrashClone()
	b := make([]byte, 15)
	g, err := img.Open("/seg")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := g.ReadAt(b, 0); string(b[:n]) != "synced" {
		t.Fatalf("crash image holds %q, want only the synced bytes", b[:n])
	}
}

// TestFreezeWaitsForChangesUnderWay: Freeze returns only once a change that
// began before it has finished.
func TestFreezeWaitsForChangesUnderWay(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	ffs := newFreezeFS(vfs.NewMem(), "")
	go ffs.change("sync", "/x", func() error {
		close(entered)
		<-release
		return nil
	})
	<-entered
	frozen := make(chan struct{})
	go func() {
		ffs.Freeze()
		close(frozen)
	}()
	select {
	case <-frozen:
		t.Fatal("Freeze returned while a change was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-frozen:
	case <-time.After(10 * time.Second):
		t.Fatal("Freeze did not return after the change finished")
	}
}

// TestFreezeHoldsRaftStoreWrites: a powered-off node's Raft store does not
// fail (hashicorp/raft panics, taking the test process down, when it cannot
// store its term; seed 2 of TestSharePowerLoss did): its writes after the
// freeze wait, stay out of the crash image, and finish on the old disk once
// the image is taken (Thaw).
func TestFreezeHoldsRaftStoreWrites(t *testing.T) {
	mem := vfs.NewMem()
	ffs := newFreezeFS(mem, "/metadata/")
	wal, err := raftstore.OpenWAL(ffs, "/metadata")
	if err != nil {
		t.Fatal(err)
	}
	term := []byte("CurrentTerm")
	if err := wal.SetUint64(term, 4); err != nil {
		t.Fatal(err)
	}
	ffs.Freeze()
	stored := make(chan error, 1)
	go func() { stored <- wal.SetUint64(term, 5) }()
	select {
	case err := <-stored:
		t.Fatalf("a Raft store write on a frozen disk returned %v before the thaw", err)
	case <-time.After(100 * time.Millisecond):
	}
	img := mem.CrashClone()
	ffs.Thaw()
	if err := <-stored; err != nil {
		t.Fatalf("the held write failed after the thaw: %v", err)
	}
	got, err := raftstore.OpenWAL(img, "/metadata")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := got.GetUint64(term); err != nil || n != 4 {
		t.Fatalf("the crash image holds term %d (%v), want 4: the write held at the freeze must not be in it", n, err)
	}
	// Outside the held prefix a frozen disk still fails.
	if _, err := ffs.Create("/logs/seg"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("create under logs on a frozen disk: %v, want EIO", err)
	}
}

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []ack{
		{0, at(100)},
		{0, at(900)},
		{1, at(50)},
		{1, at(400)},
		{1, at(1000)},
	}
	if got := longestGap(acks, 2, at(0), at(1000)); got != 800*time.Millisecond {
		t.Fatalf("two partitions: %v, want 800ms", got)
	}
	if got := longestGap(acks, 3, at(0), at(1000)); got != time.Second {
		t.Fatalf("a partition without acknowledgements: %v, want the whole second", got)
	}
}

func TestTableAndReport(t *testing.T) {
	runs := []RunResult{
		{Name: "a", Seed: 1, Nodes: 3, FaultTime: time.Minute, Faults: map[Kind]int{Kill: 2, Pause: 1},
			Check: history.Result{Acked: 100, Counts: map[string]int{history.LostWrite: 1, history.Unseen: 1, history.KeyOrder: 3, history.PollSkip: 2}}, MaxUnavailable: 2 * time.Second},
		{Name: "b", Seed: 2, Nodes: 5, FaultTime: time.Minute, Faults: map[Kind]int{Kill: 1},
			Check: history.Result{Acked: 50, Counts: map[string]int{}}, MaxUnavailable: 3 * time.Second, Findings: []string{"slow"}},
	}
	table := Table(runs)
	for _, want := range []string{
		"| a | 1 | 3 | 1m0s | kill 2, pause 1 | 100 | 0 | 2 | 0 | 3 | 0 | 2 | 0 | 0 | 2s |",
		"| **2 runs** | | | **2m0s** | kill 3, pause 1 | **150** | 0 | **2** | **0** | **3** | **0** | **2** | 1 | 0 | 3s (max) |",
	} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}
	path := filepath.Join(t.TempDir(), "reliability.md")
	doc := "# Title\n\nbefore\n" + reportBegin + "\nold\n" + reportEnd + "\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateReport(path, table); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if got := string(b); !strings.HasPrefix(got, "# Title\n\nbefore\n"+reportBegin+"\n| run") || !strings.HasSuffix(got, reportEnd+"\nafter\n") || strings.Contains(got, "old") {
		t.Fatalf("report:\n%s", got)
	}
	os.WriteFile(path, []byte("no markers"), 0o644)
	if err := updateReport(path, table); err == nil {
		t.Fatal("a report without markers was rewritten")
	}
}

// TestCheckAgreement: replicas are compared from the highest local log start
// (a tiered log deletes locally on each replica's own time); a read_committed
// final read must be found in them record by record.
func TestCheckAgreement(t *testing.T) {
	rec := func(o int64, v string) history.Record { return history.Record{Offset: o, Value: v} }
	// Four one-record batches at 0..3; the replica starting at 2 deleted two.
	log := func(start int64, last string) replicaLog {
		l := replicaLog{start: start}
		for o := start; o < 4; o++ {
			v := fmt.Sprint("v", o)
			if o == 3 {
				v = last
			}
			l.batches = append(l.batches, storedBatch{o, []byte(v)})
			l.records = append(l.records, rec(o, v))
		}
		return l
	}
	final := []history.Record{rec(0, "v0"), rec(1, "v1"), rec(2, "v2"), rec(3, "v3")}
	for _, tc := range []struct {
		name          string
		replicas      map[int32]replicaLog
		final         []history.Record
		committedOnly bool
		want          int
		says          string // part of the summary
	}{
		{"equal from the highest start", map[int32]replicaLog{1: log(0, "v3"), 2: log(2, "v3"), 3: log(1, "v3")}, final, false, 0, ""},
		{"a replica differs past the highest start", map[int32]replicaLog{1: log(0, "v3"), 2: log(2, "x3")}, final, false, 1,
			"first: node 2's batch at 3 (2 bytes), node 1's batch at 3 (2 bytes)"},
		{"the final read lacks a record", map[int32]replicaLog{1: log(0, "v3"), 2: log(1, "v3")}, final[:3], false, 1, "the final read returned nothing"},
		{"read_committed: a subset is fine", map[int32]replicaLog{1: log(0, "v3")}, []history.Record{rec(1, "v1"), rec(3, "v3")}, true, 0, ""},
		{"read_committed: a record the replicas lack", map[int32]replicaLog{1: log(0, "v3")}, []history.Record{rec(1, "v1"), rec(3, "x3")}, true, 1, `the final read returned "x3" at 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res history.Result
			checkAgreement(&res, "t", 0, tc.final, tc.replicas, nil, tc.committedOnly)
			if got := res.Counts[ReplicaDivergence]; got != tc.want {
				t.Fatalf("%d divergences, want %d:\n%s", got, tc.want, res.Summary())
			}
			if !strings.Contains(res.Summary(), tc.says) {
				t.Fatalf("the summary does not say %q:\n%s", tc.says, res.Summary())
			}
		})
	}
	var res history.Result
	checkAgreement(&res, "t", 0, final, nil, map[int32]error{2: errors.New("unreadable")}, false)
	if res.Counts[ReplicaDivergence] != 1 {
		t.Fatalf("an unreadable replica not flagged: %s", res.Summary())
	}

	// The same batch stamped with two leader epochs (finding 25): the
	// divergence names both headers.
	stamped := func(epoch int32) replicaLog {
		b := batchtest.Build(batchtest.Options{Records: []batchtest.Record{{Value: []byte("v0")}}})
		batch.SetPartitionLeaderEpoch(b, epoch)
		return replicaLog{batches: []storedBatch{{0, b}}, records: []history.Record{rec(0, "v0")}}
	}
	res = history.Result{}
	checkAgreement(&res, "t", 0, final[:1], map[int32]replicaLog{1: stamped(4), 3: stamped(5)}, nil, false)
	if !strings.Contains(res.Summary(), "leader epoch 5") || !strings.Contains(res.Summary(), "leader epoch 4") {
		t.Fatalf("the divergence does not name the batches' epochs:\n%s", res.Summary())
	}
}

// TestScheduleWithRoles: extra roles are drawn for faults that hit one node;
// without them a seed draws what it always drew.
func TestScheduleWithRoles(t *testing.T) {
	plain, none := NewSchedule(3, ProcessKinds, 4), NewSchedule(3, ProcessKinds, 4).WithRoles()
	for range 50 {
		if a, b := plain.Next(), none.Next(); a != b {
			t.Fatalf("no extra roles changed the schedule: %+v, %+v", a, b)
		}
	}
	s := NewSchedule(3, append(slices.Clone(ProcessKinds), OpKinds...), 4).WithRoles(Coordinator)
	kinds, coordinator := map[Kind]bool{}, 0
	for range 200 {
		f := s.Next()
		kinds[f.Kind] = true
		if f.Role == Coordinator {
			coordinator++
			if got := f.String(); !strings.Contains(got, "transaction coordinator") && f.Kind != RollingRestart && !slices.Contains(OpKinds, f.Kind) {
				t.Errorf("%+v reads %q", f, got)
			}
		}
	}
	if coordinator == 0 {
		t.Error("200 faults and none aimed at the coordinator")
	}
	for _, k := range OpKinds {
		if !kinds[k] {
			t.Errorf("200 faults and no %s", k)
		}
	}
}

// TestOverlappedOps: an op-pause, op-cut or op-kill fault picks each of the operations
// it overlaps, with a pick of its own, and reads as the operation during the
// fault.
func TestOverlappedOps(t *testing.T) {
	seen := map[Kind]bool{}
	for pick := range 6 {
		f := Fault{Kind: OpCut, Role: Leader, Partition: 2, Pick: pick, Hold: 1500 * time.Millisecond, Reset: true}
		op := overlapped(f)
		seen[op.Kind] = true
		if !slices.Contains(overlappedOps, op.Kind) || op.Pick != pick/len(overlappedOps) || op.Partition != 2 {
			t.Errorf("pick %d: %+v", pick, op)
		}
	}
	if len(seen) != len(overlappedOps) {
		t.Errorf("six picks drew %v", seen)
	}
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{Kind: OpCut, Role: Leader, Partition: 2, Pick: 0, Hold: 1500 * time.Millisecond, Reset: true},
			"reassign of partition 2 during a partition of the leader of partition 2 for 1.5s, stalled connections reset on heal"},
		{Fault{Kind: OpPause, Role: Controller, Pick: 1, Hold: time.Second}, "decommission during a pause of the controller for 1s"},
		{Fault{Kind: OpPause, Role: Any, Pick: 5, Hold: time.Second}, "voter-change during a pause of node pick 5 for 1s"},
		{Fault{Kind: OpKill, Role: Leader, Partition: 1, Pick: 3, Hold: 2 * time.Second},
			"reassign of partition 1 with the node it works on killed half-way for 2s"},
		{Fault{Kind: OpKill, Role: Any, Pick: 1, Hold: time.Second}, "decommission with the node it works on killed half-way for 1s"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%+v reads %q, want %q", tc.f, got, tc.want)
		}
	}
}
