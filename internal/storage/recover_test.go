package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestCleanReopenSkipsRecoveryScan(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 200}
	l := openLog(t, fsys, cfg)
	want := appendN(t, l, 30, 3, 100, 1000, 1)
	want = append(want, appendN(t, l, 10, 3, 100, 2000, 2)...)
	segs, leo := l.NumSegments(), l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, fsys, cfg)
	st := l.Stats()
	if st.RecoveredSegments != 0 || st.RecoveredBytes != 0 || st.IndexRebuilds != 0 {
		t.Fatalf("clean reopen scanned: %+v", st)
	}
	if _, err := fsys.Stat(filepath.Join(testDir, cleanShutdownName)); !isNotExist(err) {
		t.Fatalf("clean-shutdown marker still there after Open: %v", err)
	}
	if l.NumSegments() != segs || l.LogEndOffset() != leo || l.DurableOffset() != leo {
		t.Fatalf("reopened with %d segments, end %d, durable %d; want %d, %d", l.NumSegments(), l.LogEndOffset(), l.DurableOffset(), segs, leo)
	}
	sameBatches(t, readAll(t, l), want)
	if st := l.Stats(); st.IndexRebuilds != 0 {
		t.Fatalf("reads rebuilt indexes of cleanly closed segments: %+v", st)
	}
	if e := l.Epochs(); !equalEpochs(e, []EpochEntry{{1, 0}, {2, 90}}) {
		t.Fatalf("epochs %v", e)
	}

	// Appending continues the indexes; an unclean stop is then recovered by a scan.
	want = append(want, appendN(t, l, 5, 3, 100, 3000, 2)...)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.CrashClone()
	l2 := openLog(t, crashed, cfg)
	if st := l2.Stats(); st.RecoveredSegments == 0 || st.RecoveredBytes == 0 {
		t.Fatalf("unclean reopen did not scan: %+v", st)
	}
	sameBatches(t, readAll(t, l2), want)
	if e := l2.Epochs(); !equalEpochs(e, []EpochEntry{{1, 0}, {2, 90}}) {
		t.Fatalf("epochs after recovery %v", e)
	}
}

// cleanLog builds a cleanly closed log and returns its filesystem and batches.
func cleanLog(t *testing.T, cfg Config, count int) (*vfs.MemFS, [][]byte) {
	t.Helper()
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	want := appendN(t, l, count, 2, 30, 500, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys, want
}

// lastSegment returns the path of the highest-based .log file in testDir.
func lastSegment(t *testing.T, fsys vfs.FS) string {
	t.Helper()
	names, err := fsys.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, n := range names {
		if _, ok := parseSegmentName(n); ok {
			last = n
		}
	}
	return filepath.Join(testDir, last)
}

// appendRaw appends b to a file, as a write the crash cut short would leave it.
func appendRaw(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Size()
	if _, err := f.WriteAt(b, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestCrashCutsLastWriteAtEveryByte(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	base, want := cleanLog(t, cfg, 40)
	if err := removeDurably(base, testDir, cleanShutdownName); err != nil {
		t.Fatal(err)
	}
	leo := int64(2 * len(want))
	next := batchtest.Build(batchtest.Options{BaseOffset: leo, LeaderEpoch: 1, FirstTimestamp: 9, Records: batchtest.Values(3, 20)})
	for cut := 0; cut <= len(next); cut++ {
		fsys := base.CrashClone()
		appendRaw(t, fsys, lastSegment(t, fsys), next[:cut])
		l := openLog(t, fsys, cfg)
		wantEnd, wantBatches, dropped := leo, want, int64(cut)
		if cut == len(next) {
			wantEnd, wantBatches, dropped = leo+3, append(want[:len(want):len(want)], next), 0
		}
		if l.LogEndOffset() != wantEnd {
			t.Fatalf("cut %d: log end %d, want %d", cut, l.LogEndOffset(), wantEnd)
		}
		if st := l.Stats(); st.RecoveryTruncatedBytes != dropped || st.RecoveredSegments != 1 {
			t.Fatalf("cut %d: stats %+v", cut, st)
		}
		sameBatches(t, readAll(t, l), wantBatches)
		// The log must take appends at the recovered end.
		if _, err := l.Append(mkBatch(1, 5, 0), 1); err != nil {
			t.Fatalf("cut %d: append after recovery: %v", cut, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecoveryDropsGarbageTails(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	base, want := cleanLog(t, cfg, 40)
	if err := removeDurably(base, testDir, cleanShutdownName); err != nil {
		t.Fatal(err)
	}
	const leo = 80
	valid := batchtest.Build(batchtest.Options{BaseOffset: leo, LeaderEpoch: 1, Records: batchtest.Values(2, 10)})
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-2] ^= 0x40
	// A forward gap is legal (compaction leaves them); going back is not.
	wrongOffset := batchtest.Build(batchtest.Options{BaseOffset: leo - 1, LeaderEpoch: 1, Records: batchtest.Values(2, 10)})
	tests := []struct {
		name string
		tail []byte
	}{
		{"one zero", []byte{0}},
		{"zeros like preallocation", make([]byte, 4096)},
		{"short header", valid[:40]},
		{"ones", bytes.Repeat([]byte{0xff}, 200)},
		{"bad crc", flipped},
		{"offset going back", wrongOffset},
		{"bad crc then valid", append(bytes.Clone(flipped), valid...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := base.CrashClone()
			appendRaw(t, fsys, lastSegment(t, fsys), tt.tail)
			l := openLog(t, fsys, cfg)
			if l.LogEndOffset() != leo {
				t.Fatalf("log end %d, want %d", l.LogEndOffset(), leo)
			}
			if st := l.Stats(); st.RecoveryTruncatedBytes != int64(len(tt.tail)) {
				t.Fatalf("truncated %d bytes, want %d", st.RecoveryTruncatedBytes, len(tt.tail))
			}
			sameBatches(t, readAll(t, l), want)
		})
	}
}

func TestRecoveryWithoutCheckpointsScansEverything(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	base, want := cleanLog(t, cfg, 40)
	for _, name := range []string{cleanShutdownName, recoveryCheckpointName, epochCheckpointName} {
		if err := removeDurably(base, testDir, name); err != nil {
			t.Fatal(err)
		}
	}
	// Damage a byte in the middle of the first segment: everything from there goes.
	first := filepath.Join(testDir, segmentName(0, logSuffix))
	f, err := base.OpenReadWrite(first)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(5*len(want[0]) + batch.HeaderSize + 3)
	if _, err := f.WriteAt([]byte{0xee}, pos); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l := openLog(t, base, cfg)
	if l.LogEndOffset() != 10 || l.NumSegments() != 1 {
		t.Fatalf("log end %d with %d segments, want 10 in 1", l.LogEndOffset(), l.NumSegments())
	}
	sameBatches(t, readAll(t, l), want[:5])
	if e := l.Epochs(); !equalEpochs(e, []EpochEntry{{1, 0}}) {
		t.Fatalf("epochs rebuilt as %v", e)
	}
	names, _ := base.List(testDir)
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok && b != 0 {
			t.Fatalf("segment %s survived the cut", n)
		}
	}
}

// TestIndexEveryBatch: IndexEveryBatch (Kafka's index.interval.bytes=0) puts
// an offset-index entry before every batch but the segment's first.
func TestIndexEveryBatch(t *testing.T) {
	fsys, want := cleanLog(t, Config{IndexIntervalBytes: IndexEveryBatch}, 20)
	b, err := vfs.ReadFile(fsys, filepath.Join(testDir, segmentName(0, indexSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b) / indexEntrySize; got != len(want)-1 {
		t.Errorf("%d index entries for %d batches, want %d", got, len(want), len(want)-1)
	}
}

func TestDamagedIndexIsRebuilt(t *testing.T) {
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 100}
	fsys, want := cleanLog(t, cfg, 60)
	idx := filepath.Join(testDir, segmentName(0, indexSuffix))
	f, err := fsys.OpenReadWrite(idx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}, 8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l := openLog(t, fsys, cfg)
	sameBatches(t, readAll(t, l), want)
	if st := l.Stats(); st.IndexRebuilds != 1 {
		t.Fatalf("IndexRebuilds = %d, want 1", st.IndexRebuilds)
	}
}

// TestIndexEntryIntoABatch: an index file that decodes but whose entry points
// into the middle of a batch (a damaged block of a sealed segment's .index)
// gives the answers the intact index gives, for every operation that starts
// from an index entry: the entry is checked against the log the first time it
// is used and the indexes are rebuilt.
func TestIndexEntryIntoABatch(t *testing.T) {
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 100}
	intact, _ := cleanLog(t, cfg, 60)
	idxPath := filepath.Join(testDir, segmentName(0, indexSuffix))
	b, err := vfs.ReadFile(intact, idxPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 3*indexEntrySize {
		t.Fatalf("segment 0 has %d index bytes, want 3 entries at least", len(b))
	}
	// Entry 2 now points one byte past entry 1's batch start: still increasing.
	damagedPos := binary.BigEndian.Uint32(b[indexEntrySize+4:]) + 1
	off := int64(binary.BigEndian.Uint32(b[2*indexEntrySize:]))
	damaged := intact.CrashClone()
	f, err := damaged.OpenReadWrite(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(binary.BigEndian.AppendUint32(nil, damagedPos), 2*indexEntrySize+4); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // CrashClone keeps only what was synced
		t.Fatal(err)
	}
	f.Close()

	ops := map[string]func(l *Log) (string, error){
		"read": func(l *Log) (string, error) {
			c, err := l.Read(off, 1<<20, l.LogEndOffset())
			if err != nil {
				return "", err
			}
			defer c.Release()
			got, err := c.Bytes()
			return fmt.Sprintf("%d %x", c.NextOffset, got), err
		},
		"read to a byte limit": func(l *Log) (string, error) {
			c, err := l.Read(0, int(damagedPos)+200, l.LogEndOffset())
			if err != nil {
				return "", err
			}
			defer c.Release()
			return fmt.Sprintf("%d %d", c.Size, c.NextOffset), nil
		},
		"scan": func(l *Log) (string, error) {
			var bases []int64
			err := l.ScanBatches(off, func(h batch.Header, _ []byte) error {
				bases = append(bases, h.BaseOffset)
				return nil
			})
			return fmt.Sprint(bases), err
		},
		"timestamp": func(l *Log) (string, error) {
			// Batch i (base offset 2i) holds timestamps 500+i and 501+i, and
			// every batch but the first is indexed: the time index's last
			// entry older than 502+off/2 is batch off/2's, so the search
			// starts from offset off, at the damaged entry.
			o, ts, ok, err := l.OffsetForTimestamp(502+off/2, anyRecord)
			return fmt.Sprint(o, ts, ok), err
		},
		"truncate": func(l *Log) (string, error) {
			if err := l.Truncate(off + 1); err != nil {
				return "", err
			}
			return fmt.Sprint(l.LogEndOffset(), len(readAll(t, l))), nil
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			want, err := op(openLog(t, intact.CrashClone(), cfg))
			if err != nil {
				t.Fatalf("intact index: %v", err)
			}
			got, err := op(openLog(t, damaged.CrashClone(), cfg))
			if err != nil || got != want {
				t.Fatalf("damaged index: %q, %v; the intact one gives %q", got, err, want)
			}
		})
	}
}

// TestTimeIndexLastEntryDamaged: a sealed segment's max timestamp comes from
// the last entry of its .timeindex file, which has no checksum. A damaged
// entry that still decodes gives the intact log's answers for everything that
// uses the max timestamp (retention by time above all: a too-small one used to
// delete the segment), because the entry is checked against the log at first
// use and the indexes are rebuilt when it fails.
func TestTimeIndexLastEntryDamaged(t *testing.T) {
	clk := newClock()
	now := clk.Now().UnixMilli()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 100, RetentionAge: 24 * time.Hour, Now: clk.Now}
	intact := vfs.NewMem()
	l := openLog(t, intact, cfg)
	// Batch i holds timestamps now-1000(i+1) and one more: each segment's
	// newest record is in its first batch, segment 0 holds the log's newest,
	// and every record is at most a minute old.
	for i := range 60 {
		if _, err := l.Append(mkBatch(2, 30, now-1000*int64(i+1)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(testDir, segmentName(0, timeIndexSuffix))
	active := strings.TrimSuffix(lastSegment(t, intact), logSuffix) + timeIndexSuffix
	if active == first {
		t.Fatal("the log has one segment")
	}

	cases := []struct {
		name string
		path string
		ts   int64  // the damaged entry's timestamp
		rel  uint32 // and offset, relative to the segment's base
	}{
		{"timestamp too small", first, 1, 0},
		{"timestamp too large", first, now + 48*time.Hour.Milliseconds(), 0},
		{"offset of another batch", first, now - 999, 2},
		{"all zeros", first, 0, 0},
		{"active segment, timestamp too large", active, now + 48*time.Hour.Milliseconds(), 0},
	}
	ops := map[string]func(l *Log) (string, error){
		"retention": func(l *Log) (string, error) {
			n, err := l.EnforceRetention(l.LogEndOffset())
			return fmt.Sprint(n, l.LogStartOffset()), err
		},
		"max timestamp": func(l *Log) (string, error) {
			o, ts, err := l.MaxTimestamp(anyRecord)
			return fmt.Sprint(o, ts), err
		},
		"offset for timestamp": func(l *Log) (string, error) {
			o, ts, ok, err := l.OffsetForTimestamp(now-1000, anyRecord)
			return fmt.Sprint(o, ts, ok), err
		},
		"append, then max timestamp": func(l *Log) (string, error) {
			if _, err := l.Append(mkBatch(2, 30, now-500), 1); err != nil {
				return "", err
			}
			o, ts, err := l.MaxTimestamp(anyRecord)
			return fmt.Sprint(o, ts), err
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := vfs.ReadFile(intact, c.path)
			if err != nil || len(b) < timeEntrySize {
				t.Fatalf("%s: %d bytes, %v", c.path, len(b), err)
			}
			entry := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(c.ts)), c.rel)
			damaged := intact.CrashClone()
			f, err := damaged.OpenReadWrite(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(entry, int64(len(b)-timeEntrySize)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil { // CrashClone keeps only what was synced
				t.Fatal(err)
			}
			f.Close()
			for name, op := range ops {
				want, err := op(openLog(t, intact.CrashClone(), cfg))
				if err != nil {
					t.Fatalf("%s, intact index: %v", name, err)
				}
				got, err := op(openLog(t, damaged.CrashClone(), cfg))
				if err != nil || got != want {
					t.Errorf("%s: damaged index: %q, %v; the intact one gives %q", name, got, err, want)
				}
			}
		})
	}
}

func TestStrayFilesAreRemoved(t *testing.T) {
	fsys, want := cleanLog(t, Config{}, 3)
	for _, name := range []string{"x.tmp", segmentName(500, logSuffix+deletedSuffix)} {
		appendRaw(t, fsys, filepath.Join(testDir, name), []byte("junk"))
	}
	l := openLog(t, fsys, Config{})
	sameBatches(t, readAll(t, l), want)
	names, _ := fsys.List(testDir)
	for _, n := range names {
		if n == "x.tmp" || n == segmentName(500, logSuffix+deletedSuffix) {
			t.Fatalf("%s left behind", n)
		}
	}
}

// TestPowerLossKeepsDurableBatches runs group-commit appenders, cuts power at a
// random instant (keeping a random part of unsynced writes), and checks that every
// batch whose WaitDurable returned before the cut is in the recovered log.
func TestPowerLossKeepsDurableBatches(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 512}
			l := openLog(t, fsys, cfg)
			c := runPowerCut(t, fsys, l, seed, powerCutLoad{
				writers: 4, perWriter: 40, cutAfter: 20 + int(seed)*15,
				batch: func(w, i int) []byte { return mkBatch(1+i%4, 200+w*10, int64(i)) },
			})

			r := openLog(t, c.fs, cfg)
			got := map[int64][]byte{}
			for _, b := range readAll(t, r) {
				h, _ := batch.ParseHeader(b)
				got[h.BaseOffset] = b
			}
			for off, b := range c.acked {
				if g, ok := got[off]; !ok || !bytes.Equal(g, b) {
					t.Fatalf("durable batch at %d lost or changed by the power cut (present %v)", off, ok)
				}
			}
			if len(got) < len(c.acked) {
				t.Fatalf("recovered %d batches, %d were durable", len(got), len(c.acked))
			}
		})
	}
}

// powerCutLoad is a power-cut workload: writers group-commit appenders of
// perWriter batches each, the image taken once cutAfter are acknowledged.
type powerCutLoad struct {
	writers, perWriter, cutAfter int
	batch                        func(w, i int) []byte
	// afterAck, if set, runs after each acknowledged append (w, i).
	afterAck func(w, i int) error
}

// powerCut is what runPowerCut saw: the image and, by base offset, the
// stamped batches acknowledged durable before it and every batch appended.
type powerCut struct {
	fs              *vfs.MemFS
	acked, appended map[int64][]byte
}

// runPowerCut runs load on l (on fsys) to its end and returns the power-cut
// image (torn writes by seed) taken at the instant cutAfter appends had
// returned from WaitDurable.
func runPowerCut(t *testing.T, fsys *vfs.MemFS, l *Log, seed uint64, load powerCutLoad) powerCut {
	t.Helper()
	var mu sync.Mutex
	acked, appended := map[int64][]byte{}, map[int64][]byte{}
	var wg sync.WaitGroup
	cut := make(chan powerCut, 1)
	for w := range load.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range load.perWriter {
				b := load.batch(w, i)
				info, err := l.Append(b, 0)
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				appended[info.FirstOffset] = b
				mu.Unlock()
				if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
					t.Errorf("WaitDurable: %v", err)
					return
				}
				if load.afterAck != nil {
					if err := load.afterAck(w, i); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				acked[info.FirstOffset] = b
				if len(acked) == load.cutAfter {
					// Power goes now; everything in acked returned from WaitDurable before.
					cut <- powerCut{fs: fsys.CrashClone(vfs.WithTornWrites(seed)), acked: maps.Clone(acked)}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c := <-cut
	c.appended = appended
	return c
}

// TestRecoveryCutSurvivesACrash cuts the power before each filesystem
// operation of a recovery that cuts a sealed segment at a damaged batch: the
// next recovery must find the same log, the batches before the damage. Cutting
// the segment before deleting the later ones left, after a crash between the
// two, the cut segment followed by the later segments, which the next
// recovery kept past the hole (a forward gap between segments is legal).
func TestRecoveryCutSurvivesACrash(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	base, want := cleanLog(t, cfg, 60)
	for _, name := range []string{cleanShutdownName, recoveryCheckpointName} {
		if err := removeDurably(base, testDir, name); err != nil {
			t.Fatal(err)
		}
	}
	f, err := base.OpenReadWrite(filepath.Join(testDir, segmentName(0, logSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xee}, int64(5*len(want[0])+batch.HeaderSize+3)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Cut the power before each operation of Open itself.
	crashAtEachOpen(t, base, cfg, func(*Log) {}, func(img *vfs.MemFS, what string) {
		l, err := Open(img, testDir, cfg)
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		got := readAll(t, l)
		l.Close()
		if !slices.EqualFunc(got, want[:5], bytes.Equal) {
			t.Fatalf("%s: the log holds batches at %v, want the 5 before the damage", what, baseOffsets(got))
		}
	})
}

// TestMisnamedSegmentFailsOpen: a segment file whose name (its base offset)
// does not fit its batches or the segment before it is not a torn write but a
// file that is not what its name says (copied or renamed by hand). Kafka's
// recovery fails on such a segment rather than guess; recovery cut the log
// there and deleted every later segment, acknowledged data included. Open must
// fail naming the file and delete nothing.
func TestMisnamedSegmentFailsOpen(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean, want := cleanLog(t, cfg, 40)
	for _, name := range []string{cleanShutdownName, recoveryCheckpointName} {
		if err := removeDurably(clean, testDir, name); err != nil {
			t.Fatal(err)
		}
	}
	bases := segmentFileBases(t, clean)
	if len(bases) < 3 {
		t.Fatalf("the fixture has %d segments, want 3 or more", len(bases))
	}
	last := len(bases) - 1
	leo := int64(2 * len(want))
	rename := func(i int, base int64) func(*testing.T, *vfs.MemFS) string {
		return func(t *testing.T, fsys *vfs.MemFS) string {
			to := segmentName(base, logSuffix)
			if err := fsys.Rename(filepath.Join(testDir, segmentName(bases[i], logSuffix)), filepath.Join(testDir, to)); err != nil {
				t.Fatal(err)
			}
			return to
		}
	}
	tests := []struct {
		name   string
		damage func(*testing.T, *vfs.MemFS) string // returns the misnamed file
	}{
		{"sealed segment named above its first batch", rename(1, bases[1]+1)},
		{"active segment named above its first batch", rename(last, bases[last]+1)},
		{"segment named below the end of the one before", rename(1, bases[1]-1)},
		{"batch beyond the offsets the name can index", func(t *testing.T, fsys *vfs.MemFS) string {
			name := segmentName(leo, logSuffix)
			f, err := fsys.Create(filepath.Join(testDir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := batchtest.Build(batchtest.Options{BaseOffset: leo + 1<<32, Records: batchtest.Values(2, 10)})
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
			return name
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := clean.CrashClone()
			to := tt.damage(t, fsys)
			want := segmentFileBases(t, fsys)
			l, err := Open(fsys, testDir, cfg)
			if err == nil {
				t.Cleanup(func() { l.Close() })
				t.Fatalf("Open succeeded: log end %d, %d segments; want an error naming %s", l.LogEndOffset(), l.NumSegments(), to)
			}
			if !errors.Is(err, ErrCorruptSegment) || !strings.Contains(err.Error(), to) {
				t.Fatalf("Open: %v; want ErrCorruptSegment naming %s", err, to)
			}
			if got := segmentFileBases(t, fsys); !slices.Equal(got, want) {
				t.Fatalf("segments %v after the failed Open, want %v", got, want)
			}
		})
	}
}

// TestUnnamedSegmentFileFailsOpen: a segment file whose name is not the
// 20-digit form Strata writes ("100.log", 21 digits, no digits, or a Kafka
// ".swap" left mid-compaction) was skipped by Open, so its records vanished
// from the log without a word. Kafka 4.4 parses such a name's offset but opens
// the 20-digit file of that offset instead, creating it empty, or fails on an
// unparsable one. Open must fail naming the file and change nothing.
func TestUnnamedSegmentFileFailsOpen(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean, _ := cleanLog(t, cfg, 40)
	bases := segmentFileBases(t, clean)
	if len(bases) < 3 {
		t.Fatalf("the fixture has %d segments, want 3 or more", len(bases))
	}
	last := len(bases) - 1
	// rename renames segment i's files with the given suffixes to name(base)+suffix
	// and returns the new names.
	rename := func(i int, name func(int64) string, suffixes ...string) func(*testing.T, *vfs.MemFS) []string {
		return func(t *testing.T, fsys *vfs.MemFS) []string {
			var to []string
			for _, suffix := range suffixes {
				from := filepath.Join(testDir, segmentName(bases[i], suffix))
				to = append(to, filepath.Join(testDir, name(bases[i])+suffix))
				if err := fsys.Rename(from, to[len(to)-1]); err != nil {
					t.Fatal(err)
				}
			}
			return to
		}
	}
	short := func(base int64) string { return fmt.Sprint(base) }
	long := func(base int64) string { return "0" + segmentName(base, "") }
	tests := []struct {
		name   string
		damage func(*testing.T, *vfs.MemFS) []string // returns the misnamed files
	}{
		{"sealed segment with a short name", rename(1, short, logSuffix)},
		{"sealed segment and indexes with short names", rename(1, short, logSuffix, indexSuffix, timeIndexSuffix)},
		{"active segment with a short name", rename(last, short, logSuffix)},
		{"first segment with 21 digits", rename(0, long, logSuffix)},
		{"segment named without digits", rename(1, func(int64) string { return "copy" }, logSuffix)},
		{"segment named with a sign", rename(1, func(base int64) string { return "+" + segmentName(base, "")[1:] }, logSuffix)},
		{"segment left as a Kafka swap file", func(t *testing.T, fsys *vfs.MemFS) []string {
			name := filepath.Join(testDir, segmentName(bases[1], logSuffix))
			if err := fsys.Rename(name, name+swapSuffix); err != nil {
				t.Fatal(err)
			}
			return []string{name + swapSuffix}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := clean.CrashClone()
			bad := tt.damage(t, fsys)
			want, err := fsys.List(testDir)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Open(fsys, testDir, cfg)
			if err == nil {
				t.Cleanup(func() { l.Close() })
				t.Fatalf("Open succeeded: log end %d, %d segments; want an error naming %s", l.LogEndOffset(), l.NumSegments(), bad)
			}
			named := slices.ContainsFunc(bad, func(name string) bool { return strings.Contains(err.Error(), name) })
			if !errors.Is(err, ErrCorruptSegment) || !named {
				t.Fatalf("Open: %v; want ErrCorruptSegment naming one of %v", err, bad)
			}
			if got, err := fsys.List(testDir); err != nil || !slices.Equal(got, want) {
				t.Fatalf("files %v (%v) after the failed Open, want %v", got, err, want)
			}
		})
	}
}

// TestMisnamedIndexFileIgnored: an index file not named by a 20-digit base
// offset failed Open, so the partition could not be loaded, though the file
// holds no record and a segment's missing index is rebuilt from its log.
// Kafka 4.4's LogLoader.loadSegmentFiles leaves such a file alone when the
// 20-digit log of the offset its name starts with exists. Open must load the
// whole log and leave the file.
func TestMisnamedIndexFileIgnored(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean, want := cleanLog(t, cfg, 40)
	bases := segmentFileBases(t, clean)
	tests := []struct {
		name, suffix string
		misname      func(base int64) string
	}{
		{"offset index with a short name", indexSuffix, func(base int64) string { return fmt.Sprint(base) }},
		{"time index with 21 digits", timeIndexSuffix, func(base int64) string { return "0" + segmentName(base, "") }},
		{"aborted-transaction index with a sign", abortIndexSuffix, func(base int64) string { return "+" + segmentName(base, "")[1:] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := clean.CrashClone()
			b, err := vfs.ReadFile(fsys, filepath.Join(testDir, segmentName(bases[1], indexSuffix)))
			if err != nil {
				t.Fatal(err)
			}
			misnamed := filepath.Join(testDir, tt.misname(bases[1])+tt.suffix)
			f, err := fsys.Create(misnamed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l := openLog(t, fsys, cfg)
			sameBatches(t, readAll(t, l), want)
			if got, err := vfs.ReadFile(fsys, misnamed); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s after Open: %v, %d bytes; want it left as it was", misnamed, err, len(got))
			}
		})
	}
}

// TestOrphanedIndexRemovedAtOpen: an index file whose segment is gone is
// removed at Open, as Kafka 4.4's LogLoader deletes orphaned index files.
func TestOrphanedIndexRemovedAtOpen(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean, want := cleanLog(t, cfg, 40)
	leo := int64(2 * len(want))
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, abortIndexSuffix} {
		t.Run(suffix, func(t *testing.T) {
			fsys := clean.CrashClone()
			orphan := filepath.Join(testDir, segmentName(leo+100, suffix))
			f, err := fsys.Create(orphan)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			l, err := Open(fsys, testDir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := readAll(t, l); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("the log holds batches at %v, want %d batches", baseOffsets(got), len(want))
			}
			if _, err := fsys.Stat(orphan); !isNotExist(err) {
				t.Fatalf("orphaned %s: Stat: %v, want it removed", orphan, err)
			}
		})
	}
}

// segmentFileBases returns the base offsets of the .log files in testDir.
func segmentFileBases(t *testing.T, fsys vfs.FS) []int64 {
	t.Helper()
	names, err := fsys.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	return bases
}

// TestLostEpochCheckpointCutsNoTrustedSegment: with the leader-epoch
// checkpoint damaged or missing, Open ignored the recovery point and read
// every segment from the first to rebuild the epoch cache, so damage in a
// segment the recovery point vouches for cut the log there and deleted every
// later segment, acknowledged data included. Kafka 4.4 recovers only from the
// recovery point (LogLoader.recoverLog), fails the load on a malformed epoch
// checkpoint (CheckpointFileWithFailureHandler.read) and starts a missing one
// empty. Open must cut nothing below the recovery point: the trusted segments
// give their epochs back; with a damaged checkpoint one whose batch headers do
// not parse fails Open naming it, with a missing one it gives the epochs of
// the headers before the damage.
func TestLostEpochCheckpointCutsNoTrustedSegment(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean := vfs.NewMem()
	l := openLog(t, clean, cfg)
	want := appendN(t, l, 30, 2, 30, 500, 1)
	want = append(want, appendN(t, l, 30, 2, 30, 900, 3)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantEpochs := []EpochEntry{{1, 0}, {3, 60}}
	leo := int64(2 * len(want))
	bases := segmentFileBases(t, clean)
	if len(bases) < 3 || bases[1] >= 60 {
		t.Fatalf("the fixture has segments at %v, want 3 or more, the second in epoch 1", bases)
	}
	// overwrite writes b into batch 5 of the first segment at off.
	overwrite := func(off int, b []byte) func(*testing.T, *vfs.MemFS) {
		return func(t *testing.T, fsys *vfs.MemFS) {
			f, err := fsys.OpenReadWrite(filepath.Join(testDir, segmentName(0, logSuffix)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(b, int64(5*len(want[0])+off)); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkpoints := []struct {
		name    string
		lose    func(*testing.T, *vfs.MemFS)
		damaged bool // headers that do not parse fail Open
	}{
		{"damaged epoch checkpoint", func(t *testing.T, fsys *vfs.MemFS) {
			appendRaw(t, fsys, filepath.Join(testDir, epochCheckpointName), []byte{1})
		}, true},
		{"missing epoch checkpoint", func(t *testing.T, fsys *vfs.MemFS) {
			if err := removeDurably(fsys, testDir, epochCheckpointName); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	damages := []struct {
		name         string
		damage       func(*testing.T, *vfs.MemFS)
		headersParse bool
	}{
		{"record bytes", overwrite(batch.HeaderSize+3, []byte{0xee}), true},
		{"batch length", overwrite(8, []byte{0xff, 0xff, 0xff, 0xff}), false},
	}
	for _, cp := range checkpoints {
		for _, d := range damages {
			t.Run(cp.name+"/"+d.name, func(t *testing.T) {
				fsys := clean.CrashClone()
				cp.lose(t, fsys)
				d.damage(t, fsys)
				files, err := fsys.List(testDir)
				if err != nil {
					t.Fatal(err)
				}
				l, err := Open(fsys, testDir, cfg)
				if cp.damaged && !d.headersParse {
					if err == nil {
						t.Cleanup(func() { l.Close() })
						t.Fatalf("Open succeeded: log end %d, %d segments; want ErrCorruptSegment", l.LogEndOffset(), l.NumSegments())
					}
					first := filepath.Join(testDir, segmentName(0, logSuffix))
					if !errors.Is(err, ErrCorruptSegment) || !strings.Contains(err.Error(), first) {
						t.Fatalf("Open: %v; want ErrCorruptSegment naming %s", err, first)
					}
					if got, err := fsys.List(testDir); err != nil || !slices.Equal(got, files) {
						t.Fatalf("files %v (%v) after the failed Open, want %v", got, err, files)
					}
					return
				}
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer l.Close()
				if got := segmentFileBases(t, fsys); l.LogEndOffset() != leo || !slices.Equal(got, bases) {
					t.Fatalf("log end %d, segments %v; want %d, %v", l.LogEndOffset(), got, leo, bases)
				}
				if e := l.Epochs(); !equalEpochs(e, wantEpochs) {
					t.Fatalf("epochs %v, want %v", e, wantEpochs)
				}
			})
		}
	}
}

// TestOpenWithoutSegmentsCutsEpochsAtLogStart cuts the power before each
// filesystem operation of TruncateFullyAndStartAt. Where the old segments were
// gone and the new one not yet created, Open started the log empty at the
// checkpointed log start but kept the epoch entries below it, so
// EndOffsetForEpoch answered an offset below the log start. Kafka 4.4's
// LogLoader.load cuts the epoch cache at the log start whatever the segments.
func TestOpenWithoutSegmentsCutsEpochsAtLogStart(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	appendN(t, l, 30, 2, 30, 500, 1)
	appendN(t, l, 30, 2, 30, 900, 3)
	if err := l.DeleteRecords(70); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	crashAtEachLogOp(t, fsys, cfg, func(l *Log) error { return l.TruncateFullyAndStartAt(500) }, func(img *vfs.MemFS, what string) {
		l := openLog(t, img, cfg)
		start := l.LogStartOffset()
		for _, e := range l.Epochs() {
			if e.StartOffset < start {
				t.Fatalf("%s: epochs %v, log start %d: an entry below the log start", what, l.Epochs(), start)
			}
		}
		if _, end := l.EndOffsetForEpoch(1); end >= 0 && end < start {
			t.Fatalf("%s: EndOffsetForEpoch(1) = %d, below the log start %d", what, end, start)
		}
		l.Close()
	})
}

// TestCleanOpenWithDamagedActiveFirstBatch: after a clean shutdown Open reads
// the active segment's first batch header only for roll by age. A damaged one
// (its length or magic) failed Open, so the partition could not be loaded at
// all, where Kafka 4.4 reads no batch of a cleanly closed log (LogLoader.load)
// and, finding no first batch, ages the segment by its creation time
// (LogSegment.shouldRoll). Open must keep the log as closed, and age the
// segment by its creation time.
func TestCleanOpenWithDamagedActiveFirstBatch(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	clean, want := cleanLog(t, cfg, 40)
	leo := int64(2 * len(want))
	bases := segmentFileBases(t, clean)
	tests := []struct {
		name string
		off  int64 // where 0xff bytes go in the first batch
	}{
		{"batch length", 8},
		{"magic", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := clean.CrashClone()
			f, err := fsys.OpenReadWrite(lastSegment(t, fsys))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, tt.off); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l := openLog(t, fsys, cfg)
			if got := segmentFileBases(t, fsys); l.LogEndOffset() != leo || !slices.Equal(got, bases) {
				t.Fatalf("log end %d, segments %v; want %d, %v", l.LogEndOffset(), got, leo, bases)
			}
			if st := l.Stats(); st.RecoveredSegments != 0 {
				t.Fatalf("a clean reopen scanned %d segments", st.RecoveredSegments)
			}
			s := l.active()
			s.mu.RLock()
			firstTS := s.mu.firstTS
			s.mu.RUnlock()
			if firstTS != -1 {
				t.Fatalf("first timestamp %d from a damaged header, want -1 (age by creation time)", firstTS)
			}
		})
	}
}
