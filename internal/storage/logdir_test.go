package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

const testLogDir = "/data/logs"

var logDirCfg = Config{SegmentBytes: 2048, IndexIntervalBytes: 200, IndexMaxBytes: testIndexBytes}

// opCounter counts the operations of each kind an ErrorFS sees while on.
type opCounter struct {
	on    atomic.Bool
	mu    sync.Mutex
	count map[vfs.OpKind]int
	paths map[vfs.OpKind][]string
}

func newOpCounter() *opCounter {
	return &opCounter{count: map[vfs.OpKind]int{}, paths: map[vfs.OpKind][]string{}}
}

func (c *opCounter) MaybeError(op vfs.Op) error {
	if c.on.Load() {
		c.mu.Lock()
		c.count[op.Kind]++
		c.paths[op.Kind] = append(c.paths[op.Kind], op.Path)
		c.mu.Unlock()
	}
	return nil
}

func (c *opCounter) get(k vfs.OpKind) (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[k], slices.Clone(c.paths[k])
}

func openLogDir(t testing.TB, fsys vfs.FS) *LogDir {
	t.Helper()
	return openLogDirWith(t, fsys, LogDirOptions{})
}

// openLogDirWith opens testLogDir with opts, checkpoints an hour apart.
func openLogDirWith(t testing.TB, fsys vfs.FS, opts LogDirOptions) *LogDir {
	t.Helper()
	opts.CheckpointInterval = time.Hour
	d, err := OpenLogDir(fsys, testLogDir, opts)
	if err != nil {
		t.Fatalf("OpenLogDir: %v", err)
	}
	return d
}

// fillLogDir opens n logs in a LogDir, each with a few segments and two epochs,
// and returns them with their batches.
func fillLogDir(t *testing.T, fsys vfs.FS, n int) (*LogDir, []*Log, [][][]byte) {
	t.Helper()
	d := openLogDir(t, fsys)
	logs := make([]*Log, n)
	want := make([][][]byte, n)
	for i := range logs {
		l, err := d.Open(fmt.Sprintf("t-%d", i), logDirCfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
		if err := l.AssignEpoch(1, 0); err != nil {
			t.Fatal(err)
		}
		want[i] = appendN(t, l, 20, 2, 40, 1000, 1)
		if err := l.AssignEpoch(2, l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		want[i] = append(want[i], appendN(t, l, 5, 2, 40, 2000, 2)...)
		if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
		if l.NumSegments() < 2 {
			t.Fatalf("log %d has %d segments", i, l.NumSegments())
		}
	}
	return d, logs, want
}

// reopenAll opens every log of fillLogDir again through a new LogDir.
func reopenAll(t *testing.T, fsys vfs.FS, n int) (*LogDir, []*Log) {
	t.Helper()
	d := openLogDir(t, fsys)
	logs := make([]*Log, n)
	for i := range logs {
		l, err := d.Open(fmt.Sprintf("t-%d", i), logDirCfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	return d, logs
}

func closeAll(t *testing.T, d *LogDir, logs []*Log) {
	t.Helper()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogDirOpenFsyncs counts the fsyncs and file creations of opening n logs
// through a LogDir: after a clean shutdown one directory fsync (the marker's
// removal) whatever n is; after a power cut no checkpoint is rewritten and one
// syncfs stands for the fsyncs of every recovered active segment.
func TestLogDirOpenFsyncs(t *testing.T) {
	for _, n := range []int{4, 40} {
		t.Run(fmt.Sprintf("clean/%d", n), func(t *testing.T) {
			mem := vfs.NewMem()
			cnt := newOpCounter()
			fsys := vfs.NewErrorFS(mem, cnt)
			d, logs, want := fillLogDir(t, fsys, n)
			closeAll(t, d, logs)

			cnt.on.Store(true)
			d, logs = reopenAll(t, fsys, n)
			cnt.on.Store(false)
			syncs, _ := cnt.get(vfs.OpSync)
			dirSyncs, _ := cnt.get(vfs.OpSyncDir)
			creates, paths := cnt.get(vfs.OpCreate)
			if syncs != 0 || dirSyncs != 1 || creates != 0 {
				t.Fatalf("opening %d logs: %d fsyncs, %d directory fsyncs, %d files created %v; want 0, 1, 0", n, syncs, dirSyncs, creates, paths)
			}
			for i, l := range logs {
				if st := l.Stats(); st.RecoveredSegments != 0 {
					t.Fatalf("log %d scanned after a clean shutdown: %+v", i, st)
				}
				if l.DurableOffset() != l.LogEndOffset() {
					t.Fatalf("log %d: durable %d, end %d", i, l.DurableOffset(), l.LogEndOffset())
				}
				sameBatches(t, readAll(t, l), want[i])
			}
			closeAll(t, d, logs)
		})
		t.Run(fmt.Sprintf("power-cut/%d", n), func(t *testing.T) {
			mem := vfs.NewMem()
			d, logs, want := fillLogDir(t, mem, n)
			// Rolls moved the recovery points in memory; one write puts them on disk.
			if err := d.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			crashed := mem.CrashClone()
			closeAll(t, d, logs)

			cnt := newOpCounter()
			fsys := vfs.NewErrorFS(crashed, cnt)
			cnt.on.Store(true)
			d, logs = reopenAll(t, fsys, n)
			for i, l := range logs {
				waitFor(t, func() bool { return l.DurableOffset() == l.LogEndOffset() }, "log %d durable", i)
			}
			cnt.on.Store(false)
			syncs, paths := cnt.get(vfs.OpSync)
			dirSyncs, _ := cnt.get(vfs.OpSyncDir)
			creates, created := cnt.get(vfs.OpCreate)
			syncFS, _ := cnt.get(vfs.OpSyncFS)
			if creates != 0 || dirSyncs != 0 || syncs != 0 || syncFS != 1 {
				t.Fatalf("opening %d logs after a power cut: %d files created %v, %d directory fsyncs, %d fsyncs %v, %d syncfs; want 0, 0, 0, 1", n, creates, created, dirSyncs, syncs, paths, syncFS)
			}
			for i, l := range logs {
				// Only the active segment is read: the checkpoint covers the rest.
				if st := l.Stats(); st.RecoveredSegments != 1 {
					t.Fatalf("log %d recovered %d segments, want 1", i, st.RecoveredSegments)
				}
				sameBatches(t, readAll(t, l), want[i])
				if e := l.Epochs(); !equalEpochs(e, []EpochEntry{{1, 0}, {2, 40}}) {
					t.Fatalf("log %d epochs %v", i, e)
				}
			}
			closeAll(t, d, logs)
		})
	}
}

func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: "+format, args...)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestLogDirMigratesPerPartitionLayout opens logs written by Open alone (the
// per-partition checkpoint layout of earlier versions) through a LogDir: a
// cleanly closed one is trusted, a crashed one recovers from its own recovery
// point, and after the LogDir's first write the old checkpoints are gone and the
// LogDir's file serves the next recovery.
func TestLogDirMigratesPerPartitionLayout(t *testing.T) {
	mem := vfs.NewMem()
	var want [2][][]byte
	var old [2]*Log
	for i := range old {
		l, err := Open(mem, filepath.Join(testLogDir, fmt.Sprintf("t-%d", i)), logDirCfg)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = appendN(t, l, 30, 2, 40, 1000, 1)
		if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
		if l.NumSegments() < 3 {
			t.Fatalf("%d segments", l.NumSegments())
		}
		old[i] = l
	}
	if err := old[0].Close(); err != nil { // t-0 shut down cleanly
		t.Fatal(err)
	}
	crashed := mem.CrashClone() // t-1 did not
	old[1].Close()
	for i := range old {
		if _, err := crashed.Stat(filepath.Join(testLogDir, fmt.Sprintf("t-%d", i), recoveryCheckpointName)); err != nil {
			t.Fatalf("old layout has no recovery checkpoint: %v", err)
		}
	}

	d, logs := reopenAll(t, crashed, 2)
	if st := logs[0].Stats(); st.RecoveredSegments != 0 {
		t.Fatalf("cleanly closed old log scanned: %+v", st)
	}
	if st := logs[1].Stats(); st.RecoveredSegments != 1 {
		t.Fatalf("crashed old log recovered %d segments, want only the active one", st.RecoveredSegments)
	}
	if _, err := crashed.Stat(filepath.Join(testLogDir, "t-0", cleanShutdownName)); !isNotExist(err) {
		t.Fatalf("old clean-shutdown marker still there: %v", err)
	}
	for i, l := range logs {
		sameBatches(t, readAll(t, l), want[i])
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		if _, err := crashed.Stat(filepath.Join(testLogDir, fmt.Sprintf("t-%d", i), recoveryCheckpointName)); !isNotExist(err) {
			t.Fatalf("old recovery checkpoint of t-%d still there: %v", i, err)
		}
	}

	// A power cut now: the LogDir's file alone says where recovery starts.
	crashed2 := crashed.CrashClone()
	closeAll(t, d, logs)
	d, logs = reopenAll(t, crashed2, 2)
	for i, l := range logs {
		if st := l.Stats(); st.RecoveredSegments != 1 {
			t.Fatalf("log %d recovered %d segments after migration, want 1", i, st.RecoveredSegments)
		}
		sameBatches(t, readAll(t, l), want[i])
	}
	closeAll(t, d, logs)
}

// TestLogDirRemovedNameStartsAfresh: a log deleted and created again under the
// same name must not inherit the old log's checkpoint, even if the broker stops
// before the removal was checkpointed.
func TestLogDirRemovedNameStartsAfresh(t *testing.T) {
	mem := vfs.NewMem()
	d, logs, _ := fillLogDir(t, mem, 1)
	if err := logs[0].DeleteRecords(30); err != nil { // durable: log start 30 on disk
		t.Fatal(err)
	}
	logs[0].Close()
	if err := mem.RemoveAll(filepath.Join(testLogDir, "t-0")); err != nil {
		t.Fatal(err)
	}
	d.Remove("t-0")
	l, err := d.Open("t-0", logDirCfg)
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 3, 2, 40, 1000, 1)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	closeAll(t, d, []*Log{l})

	d, logs = reopenAll(t, crashed, 1)
	if s := logs[0].LogStartOffset(); s != 0 {
		t.Fatalf("new log starts at %d, the old one's start", s)
	}
	sameBatches(t, readAll(t, logs[0]), want)
	closeAll(t, d, logs)
}

// logDirHistory is what a workload got acknowledged, with the operation count
// at each acknowledgement.
type logDirHistory struct {
	acked   [][]ackPoint // per log
	deleted []ackPoint   // DeleteRecords of log 0 that returned
}

type ackPoint struct {
	op      int64
	batches [][]byte // the whole log's acknowledged batches at that point
	start   int64    // for deleted: the new log start
}

// logDirWorkload appends to two logs through rolls, checkpoints, deletes records
// and shuts down cleanly, recording what was acknowledged when.
func logDirWorkload(t *testing.T, c *crashPoint, opts LogDirOptions) logDirHistory {
	c.armed.Store(true)
	d := openLogDirWith(t, c.fs, opts)
	h := logDirHistory{acked: make([][]ackPoint, 2)}
	logs := make([]*Log, 2)
	var all [2][][]byte
	for i := range logs {
		l, err := d.Open(fmt.Sprintf("t-%d", i), logDirCfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	for round := range 4 {
		for i, l := range logs {
			all[i] = append(all[i], appendN(t, l, 8, 2, 40, int64(1000*round), int32(round))...)
			if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}
			h.acked[i] = append(h.acked[i], ackPoint{op: c.ops.Load(), batches: slices.Clone(all[i])})
		}
		switch round {
		case 1:
			if err := d.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		case 2:
			start := logs[0].LogEndOffset() - 10
			if err := logs[0].DeleteRecords(start); err != nil {
				t.Fatal(err)
			}
			h.deleted = append(h.deleted, ackPoint{op: c.ops.Load(), start: start})
		}
	}
	closeAll(t, d, logs)
	return h
}

// TestLogDirPowerCutAnywhere cuts the power at every point of a workload of rolls,
// checkpoints, DeleteRecords and a clean shutdown, torn writes included, and
// reopens: every acknowledged batch is there, in order, and the log start is
// never below a DeleteRecords that returned nor above one that was asked for.
func TestLogDirPowerCutAnywhere(t *testing.T) {
	t.Run("fsync", func(t *testing.T) { testLogDirPowerCut(t, LogDirOptions{}) })
	// Every log's fsync a syncfs shared with the others syncing then.
	t.Run("syncfs", func(t *testing.T) { testLogDirPowerCut(t, LogDirOptions{SyncFilesystem: true}) })
}

func testLogDirPowerCut(t *testing.T, opts LogDirOptions) {
	full := newCrashPoint(vfs.NewMem(), -1)
	logDirWorkload(t, full, opts)
	var h logDirHistory
	crashAtEachOp(t, vfs.NewMem(), max(1, full.ops.Load()/300), func(c *crashPoint) {
		h = logDirWorkload(t, c, opts)
	}, func(c *crashPoint, snap *vfs.MemFS, what string) {
		cut := c.at
		d, logs := reopenAll(t, snap, 2)
		for i, l := range logs {
			var want [][]byte
			for _, a := range h.acked[i] {
				if a.op <= cut {
					want = a.batches
				}
			}
			start := l.LogStartOffset()
			minStart, maxStart := int64(0), int64(0)
			if i == 0 {
				for _, dr := range h.deleted {
					maxStart = dr.start // asked for, perhaps not done
					if dr.op <= cut {
						minStart = dr.start
					}
				}
			}
			if start < minStart || start > maxStart {
				t.Fatalf("%s: log %d starts at %d, want [%d, %d]", what, i, start, minStart, maxStart)
			}
			got := readAll(t, l)
			var kept [][]byte
			for _, b := range want {
				if hdr, _ := batch.ParseHeader(b); hdr.LastOffset() >= start {
					kept = append(kept, b)
				}
			}
			if len(got) < len(kept) {
				t.Fatalf("%s: log %d holds %d batches, %d acknowledged", what, i, len(got), len(kept))
			}
			sameBatches(t, got[:len(kept)], kept)
		}
		closeAll(t, d, logs)
	})
}

// TestRecoveredTailIsNotDurableUntilSynced: after a kill -9 the page cache may
// hold records no fsync covered. Open recovers them without an fsync of its own,
// so without a syncfs they must not count as durable (a leader's high-water mark
// follows the durable offset) until the log's flusher has synced them; with
// one, they are durable at once.
func TestRecoveredTailIsNotDurableUntilSynced(t *testing.T) {
	t.Run("syncfs", func(t *testing.T) { testRecoveredTail(t, true) })
	t.Run("no-syncfs", func(t *testing.T) { testRecoveredTail(t, false) })
}

func testRecoveredTail(t *testing.T, syncFS bool) {
	mem := vfs.NewMem()
	cfg := logDirCfg
	cfg.Flush = FlushPolicy{Mode: Interval, Interval: time.Hour}
	d := openLogDir(t, mem)
	l, err := d.Open("t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 30, 2, 40, 1000, 1) // rolls sync the sealed segments only
	if l.DurableOffset() == l.LogEndOffset() {
		t.Fatal("the active segment's tail is durable already")
	}
	if err := d.Checkpoint(); err != nil { // recovery reads the active segment only
		t.Fatal(err)
	}

	// kill -9: the files stay as they are, page cache included.
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncFS && !syncFS {
			return vfs.ErrInjected
		}
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, ".log") {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	}))
	d2 := openLogDir(t, fsys)
	l2, err := d2.Open("t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if syncFS {
		close(release)
		if l2.DurableOffset() != l2.LogEndOffset() {
			t.Fatalf("durable %d after syncfs, log end %d", l2.DurableOffset(), l2.LogEndOffset())
		}
		// A power cut now keeps every record.
		d3 := openLogDir(t, mem.CrashClone())
		l3, err := d3.Open("t-0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		sameBatches(t, readAll(t, l3), want)
		closeAll(t, d3, []*Log{l3})
		closeAll(t, d2, []*Log{l2})
		l.Close()
		d.Close()
		return
	}
	select {
	case <-blocked: // the flusher is syncing the recovered tail
	case <-time.After(20 * time.Second):
		t.Fatalf("the recovered tail was not synced (durable %d, log end %d)", l2.DurableOffset(), l2.LogEndOffset())
	}
	if got, active := l2.DurableOffset(), l2.LogEndOffset(); got >= active {
		t.Fatalf("durable %d before the recovered tail was synced (log end %d)", got, active)
	}
	close(release)
	waitFor(t, func() bool { return l2.DurableOffset() == l2.LogEndOffset() }, "recovered tail durable")
	sameBatches(t, readAll(t, l2), want)
	closeAll(t, d2, []*Log{l2})
	l.Close()
	d.Close()
}

// TestOpenAloneReadsLogDirEntry: a tool opening one partition of a stopped
// broker's LogDir with Open alone gets the log start offset the LogDir kept.
func TestOpenAloneReadsLogDirEntry(t *testing.T) {
	mem := vfs.NewMem()
	d, logs, want := fillLogDir(t, mem, 1)
	if err := logs[0].DeleteRecords(31); err != nil { // inside a segment
		t.Fatal(err)
	}
	closeAll(t, d, logs)
	l, err := Open(mem, filepath.Join(testLogDir, "t-0"), logDirCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s := l.LogStartOffset(); s != 31 {
		t.Fatalf("log start %d, want 31", s)
	}
	got := readAll(t, l)
	sameBatches(t, got, want[0][len(want[0])-len(got):])
}

// TestLogDirCloseFsyncs counts the fsyncs of a clean shutdown of n logs
// through a LogDir: one syncfs and the two files of the LogDir itself (its
// checkpoint and its markers), whatever n is; before, each log fsynced its
// active segment and both its index files, one after another (10,000
// partitions took 16-90 s to stop). A power cut right after Close loses
// nothing, and every log reopens without a scan. After a failed syncfs no log
// has a marker: each is recovered at the next open, nothing lost.
func TestLogDirCloseFsyncs(t *testing.T) {
	for _, n := range []int{4, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mem := vfs.NewMem()
			cnt := newOpCounter()
			fsys := vfs.NewErrorFS(mem, cnt)
			d, logs, want := fillLogDir(t, fsys, n)
			cnt.on.Store(true)
			closeAll(t, d, logs)
			cnt.on.Store(false)
			syncs, paths := cnt.get(vfs.OpSync)
			syncFS, _ := cnt.get(vfs.OpSyncFS)
			if syncs != 2 || syncFS != 1 {
				t.Fatalf("closing %d logs: %d fsyncs %v, %d syncfs; want 2 (the LogDir's files), 1", n, syncs, paths, syncFS)
			}

			d, logs = reopenAll(t, mem.CrashClone(), n)
			for i, l := range logs {
				if st := l.Stats(); st.RecoveredSegments != 0 || st.IndexRebuilds != 0 {
					t.Fatalf("log %d scanned after a clean shutdown and a power cut: %+v", i, st)
				}
				sameBatches(t, readAll(t, l), want[i])
			}
			closeAll(t, d, logs)
		})
	}
	t.Run("syncfs fails", func(t *testing.T) {
		errInjected := errors.New("injected syncfs failure")
		mem := vfs.NewMem()
		var failing atomic.Bool
		fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if failing.Load() && op.Kind == vfs.OpSyncFS {
				return errInjected
			}
			return nil
		}))
		const n = 3
		d, logs, want := fillLogDir(t, fsys, n)
		failing.Store(true)
		for _, l := range logs {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatalf("LogDir.Close with a failing syncfs: %v", err)
		}
		d, logs = reopenAll(t, mem.CrashClone(), n)
		for i, l := range logs {
			if st := l.Stats(); st.RecoveredSegments == 0 {
				t.Fatalf("log %d trusted without a marker: %+v", i, st)
			}
			sameBatches(t, readAll(t, l), want[i])
		}
		closeAll(t, d, logs)
	})
}

// TestOpenLogDirFirstStartSyncsNothing: a first start (the directory new or
// empty) has no unsynced writes of an earlier run to make durable, so it
// makes no syncfs, which would wait for every other writer's dirty pages on
// the filesystem; a directory holding a log after a power cut still gets its
// one syncfs.
func TestOpenLogDirFirstStartSyncsNothing(t *testing.T) {
	mem := vfs.NewMem()
	cnt := newOpCounter()
	cnt.on.Store(true)
	d, err := OpenLogDir(vfs.NewErrorFS(mem, cnt), testDir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := cnt.get(vfs.OpSyncFS); n != 0 {
		t.Fatalf("a first start made %d syncfs, want none", n)
	}
	l, err := d.Open("t-0", Config{IndexMaxBytes: testIndexBytes})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Append(mkBatch(2, 16, 1000), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	closeAll(t, d, []*Log{l})

	cnt = newOpCounter()
	cnt.on.Store(true)
	d, err = OpenLogDir(vfs.NewErrorFS(crashed, cnt), testDir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := cnt.get(vfs.OpSyncFS); n != 1 {
		t.Fatalf("opening a directory holding a log after a power cut made %d syncfs, want 1", n)
	}
	closeAll(t, d, nil)
}
