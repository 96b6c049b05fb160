package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync/atomic"
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
// retention deleting segments as the log grows, cuts power at a random instant
// keeping a random part of unsynced writes, and checks the recovered log:
// every batch acknowledged durable before the cut at or above the log start
// is there byte for byte, every batch there is one that was appended, in
// offset order, and the files hold no zero tail after recovery.
func TestPreallocatePowerCut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention bool
	}{{"zeros", false}, {"retention", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var tails int
			var deleted int64
			for seed := range uint64(8) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					tails, deleted = powerCutOnce(t, seed, tc.retention, tails, deleted)
				})
			}
			if tails == 0 {
				t.Fatal("no power cut left a tail to cut: the test did not exercise recovery")
			}
			if tc.retention && deleted == 0 {
				t.Fatal("retention deleted no segment")
			}
		})
	}
}

func powerCutOnce(t *testing.T, seed uint64, retention bool, tails int, deleted int64) (int, int64) {
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
	deleted += st.SegmentsDeleted
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
	return tails, deleted
}

// TestRetentionLeavesNoStaleBatch: with preallocation, retention deletes
// segments full of batches of one size and a roll follows; a power cut then
// keeps only the first 8 bytes (the base offset) of the next batch. No stale
// batch may lie where that batch began, or its whole CRC-checked body would be
// recovered under the new base offset (the base offset, length, epoch and
// magic are outside the CRC): the recovered log ends at the last batch written.
func TestRetentionLeavesNoStaleBatch(t *testing.T) {
	cfg := preallocConfig(4 << 10)
	cfg.RetentionBytes = 1 // every sealed segment goes
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	appendN(t, l, 30, 1, 300, 1000, 1)
	if _, err := l.EnforceRetention(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.Stats().SegmentsDeleted == 0 {
		t.Fatal("retention deleted no segment")
	}
	rolls := l.Stats().Rolls
	for l.Stats().Rolls == rolls {
		appendN(t, l, 1, 1, 300, 2000, 1)
	}
	appendN(t, l, 2, 1, 300, 3000, 1)
	want := readAll(t, l)
	end := l.LogEndOffset()
	if err := l.WaitDurable(ctxTimeout(t), end-1); err != nil {
		t.Fatal(err)
	}
	active := l.active()

	crashed := fsys.CrashClone()
	f, err := crashed.OpenReadWrite(active.path(logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var base [8]byte
	binary.BigEndian.PutUint64(base[:], uint64(end))
	if _, err := f.WriteAt(base[:], active.size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	r := openLog(t, crashed, cfg)
	if r.LogEndOffset() != end {
		t.Fatalf("recovered log ends at %d, want %d: a stale batch passed for the torn one", r.LogEndOffset(), end)
	}
	sameBatches(t, readAll(t, r), want)
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

// TestPreallocateWindowFollowsSegmentSize checks the window each segment
// size gets, and that a log with the coordinators' 100 MiB segments zeroes
// its window ahead of a small append, not the 64 MiB of a default segment.
func TestPreallocateWindowFollowsSegmentSize(t *testing.T) {
	for _, tt := range []struct {
		segmentBytes, want int64
	}{
		{DefaultSegmentBytes, 64 << 20}, {2 << 30, 64 << 20}, {100 << 20, 100 << 20 / 16},
		{16 << 20, 1 << 20}, {MinSegmentBytes, 1 << 20},
	} {
		if got := (Config{SegmentBytes: tt.segmentBytes}).withDefaults().preallocWindow; got != tt.want {
			t.Errorf("segment of %d bytes: window %d, want %d", tt.segmentBytes, got, tt.want)
		}
	}

	fsys := vfs.NewMem()
	l := openLog(t, fsys, Config{SegmentBytes: 100 << 20, Preallocate: true})
	appendN(t, l, 1, 2, 100, 1000, 1)
	active := filepath.Join(testDir, segmentName(0, logSuffix))
	window := int64(100 << 20 / 16)
	wait.For(t, "the zeroer to write its window", func() bool {
		return fileSize(t, fsys, active) >= l.Size()+window-defaultPreallocChunk
	})
	size := l.Size()
	if err := l.Close(); err != nil { // stops the zeroer
		t.Fatal(err)
	}
	if z := l.Stats().PreallocBytes; z > window {
		t.Fatalf("%d bytes of zeros ahead of a %d-byte log, want at most the %d-byte window", z, size, window)
	}
}

// writeBackFS records the bytes its files were asked to write back
// (vfs.WriteBacker), which the in-memory files it wraps do not offer.
type writeBackFS struct {
	vfs.FS
	wroteBack atomic.Int64
}

type writeBackFile struct {
	vfs.File
	fs *writeBackFS
}

func (f writeBackFile) WriteBack(off, n int64) error {
	f.fs.wroteBack.Add(n)
	return nil
}

func (w *writeBackFS) Create(name string) (vfs.File, error) {
	f, err := w.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return writeBackFile{f, w}, nil
}

func (w *writeBackFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := w.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return writeBackFile{f, w}, nil
}

// TestPreallocateWritesZerosBack checks that the zeroer has each chunk of
// zeros written to the disk as it writes it, rather than leaving a burst's
// worth of dirty zeros for the next fsync of the file, which a flusher's
// fsync then wrote while its producers waited.
func TestPreallocateWritesZerosBack(t *testing.T) {
	fsys := &writeBackFS{FS: vfs.NewMem()}
	l := openLog(t, fsys, preallocConfig(64<<10))
	appendN(t, l, 3, 2, 100, 1000, 1)
	wait.For(t, "every zeroed chunk written back", func() bool {
		zeroed := l.Stats().PreallocBytes
		return zeroed > 0 && fsys.wroteBack.Load() == zeroed
	})
}
