package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// blockedRead holds the first read of one file (of more than minLen bytes),
// once armed, until released: a test acts while a first-use check of a
// segment is in its I/O.
type blockedRead struct {
	path    string
	minLen  int
	armed   atomic.Bool
	blocked chan struct{} // closed when the read waits
	release chan struct{}
	once    sync.Once
}

func newBlockedRead(path string) *blockedRead {
	return &blockedRead{path: path, blocked: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockedRead) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpRead && op.Path == b.path && op.Len > b.minLen && b.armed.CompareAndSwap(true, false) {
		close(b.blocked)
		<-b.release
	}
	return nil
}

func (b *blockedRead) unblock() { b.once.Do(func() { close(b.release) }) }

// returnsWhileBlocked arms b and starts check, which must reach b's read,
// and fails unless op returns while b holds that read; then it lets check
// finish. Either failing fails the test.
func returnsWhileBlocked(t *testing.T, b *blockedRead, check func() error, what string, op func() error) {
	t.Helper()
	b.armed.Store(true)
	checked := make(chan error, 1)
	go func() { checked <- check() }()
	wait.For(t, "the first-use check to reach its read", func() bool { return closed(b.blocked) })
	done := make(chan error, 1)
	go func() { done <- op() }()
	if err := received(t, done, 10*time.Second, what+" while a first-use check reads"); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b.unblock()
	if err := <-checked; err != nil {
		t.Fatalf("the check: %v", err)
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// reopenedLog writes a log of several segments whose records are a minute
// old, closes it and opens it again through b: its sealed segments' indexes
// and max timestamps are then loaded and checked at first use.
func reopenedLog(t *testing.T, b *blockedRead, cfg Config) *Log {
	t.Helper()
	return reopen(t, writtenLog(t, cfg, 60), b, cfg)
}

// writtenLog returns the files of a closed log of count batches of two
// records a minute old.
func writtenLog(t *testing.T, cfg Config, count int) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	l := openLog(t, mem, cfg)
	ts := cfg.Now().Add(-time.Minute).UnixMilli()
	appendN(t, l, count, 2, 30, ts, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

func reopen(t *testing.T, fsys vfs.FS, b *blockedRead, cfg Config) *Log {
	t.Helper()
	l := openLog(t, vfs.NewErrorFS(fsys, b), cfg)
	// Before l's Close (cleanups run last first): a read still held would
	// keep a lock Close needs.
	t.Cleanup(b.unblock)
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	return l
}

// TestFirstUseCheckDoesNotBlockAppends: the first check of an old segment's
// max timestamp reads its index files (and may rebuild them from the log);
// retention by time, compaction with a lag and a truncation into the segment
// make it before they take the append lock, so an append does not wait for
// that I/O. It used to: the check ran under the append lock.
func TestFirstUseCheckDoesNotBlockAppends(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100, RetentionAge: 24 * time.Hour, Now: clk.Now}
	for name, check := range map[string]func(l *Log) error{
		"retention": func(l *Log) error {
			_, err := l.EnforceRetention(l.LogEndOffset())
			return err
		},
		// Into the oldest segment, whose indexes the cut loads and checks
		// first; offset 5 is in the batch of offsets 4 and 5.
		"truncation": func(l *Log) error {
			if err := l.Truncate(5); err != nil {
				return err
			}
			if leo := l.LogEndOffset(); leo != 4 {
				return fmt.Errorf("log end offset %d after the truncation, want 4", leo)
			}
			return nil
		},
		"compaction lag": func(l *Log) error {
			opts := DefaultCompactOptions()
			opts.MinCompactionLag = time.Hour
			_, err := l.Compact(l.LogEndOffset(), opts)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBlockedRead(filepath.Join(testDir, segmentName(0, indexSuffix)))
			l := reopenedLog(t, b, cfg)
			returnsWhileBlocked(t, b, func() error { return check(l) }, "an append", func() error {
				_, err := l.Append(mkBatch(2, 30, clk.Now().UnixMilli()), 1)
				return err
			})
		})
	}
}

// TestMaxTimestampCheckDoesNotBlockReaders: while the first check of a
// segment's max timestamp reads the log, a read of that segment whose indexes
// are loaded goes on. It used to wait: the check held the segment's mutex.
func TestMaxTimestampCheckDoesNotBlockReaders(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100, Now: clk.Now}
	b := newBlockedRead(filepath.Join(testDir, segmentName(0, logSuffix)))
	l := reopenedLog(t, b, cfg)
	read := func() error {
		c, err := l.Read(0, 1, l.LogEndOffset())
		if err == nil {
			c.Release()
		}
		return err
	}
	if err := read(); err != nil { // loads segment 0's indexes
		t.Fatal(err)
	}
	maxTimestamp := func() error {
		_, _, err := l.MaxTimestamp(anyRecord)
		return err
	}
	returnsWhileBlocked(t, b, maxTimestamp, "a read", read)
}

// TestActiveIndexEntryRebuildWithAppends: an entry of the active segment's
// index file that points into a batch is found when a read first picks it
// after a restart, and the indexes are rebuilt from the log. An append made
// while the rebuild reads goes on (it used to wait: the check held the
// segment's mutex, which the appender takes to index), and the rebuild, which
// cannot install indexes that miss that append, is made again under the
// mutex: the max timestamp is then the appended batch's.
func TestActiveIndexEntryRebuildWithAppends(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100, Now: clk.Now}
	l, b, off := damagedActiveIndex(t, cfg)
	want, segments := readAll(t, l), l.NumSegments()
	appended := mkBatch(2, 30, clk.Now().UnixMilli())
	returnsWhileBlocked(t, b, func() error { return readFrom(l, off) }, "an append", func() error {
		info, err := l.Append(appended, 1)
		if err == nil && (info.FirstOffset != l.LogEndOffset()-2 || l.NumSegments() != segments) {
			err = fmt.Errorf("appended at %d, log end %d, %d segments", info.FirstOffset, l.LogEndOffset(), l.NumSegments())
		}
		return err
	})
	sameBatches(t, readAll(t, l), append(want, appended))
	// The appended batch's second record holds the log's newest timestamp.
	newest, ts := l.LogEndOffset()-1, clk.Now().UnixMilli()+1
	if o, t1, err := l.MaxTimestamp(anyRecord); err != nil || o != newest || t1 != ts {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want %d, %d", o, t1, err, newest, ts)
	}
}

// damagedActiveIndex writes a log of several segments whose active segment has
// room for one more batch, damages that segment's .index file (its third entry
// points one byte into a batch: it still decodes) and opens the log again,
// through b, which holds the first read of more than a batch header from the
// active segment's log once armed (a rebuild's scan; a check reads headers
// alone). It returns the log, b, and an offset whose lookup picks the damaged
// entry.
func damagedActiveIndex(t *testing.T, cfg Config) (*Log, *blockedRead, int64) {
	t.Helper()
	mem := writtenLog(t, cfg, 55)
	active := lastSegment(t, mem)
	idxPath := strings.TrimSuffix(active, logSuffix) + indexSuffix
	idx, err := vfs.ReadFile(mem, idxPath)
	if err != nil || len(idx) < 3*indexEntrySize {
		t.Fatalf("%s: %d bytes, %v; want 3 entries at least", idxPath, len(idx), err)
	}
	// Entry 2 now points one byte past entry 1's batch start: still increasing.
	f, err := mem.OpenReadWrite(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	damagedPos := binary.BigEndian.Uint32(idx[indexEntrySize+4:]) + 1
	if _, err := f.WriteAt(binary.BigEndian.AppendUint32(nil, damagedPos), 2*indexEntrySize+4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	base, _ := parseSegmentName(filepath.Base(active))
	b := newBlockedRead(active)
	b.minLen = batch.HeaderSize
	return reopen(t, mem, b, cfg), b, base + int64(binary.BigEndian.Uint32(idx[2*indexEntrySize:]))
}

// readFrom reads the log from off and checks that the chunk starts there.
func readFrom(l *Log, off int64) error {
	c, err := l.Read(off, 1<<20, l.LogEndOffset())
	if err != nil {
		return err
	}
	defer c.Release()
	if c.FirstOffset > off {
		return fmt.Errorf("read from %d starts at %d", off, c.FirstOffset)
	}
	return nil
}

// TestActiveRebuildCoversIndexedAppend: a rebuild of the active segment's
// indexes that an append overtook (TestActiveIndexEntryRebuildWithAppends) is
// made again under the segment's mutex up to the end of the batches the
// appender indexed, which it does before it publishes the segment's new size.
// It used to scan up to that size, read under the segment's mutex alone,
// which the appender does not hold to write it (a data race): a rebuild
// between an append's indexing and its publication dropped the appended batch
// from the indexes, and the segment's max timestamp missed it.
func TestActiveRebuildCoversIndexedAppend(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100, Now: clk.Now}
	l, b, off := damagedActiveIndex(t, cfg)
	segs := l.segmentList()
	active, segments := segs[len(segs)-1], len(segs)

	b.armed.Store(true)
	read := make(chan error, 1)
	go func() { read <- readFrom(l, off) }()
	wait.For(t, "the rebuild to reach its read", func() bool { return closed(b.blocked) })
	// Holding the log's view, the append indexes its batch and then waits to
	// publish the segment's new size.
	l.mu.RLock()
	var unlock sync.Once
	release := func() { unlock.Do(l.mu.RUnlock) }
	t.Cleanup(release)
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(mkBatch(2, 30, clk.Now().UnixMilli()), 1)
		appended <- err
	}()
	wait.For(t, "the append to index its batch", func() bool {
		_, written := active.emptyIndexes()
		return written
	})
	b.unblock()
	if err := received(t, read, wait.DefaultTimeout, "the read to return"); err != nil {
		t.Fatalf("read: %v", err)
	}
	release()
	if err := received(t, appended, wait.DefaultTimeout, "the append to return"); err != nil {
		t.Fatalf("append: %v", err)
	}
	if l.NumSegments() != segments {
		t.Fatalf("the append rolled: %d segments, want %d", l.NumSegments(), segments)
	}
	// The appended batch's second record holds the log's newest timestamp.
	newest, ts := l.LogEndOffset()-1, clk.Now().UnixMilli()+1
	if o, t1, err := l.MaxTimestamp(anyRecord); err != nil || o != newest || t1 != ts {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want %d, %d", o, t1, err, newest, ts)
	}
}

// received returns what c delivers, failing the test if nothing comes within
// timeout.
func received[T any](t *testing.T, c <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	var v T
	wait.Within(t, timeout, what, func() bool {
		select {
		case v = <-c:
			return true
		default:
			return false
		}
	})
	return v
}
