package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// preallocConfig is a small-segment config with a zero window of a few
// chunks, so that tests cross rolls and windows with little data.
func preallocConfig(segmentBytes int64) Config {
	return Config{SegmentBytes: segmentBytes, IndexIntervalBytes: 512, Preallocate: true,
		preallocWindow: 4 << 10, preallocChunk: 1 << 10}
}

// fileSize returns the size of the file at path.
func fileSize(t testing.TB, fsys vfs.FS, path string) int64 {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPreallocateZeroesAheadAndTrims checks that the active segment's file
// runs ahead of the log while it is active, that every reader sees only the
// log, and that a roll and Close leave every file exactly its log's size, so
// a log opened without preallocation (or by an older binary) finds exact
// files and a clean reopen scans nothing.
func TestPreallocateZeroesAheadAndTrims(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := preallocConfig(8 << 10)
	l := openLog(t, fsys, cfg)
	want := appendN(t, l, 3, 2, 100, 1000, 1)
	active := filepath.Join(testDir, segmentName(0, logSuffix))
	wait.For(t, "the zeroer to write its window", func() bool {
		return fileSize(t, fsys, active) >= l.Size()+cfg.preallocWindow-cfg.preallocChunk
	})
	if l.Stats().PreallocBytes == 0 {
		t.Fatal("no zeros counted")
	}
	sameBatches(t, readAll(t, l), want)

	// Enough to roll a few times.
	want = append(want, appendN(t, l, 60, 2, 100, 2000, 1)...)
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments, want rolls", l.NumSegments())
	}
	sameBatches(t, readAll(t, l), want)
	l.mu.RLock()
	segs := l.mu.segments
	l.mu.RUnlock()
	var sum int64
	for _, s := range segs[:len(segs)-1] {
		if got := fileSize(t, fsys, s.path(logSuffix)); got != s.size {
			t.Fatalf("sealed segment %d: file %d bytes, log %d", s.base, got, s.size)
		}
	}
	for _, s := range segs {
		sum += s.size
	}
	if l.Size() != sum || sum != int64(len(bytes.Join(want, nil))) {
		t.Fatalf("Size %d, segments %d, appended %d", l.Size(), sum, len(bytes.Join(want, nil)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := segs[len(segs)-1]
	if got := fileSize(t, fsys, last.path(logSuffix)); got != last.size {
		t.Fatalf("active segment after Close: file %d bytes, log %d", got, last.size)
	}

	for _, pre := range []bool{false, true} {
		c := cfg
		c.Preallocate = pre
		r := openLog(t, fsys, c)
		if st := r.Stats(); st.RecoveredSegments != 0 || st.RecoveryTruncatedBytes != 0 {
			t.Fatalf("preallocate=%v: clean reopen scanned: %+v", pre, st)
		}
		sameBatches(t, readAll(t, r), want)
		want = append(want, appendN(t, r, 2, 2, 100, 3000, 1)...)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPreallocateRetentionAndSizes runs the same appends and size-based
// retention with preallocation off and on: the segments deleted, the sizes
// reported and the log start must be the same, to the byte.
func TestPreallocateRetentionAndSizes(t *testing.T) {
	type result struct {
		deleted, segments int
		size, start       int64
	}
	run := func(pre bool) result {
		cfg := preallocConfig(4 << 10)
		cfg.Preallocate = pre
		cfg.RetentionBytes = 10 << 10
		l := openLog(t, vfs.NewMem(), cfg)
		appendN(t, l, 80, 2, 100, 1000, 1)
		n, err := l.EnforceRetention(l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		return result{n, l.NumSegments(), l.Size(), l.LogStartOffset()}
	}
	off, on := run(false), run(true)
	if off != on || off.deleted == 0 {
		t.Fatalf("retention with preallocation %+v, without %+v", on, off)
	}
}

// TestPreallocateTruncation cuts the log inside the active segment and
// across segments while the zeroer runs: the cut file holds no zeros, the
// log takes appends after it and a clean reopen finds exact files.
func TestPreallocateTruncation(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   func(l *Log) int64
	}{
		{"inside the active segment", func(l *Log) int64 { return l.LogEndOffset() - 3 }},
		{"into an older segment", func(l *Log) int64 { return 5 }},
		{"to the first offset", func(l *Log) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := preallocConfig(8 << 10)
			l := openLog(t, fsys, cfg)
			appendN(t, l, 50, 1, 200, 1000, 1)
			to := tc.to(l)
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			want := readAll(t, l)
			want = append(want, appendN(t, l, 5, 1, 200, 2000, 1)...)
			sameBatches(t, readAll(t, l), want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			names, _ := fsys.List(testDir)
			r := openLog(t, fsys, Config{SegmentBytes: cfg.SegmentBytes})
			if st := r.Stats(); st.RecoveredSegments != 0 {
				t.Fatalf("clean reopen scanned: %+v (files %v)", st, names)
			}
			r.mu.RLock()
			segs := r.mu.segments
			r.mu.RUnlock()
			for _, s := range segs {
				if got := fileSize(t, fsys, s.path(logSuffix)); got != s.size {
					t.Fatalf("segment %d: file %d bytes, log %d", s.base, got, s.size)
				}
			}
			sameBatches(t, readAll(t, r), want)
		})
	}
}

// TestPreallocatePowerCut runs group-commit appenders with preallocation and
// small segments (zeroed windows, rolls and overtaken chunks), with or without
// retention (whose files the rolls recycle), cuts power at a random instant
// keeping a random part of unsynced writes, and checks the recovered log:
// every batch acknowledged durable before the cut at or above the log start
// is there byte for byte, every batch there is one that was appended, in
// offset order, and the files hold no zero or stale tail after recovery.
func TestPreallocatePowerCut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention bool
	}{{"zeros", false}, {"recycled files", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var tails int
			var recycled int64
			for seed := range uint64(8) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					tails, recycled = powerCutOnce(t, seed, tc.retention, tails, recycled)
				})
			}
			if tails == 0 {
				t.Fatal("no power cut left a tail to cut: the test did not exercise recovery")
			}
			if tc.retention && recycled == 0 {
				t.Fatal("no segment file was recycled")
			}
		})
	}
}

func powerCutOnce(t *testing.T, seed uint64, retention bool, tails int, recycled int64) (int, int64) {
	fsys := vfs.NewMem()
	cfg := preallocConfig(32 << 10)
	if retention {
		cfg.SegmentBytes, cfg.RetentionBytes = 8<<10, 16<<10
	}
	l := openLog(t, fsys, cfg)
	load := powerCutLoad{
		writers: 4, perWriter: 50, cutAfter: 30 + int(seed)*15,
		batch: func(w, i int) []byte { return mkBatch(1+i%4, 150+w*40, int64(i)) },
	}
	if retention {
		load.afterAck = func(w, i int) error {
			if w != 0 || i%5 != 0 {
				return nil
			}
			_, err := l.EnforceRetention(l.DurableOffset())
			return err
		}
	}
	c := runPowerCut(t, fsys, l, seed, load)
	st := l.Stats()
	if st.PreallocBytes == 0 {
		t.Fatal("the zeroer wrote nothing")
	}
	recycled += st.SegmentsRecycled
	appended := c.appended

	r := openLog(t, c.fs, cfg)
	if r.Stats().RecoveryTruncatedBytes > 0 {
		tails++
	}
	got := readAll(t, r)
	next := r.LogStartOffset()
	for i, b := range got {
		h, _ := batch.ParseHeader(b)
		if i > 0 && h.BaseOffset != next || h.BaseOffset < next {
			t.Fatalf("recovered batch at %d, want %d", h.BaseOffset, next)
		}
		if w, ok := appended[h.BaseOffset]; !ok || !bytes.Equal(w, b) {
			t.Fatalf("recovered batch at %d was never appended as it is", h.BaseOffset)
		}
		next = h.NextOffset()
	}
	if next != r.LogEndOffset() {
		t.Fatalf("batches end at %d, log end %d", next, r.LogEndOffset())
	}
	for off := range c.acked {
		if off >= r.LogStartOffset() && off >= next {
			t.Fatalf("durable batch at %d lost by the power cut (log ends at %d)", off, next)
		}
	}
	r.mu.RLock()
	segs := r.mu.segments
	r.mu.RUnlock()
	for _, s := range segs {
		if got := fileSize(t, c.fs, s.path(logSuffix)); got != s.size {
			t.Fatalf("segment %d after recovery: file %d bytes, log %d", s.base, got, s.size)
		}
	}
	// The recovered log preallocates and takes appends again.
	appendN(t, r, 5, 1, 100, 9000, 1)
	return tails, recycled
}

// TestRecycledFileStaleTail recycles a segment file full of batches the size
// of the new ones, so that the new segment's last batch ends exactly where a
// stale batch with a valid CRC begins, then crashes: recovery must end the log
// at the last batch written, because the stale one's offsets go back. Clean
// close and roll must leave the file at its logical size.
func TestRecycledFileStaleTail(t *testing.T) {
	cfg := preallocConfig(4 << 10)
	cfg.RetentionBytes = 1 // every sealed segment goes
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	// Batches of one size: the old file holds whole batches at the very
	// positions the new segment's batches take.
	appendN(t, l, 30, 1, 300, 1000, 1)
	if _, err := l.EnforceRetention(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	// Fill the active segment to its roll, which takes the kept file.
	segsBefore := l.Stats().Rolls
	for l.Stats().Rolls == segsBefore {
		appendN(t, l, 1, 1, 300, 2000, 1)
	}
	if st := l.Stats(); st.SegmentsRecycled != 1 {
		t.Fatalf("recycled %d files, want 1", st.SegmentsRecycled)
	}
	active := l.active()
	if got := fileSize(t, fsys, active.path(logSuffix)); got <= active.size+300 {
		t.Fatalf("recycled file has %d bytes for a log of %d: no stale batch behind it", got, active.size)
	}
	want := readAll(t, l)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}

	r := openLog(t, fsys.CrashClone(), cfg)
	if r.LogEndOffset() != l.LogEndOffset() {
		t.Fatalf("recovered log ends at %d, want %d", r.LogEndOffset(), l.LogEndOffset())
	}
	sameBatches(t, readAll(t, r), want)
	if st := r.Stats(); st.RecoveryTruncatedBytes == 0 {
		t.Fatal("recovery found no stale tail to cut")
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, fsys, active.path(logSuffix)); got != active.size {
		t.Fatalf("after Close the file has %d bytes, the log %d", got, active.size)
	}
	c := openLog(t, fsys, Config{SegmentBytes: cfg.SegmentBytes})
	if st := c.Stats(); st.RecoveredSegments != 0 {
		t.Fatalf("clean reopen scanned: %+v", st)
	}
	sameBatches(t, readAll(t, c), want)
}

// TestLinkedSegmentIsNotRecycled: a segment file a tier linked into its store
// is removed by local retention, never recycled, or the next segment's
// appends would overwrite the store's object.
func TestLinkedSegmentIsNotRecycled(t *testing.T) {
	_, l, tier, _ := linkedTier(t, 8<<10)
	l.conf().Preallocate = true // before any append: nothing reads it yet
	want := appendN(t, l, 200, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	end := tier.UploadedEnd()
	if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("local retention deleted nothing")
	}
	appendN(t, l, 40, 3, 100, 2000, 0) // rolls
	if st := l.Stats(); st.SegmentsRecycled != 0 {
		t.Fatalf("%d linked segment files recycled", st.SegmentsRecycled)
	}
	got := readRemote(t, tier, end)
	sameBatches(t, got, want[:len(got)])
}

func TestZeroWriteSize(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want int64
	}{
		{0, 16 << 10}, {100, 16 << 10}, {16 << 10, 16 << 10}, {40 << 10, 32 << 10},
		{(1 << 20) - 1, 512 << 10}, {1 << 20, 1 << 20}, {8 << 20, 1 << 20},
	} {
		if got := zeroWriteSize(tt.n); got != tt.want {
			t.Errorf("zeroWriteSize(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
