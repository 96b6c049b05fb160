package storage

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// segmentBases returns the base offsets of the log's segments.
func segmentBases(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.mu.segments {
		out = append(out, s.base)
	}
	return out
}

func TestRollBySize(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096})
	b := mkBatch(2, 300, 0)
	perSegment := 4096 / len(b)
	appendN(t, l, 3*perSegment, 2, 300, 0, 0)
	bases := segmentBases(l)
	if len(bases) != 3 {
		t.Fatalf("segments at %v, want 3", bases)
	}
	for i, base := range bases {
		if base != int64(i*perSegment*2) {
			t.Fatalf("segment %d at %d, want %d", i, base, i*perSegment*2)
		}
	}
	if st := l.Stats(); st.Rolls != 2 {
		t.Fatalf("Rolls = %d", st.Rolls)
	}
}

func TestRollByAge(t *testing.T) {
	tests := []struct {
		name string
		// ts gives the timestamp of a batch appended at clock time now (ms).
		ts func(now int64) int64
	}{
		{"record timestamps", func(now int64) int64 { return now }},
		{"no timestamps: clock", func(int64) int64 { return -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			l := openLog(t, vfs.NewMem(), Config{SegmentAge: time.Hour, Now: clk.Now})
			add := func() {
				t.Helper()
				if _, err := l.Append(mkBatchAt(tt.ts(clk.Now().UnixMilli())), 0); err != nil {
					t.Fatal(err)
				}
			}
			add()
			clk.Advance(59 * time.Minute)
			add()
			if n := l.NumSegments(); n != 1 {
				t.Fatalf("rolled early: %d segments", n)
			}
			clk.Advance(2 * time.Minute)
			add()
			if bases := segmentBases(l); len(bases) != 2 || bases[1] != 2 {
				t.Fatalf("segments %v, want a roll at offset 2", bases)
			}
		})
	}
}

// TestRollByAgeWithJitter checks segment.jitter.ms as Kafka applies it
// (LogConfig.randomSegmentJitter, LogSegment.shouldRoll): each segment draws
// its own jitter from [0, min(SegmentJitter, SegmentAge)) when it is created,
// and rolls once it is older than SegmentAge less that jitter. Batches are
// appended a minute apart; the random source returns draws in turn.
func TestRollByAgeWithJitter(t *testing.T) {
	tests := []struct {
		name   string
		jitter time.Duration
		draws  []time.Duration // what the random source returns, in turn
		bound  time.Duration   // the n every draw is asked for; 0: none asked
		rolls  []time.Duration // the ages of the first segments when they roll
	}{
		{"no jitter", 0, nil, 0, []time.Duration{61 * time.Minute, 61 * time.Minute}},
		{"a jitter per segment", 30 * time.Minute, []time.Duration{20 * time.Minute, 5 * time.Minute, 0},
			30 * time.Minute, []time.Duration{41 * time.Minute, 56 * time.Minute}},
		{"bounded by segment.ms", 2 * time.Hour, []time.Duration{59 * time.Minute, 0, 0},
			time.Hour, []time.Duration{2 * time.Minute, 61 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []time.Duration
			randN := func(n int64) int64 {
				asked = append(asked, time.Duration(n))
				if len(asked) > len(tt.draws) {
					t.Fatalf("draw %d, only %d expected", len(asked), len(tt.draws))
				}
				return int64(tt.draws[len(asked)-1])
			}
			clk := newClock()
			l := openLog(t, vfs.NewMem(), Config{SegmentAge: time.Hour, SegmentJitter: tt.jitter, randN: randN, Now: clk.Now})
			var rolls []time.Duration
			start := clk.Now()
			for range 200 {
				if len(rolls) == len(tt.rolls) {
					break
				}
				n := l.NumSegments()
				if _, err := l.Append(mkBatchAt(clk.Now().UnixMilli()), 0); err != nil {
					t.Fatal(err)
				}
				if l.NumSegments() > n {
					rolls = append(rolls, clk.Now().Sub(start))
					start = clk.Now()
				}
				clk.Advance(time.Minute)
			}
			if !slices.Equal(rolls, tt.rolls) {
				t.Fatalf("segments rolled at ages %v, want %v", rolls, tt.rolls)
			}
			for _, n := range asked {
				if n != tt.bound {
					t.Fatalf("jitter drawn from [0, %v), want [0, %v)", n, tt.bound)
				}
			}
			if len(asked) != len(tt.draws) {
				t.Fatalf("%d jitters drawn for %d segments, want %d", len(asked), l.NumSegments(), len(tt.draws))
			}
		})
	}
}

// mkBatchAt builds a one-record batch whose timestamp is ts (-1: none).
func mkBatchAt(ts int64) []byte { return mkBatch(1, 20, ts) }

func TestRollWhenIndexFull(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{IndexIntervalBytes: 1, IndexMaxBytes: minIndexMaxBytes})
	// Each batch after the first gets an index entry; the time index (12-byte
	// entries) fills first, at 4 entries.
	appendN(t, l, 12, 1, 10, 100, 0)
	if n := l.NumSegments(); n < 2 {
		t.Fatalf("%d segments; a full index must roll", n)
	}
}

func TestRetentionByTime(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 4096, RetentionAge: time.Hour, Now: clk.Now}
	l := openLog(t, vfs.NewMem(), cfg)
	for range 3 {
		appendN(t, l, 10, 2, 300, clk.Now().UnixMilli(), 0)
		clk.Advance(30 * time.Minute)
	}
	// Segments hold records from t0, t0+30m and t0+60m; now is t0+90m.
	bases := segmentBases(l)
	if len(bases) < 3 {
		t.Fatalf("segments %v", bases)
	}
	leo := l.LogEndOffset()
	// The high-water mark protects segments that are not wholly below it.
	if n, err := l.EnforceRetention(0); err != nil || n != 0 {
		t.Fatalf("retention below the HWM deleted %d (%v)", n, err)
	}
	n, err := l.EnforceRetention(leo)
	if err != nil || n == 0 {
		t.Fatalf("EnforceRetention = %d, %v", n, err)
	}
	start := l.LogStartOffset()
	if start == 0 || segmentBases(l)[0] != start {
		t.Fatalf("log start %d, segments %v", start, segmentBases(l))
	}
	if _, err := l.Read(0, 100, leo); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	// Much later every segment, the active one included, has expired: the log is
	// rolled so that it keeps its end offset.
	clk.Advance(24 * time.Hour)
	if _, err := l.EnforceRetention(leo); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != leo || l.LogEndOffset() != leo || l.NumSegments() != 1 || l.Size() != 0 {
		t.Fatalf("after full expiry: start %d end %d segments %d size %d", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments(), l.Size())
	}
	if _, err := l.Append(mkBatch(1, 10, 0), 0); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := Config{SegmentBytes: 4096, RetentionBytes: 10000, RetentionAge: -1}
	l := openLog(t, vfs.NewMem(), cfg)
	appendN(t, l, 60, 2, 300, 0, 0) // about 40 KB in 10+ segments
	leo := l.LogEndOffset()
	if _, err := l.EnforceRetention(leo); err != nil {
		t.Fatal(err)
	}
	// Kafka's rule: drop the oldest segment while the excess is at least its size.
	l.mu.RLock()
	first := l.mu.segments[0].size
	l.mu.RUnlock()
	if size := l.Size(); size-10000 >= first || size < 10000 {
		t.Fatalf("size after retention %d, first segment %d", size, first)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("end moved to %d", l.LogEndOffset())
	}
}

func TestDeleteRecords(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096}
	l := openLog(t, mem, cfg)
	batches := appendN(t, l, 30, 2, 300, 0, 3)
	leo := l.LogEndOffset()
	bases := segmentBases(l)

	if err := l.DeleteRecords(leo + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the end = %v", err)
	}
	cut := bases[1] + 3 // inside a batch of the second segment
	if err := l.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != cut || segmentBases(l)[0] != bases[1] {
		t.Fatalf("start %d, segments %v", l.LogStartOffset(), segmentBases(l))
	}
	if _, err := l.Read(cut-1, 100, leo); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start = %v", err)
	}
	c, err := l.Read(cut, 1, leo)
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstOffset != cut-1 {
		t.Fatalf("read at start begins at %d, want the batch holding %d", c.FirstOffset, cut)
	}
	c.Release()
	if err := l.DeleteRecords(2); err != nil || l.LogStartOffset() != cut {
		t.Fatalf("moving the start back: %v, start %d", err, l.LogStartOffset())
	}
	if e := l.Epochs(); !equalEpochs(e, []EpochEntry{{3, cut}}) {
		t.Fatalf("epochs %v", e)
	}

	// The start survives a crash as well as a clean restart.
	if err := l.WaitDurable(ctxTimeout(t), leo-1); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, fsys := range map[string]vfs.FS{"clean": mem, "crash": crashed} {
		r := openLog(t, fsys, cfg)
		if r.LogStartOffset() != cut || r.LogEndOffset() != leo {
			t.Fatalf("%s reopen: [%d, %d), want [%d, %d)", name, r.LogStartOffset(), r.LogEndOffset(), cut, leo)
		}
		sameBatches(t, readAll(t, r), batches[int(cut-1)/2:])
	}
}

func TestChunkOutlivesDeletedSegment(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, Config{SegmentBytes: 4096})
	batches := appendN(t, l, 30, 2, 300, 0, 0)
	c, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	deleted := filepath.Join(testDir, segmentName(0, logSuffix+deletedSuffix))
	if _, err := mem.Stat(deleted); err != nil {
		t.Fatalf("segment file went while a chunk holds it: %v", err)
	}
	got, err := c.Bytes()
	if err != nil || len(got) == 0 || string(got[:len(batches[0])]) != string(batches[0]) {
		t.Fatalf("reading a deleted segment's chunk: %d bytes, %v", len(got), err)
	}
	c.Release()
	c.Release() // harmless
	// The flusher may hold the last reference for an instant.
	wait.For(t, "the deleted segment to go", func() bool {
		_, err := mem.Stat(deleted)
		return isNotExist(err)
	})
	names, _ := mem.List(testDir)
	for _, n := range names {
		if strings.HasPrefix(n, segmentName(0, "")) {
			t.Fatalf("%s left behind", n)
		}
	}
}

func TestRunRetention(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, RetentionAge: time.Hour, Now: clk.Now})
	appendN(t, l, 30, 2, 300, clk.Now().UnixMilli(), 0)
	clk.Advance(2 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.RunRetention(ctx, time.Millisecond, l.LogEndOffset) }()
	wait.For(t, "retention loop to delete", func() bool { return l.LogStartOffset() == l.LogEndOffset() })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunRetention returned %v", err)
	}
}

// TestRetentionRemovesFilesOffTheAppendLock holds the removal of a deleted
// segment's file inside the filesystem and checks that appends go on meanwhile:
// local retention closes and removes the files of the segments it deletes only
// after letting go of the append lock (on a busy disk, a pass over many small
// segments held appends up for half a second).
func TestRetentionRemovesFilesOffTheAppendLock(t *testing.T) {
	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRemove && strings.HasSuffix(op.Path, logSuffix+deletedSuffix) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-unblock
		}
		return nil
	}))
	l := openLog(t, fsys, Config{SegmentBytes: 4096, RetentionAge: -1, RetentionBytes: 4096})
	appendN(t, l, 40, 2, 300, 0, 0)
	if len(segmentBases(l)) < 3 {
		t.Fatalf("segments at %v, want at least 3", segmentBases(l))
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := l.EnforceRetention(l.LogEndOffset())
		done <- result{n, err}
	}()
	select {
	case <-entered:
	case r := <-done:
		close(unblock)
		t.Fatalf("retention returned %d, %v without removing a file", r.n, r.err)
	case <-time.After(30 * time.Second):
		close(unblock)
		t.Fatal("retention never removed a file")
	}
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(mkBatch(2, 300, 0), 0)
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			close(unblock)
			t.Fatalf("Append: %v", err)
		}
	case <-time.After(30 * time.Second):
		close(unblock)
		t.Fatal("Append waited for retention's file removal")
	}
	close(unblock)
	r := <-done
	if r.err != nil || r.n < 2 {
		t.Fatalf("EnforceRetention = %d, %v; want at least 2 segments", r.n, r.err)
	}
	// The last reference removes a deleted segment's file: a flusher's fsync
	// of a segment retention deleted may still hold one.
	wait.For(t, "no .deleted file left after retention", func() bool {
		names, err := fsys.List(testDir)
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(names, func(name string) bool { return strings.HasSuffix(name, deletedSuffix) })
	})
}

// Retention fsyncs no directory for the segments it deletes (under the append
// lock): the log start it makes durable first is enough, since a recovery that
// finds a deleted segment again, its removal lost to a power cut, deletes it.
func TestRetentionDeletesWithoutDirectorySync(t *testing.T) {
	mem := vfs.NewMem()
	// Directory fsyncs once the first segment was renamed to .deleted.
	var renamed atomic.Bool
	var syncDirs atomic.Int64
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpRename && strings.HasSuffix(op.To, deletedSuffix):
			renamed.Store(true)
		case op.Kind == vfs.OpSyncDir && renamed.Load():
			syncDirs.Add(1)
		}
		return nil
	}))
	cfg := Config{SegmentBytes: 4096, RetentionAge: -1, RetentionBytes: 8192}
	l := openLog(t, fsys, cfg)
	batches := appendN(t, l, 60, 2, 300, 0, 0)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	n, err := l.EnforceRetention(l.LogEndOffset())
	if err != nil || n < 3 {
		t.Fatalf("EnforceRetention = %d, %v; want at least 3 segments", n, err)
	}
	if !renamed.Load() {
		t.Fatal("retention renamed no segment to .deleted")
	}
	if got := syncDirs.Load(); got != 0 {
		t.Fatalf("retention fsynced the directory %d times after renaming segments away, want 0", got)
	}
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	crashed := mem.CrashClone() // the renames and removals were never synced
	r := openLog(t, crashed, cfg)
	if r.LogStartOffset() != start || r.LogEndOffset() != leo {
		t.Fatalf("after a power cut: [%d, %d), want [%d, %d)", r.LogStartOffset(), r.LogEndOffset(), start, leo)
	}
	kept := readAll(t, r)
	sameBatches(t, kept, batches[len(batches)-len(kept):])
	if bases := segmentBases(r); bases[0] != start {
		t.Fatalf("segments after the power cut start at %d, log start %d", bases[0], start)
	}
	names, err := crashed.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok && base < start {
			t.Fatalf("%s below the log start %d is back after recovery: %v", name, start, names)
		}
	}
}

// TestRetentionCheckpointsOffTheAppendLock holds retention's write of the
// recovery checkpoint (the new log start) inside its fsync and checks that
// appends go on meanwhile, that a power cut at that moment brings back the old
// start with every record (no segment was deleted before the start was
// durable), and that a power cut after the pass keeps the new start with no
// segment below it and the epoch cache cut there although retention did not
// rewrite the epoch checkpoint. For logs with their own checkpoint files and
// logs of a LogDir.
func TestRetentionCheckpointsOffTheAppendLock(t *testing.T) {
	const name = "topic-0"
	cfg := Config{SegmentBytes: 4096, RetentionAge: -1, RetentionBytes: 8192, IndexMaxBytes: testIndexBytes}
	for _, tc := range []struct {
		name     string
		ckptFile string // the file the recovery checkpoint goes to
		open     func(t *testing.T, fsys vfs.FS) *Log
	}{
		{"own files", recoveryCheckpointName, func(t *testing.T, fsys vfs.FS) *Log {
			return openLog(t, fsys, cfg)
		}},
		{"log dir", dirRecoveryName, func(t *testing.T, fsys vfs.FS) *Log {
			d := openLogDir(t, fsys)
			l, err := d.Open(name, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(); _ = d.Close() })
			return l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var armed atomic.Bool
			entered := make(chan struct{}, 1)
			unblock := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(unblock) }) }
			fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
				if armed.Load() && op.Kind == vfs.OpSync && op.Path == filepath.Join(filepath.Dir(op.Path), tc.ckptFile+tmpSuffix) {
					select {
					case entered <- struct{}{}:
					default:
					}
					<-unblock
				}
				return nil
			}))
			l := tc.open(t, fsys)
			t.Cleanup(release) // before the log's Close
			if err := l.AssignEpoch(1, 0); err != nil {
				t.Fatal(err)
			}
			batches := appendN(t, l, 30, 2, 300, 0, 1)
			if err := l.AssignEpoch(2, l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			batches = append(batches, appendN(t, l, 30, 2, 300, 0, 2)...)
			if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}
			// The next append must not roll: without a LogDir a roll writes the
			// recovery checkpoint file, so it waits for retention's write.
			l.appendMu.Lock()
			_, err := l.rollLocked(time.Now())
			l.appendMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()

			armed.Store(true)
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := l.EnforceRetention(leo)
				done <- result{n, err}
			}()
			select {
			case <-entered:
			case r := <-done:
				t.Fatalf("retention returned %d, %v without writing the recovery checkpoint", r.n, r.err)
			case <-time.After(30 * time.Second):
				t.Fatal("retention never wrote the recovery checkpoint")
			}

			// A power cut now: the old start, every record.
			before := tc.open(t, mem.CrashClone())
			if before.LogStartOffset() != 0 || before.LogEndOffset() != leo {
				t.Fatalf("power cut during the checkpoint write: [%d, %d), want [0, %d)", before.LogStartOffset(), before.LogEndOffset(), leo)
			}
			sameBatches(t, readAll(t, before), batches)

			appended := make(chan error, 1)
			go func() {
				_, err := l.Append(mkBatch(2, 300, 0), 2)
				appended <- err
			}()
			select {
			case err := <-appended:
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Append waited for retention's checkpoint fsync")
			}
			release()
			r := <-done
			if r.err != nil || r.n < 3 {
				t.Fatalf("EnforceRetention = %d, %v; want at least 3 segments", r.n, r.err)
			}
			start := l.LogStartOffset()
			if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}

			// A power cut after the pass: the new start, nothing below it.
			crashed := mem.CrashClone()
			after := tc.open(t, crashed)
			if after.LogStartOffset() != start || after.LogEndOffset() != l.LogEndOffset() {
				t.Fatalf("power cut after retention: [%d, %d), want [%d, %d)", after.LogStartOffset(), after.LogEndOffset(), start, l.LogEndOffset())
			}
			kept := readAll(t, after)
			sameBatches(t, kept[:len(kept)-1], batches[len(batches)-len(kept)+1:])
			if e := after.Epochs(); len(e) == 0 || e[0].StartOffset != start {
				t.Fatalf("epochs after the power cut %v, want the first to start at the log start %d", e, start)
			}
			names, err := crashed.List(after.dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if base, ok := parseSegmentName(n); ok && base < start {
					t.Fatalf("%s below the log start %d is back after recovery: %v", n, start, names)
				}
			}
		})
	}
}

// TestDeleteRecordsDurableWithConcurrentRetention runs DeleteRecords, retention
// passes and appends (with rolls) at once on a log of a LogDir and checks, by a
// power-cut image taken as each DeleteRecords returns, that the start it set is
// durable by then: retention's moves of the start make themselves durable after
// the append lock is let go, and an overlapping DeleteRecords must not return
// before a checkpoint holding its start is on disk.
func TestDeleteRecordsDurableWithConcurrentRetention(t *testing.T) {
	mem := vfs.NewMem()
	d := openLogDir(t, mem)
	cfg := Config{SegmentBytes: 2048, RetentionAge: -1, RetentionBytes: 16384, IndexMaxBytes: testIndexBytes}
	l, err := d.Open("t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); _ = d.Close() })
	appendN(t, l, 40, 2, 100, 0, 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	errs := make(chan error, 2)
	bg.Add(2)
	go func() { // appends, rolling every few batches
		defer bg.Done()
		for ctx.Err() == nil {
			if _, err := l.Append(mkBatch(2, 100, 0), 0); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // retention passes
		defer bg.Done()
		for ctx.Err() == nil {
			if _, err := l.EnforceRetention(l.LogEndOffset()); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := range 20 {
		offset := l.LogStartOffset() + 3
		if offset > l.LogEndOffset() {
			continue
		}
		if err := l.DeleteRecords(offset); err != nil {
			t.Fatalf("DeleteRecords(%d): %v", offset, err)
		}
		img := mem.CrashClone()
		d2, err := OpenLogDir(img, testLogDir, LogDirOptions{CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d2.Open("t-0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := r.LogStartOffset()
		r.Close()
		d2.Close()
		if start < offset {
			t.Fatalf("round %d: DeleteRecords(%d) returned, a power cut then gives log start %d", i, offset, start)
		}
	}
	cancel()
	bg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// TestRetentionWithoutTimestampsUsesLastModified: a segment whose batches
// carry no timestamp (-1, which Kafka accepts with CreateTime) is aged by its
// last modification, its last append (Kafka's LogSegment.largestTimestamp
// falls back to the file's last-modified time), not by its creation: a
// segment created 7 days ago but last appended to 25 hours ago is not past a
// 7-day retention.
func TestRetentionWithoutTimestampsUsesLastModified(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: MinSegmentBytes, SegmentAge: 30 * 24 * time.Hour,
		RetentionAge: 7 * 24 * time.Hour, RetentionBytes: -1, Now: clk.Now})
	noTS := func() []byte { return mkBatch(1, 800, -1) }
	if _, err := l.Append(noTS(), 0); err != nil { // offset 0, segment created now
		t.Fatal(err)
	}
	clk.Advance(6 * 24 * time.Hour)
	if _, err := l.Append(noTS(), 0); err != nil { // offset 1, written 6 days later
		t.Fatal(err)
	}
	if _, err := l.Append(noTS(), 0); err != nil { // offset 2: rolls (segment.bytes)
		t.Fatal(err)
	}
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	clk.Advance(24*time.Hour + time.Hour) // the first segment was last written 25 h ago
	n, err := l.EnforceRetention(l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("retention (7 d) deleted %d segments, log start now %d: the first segment was last modified 25 h ago", n, l.LogStartOffset())
	}
}
