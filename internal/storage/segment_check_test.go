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
	var err error
	wait.Within(t, 10*time.Second, what+" while a first-use check reads", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err != nil {
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
// retention by time and compaction with a lag make it before they take the
// append lock, so an append does not wait for that I/O. It used to: the
// check ran under the append lock.
func TestFirstUseCheckDoesNotBlockAppends(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100, RetentionAge: 24 * time.Hour, Now: clk.Now}
	for name, check := range map[string]func(l *Log) error{
		"retention": func(l *Log) error {
			_, err := l.EnforceRetention(l.LogEndOffset())
			return err
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
		_, _, err := l.MaxTimestamp()
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
	mem := writtenLog(t, cfg, 55) // the active segment has room for one more
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
	off := base + int64(binary.BigEndian.Uint32(idx[2*indexEntrySize:]))

	// The rebuild's scan reads more than a batch header at once.
	b := newBlockedRead(active)
	b.minLen = batch.HeaderSize
	l := reopen(t, mem, b, cfg)
	want, segments := readAll(t, l), l.NumSegments()
	read := func() error {
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
	appended := mkBatch(2, 30, clk.Now().UnixMilli())
	returnsWhileBlocked(t, b, read, "an append", func() error {
		info, err := l.Append(appended, 1)
		if err == nil && (info.FirstOffset != l.LogEndOffset()-2 || l.NumSegments() != segments) {
			err = fmt.Errorf("appended at %d, log end %d, %d segments", info.FirstOffset, l.LogEndOffset(), l.NumSegments())
		}
		return err
	})
	sameBatches(t, readAll(t, l), append(want, appended))
	// The appended batch's second record holds the log's newest timestamp.
	newest, ts := l.LogEndOffset()-1, clk.Now().UnixMilli()+1
	if o, t1, err := l.MaxTimestamp(); err != nil || o != newest || t1 != ts {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want %d, %d", o, t1, err, newest, ts)
	}
}
