package storage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

const testDir = "/data/topic-0"

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testIndexBytes keeps preallocated index files small: MemFS holds them in memory.
const testIndexBytes = 64 << 10

// openLog opens a log and closes it at the end of the test if still open. Unless
// set, IndexMaxBytes is testIndexBytes.
func openLog(t testing.TB, fsys vfs.FS, cfg Config) *Log {
	t.Helper()
	if cfg.IndexMaxBytes == 0 {
		cfg.IndexMaxBytes = testIndexBytes
	}
	l, err := Open(fsys, testDir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// mkBatch builds a batch of n records with size-byte values and timestamps
// ts, ts+1, ...
func mkBatch(n, size int, ts int64) []byte {
	return batchtest.Build(batchtest.Options{FirstTimestamp: ts, Records: batchtest.Values(n, size)})
}

// appendN appends count batches of n records and returns the stored bytes of each
// (as stamped by the log).
func appendN(t testing.TB, l *Log, count, n, size int, ts int64, epoch int32) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range count {
		b := mkBatch(n, size, ts+int64(i))
		if _, err := l.Append(b, epoch); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, b)
	}
	return out
}

// fataler is the part of testing.TB (and rapid.T) the helpers need.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// readAll reads the whole log from its start through Read and returns its batches.
func readAll(t fataler, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		c, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := c.Bytes()
		c.Release()
		if err != nil {
			t.Fatalf("Chunk.Bytes: %v", err)
		}
		if len(b) == 0 {
			break // only compaction gaps up to the log end (callers compare contents)
		}
		it := batch.NewStoredIter(b)
		for it.Next() {
			out = append(out, bytes.Clone(it.Batch()))
		}
		if it.Err() != nil {
			t.Fatalf("chunk at %d: %v", off, it.Err())
		}
		off = c.NextOffset
	}
	return out
}

// sameBatches fails unless got and want hold the same batches byte for byte.
func sameBatches(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			h1, _ := batch.ParseHeader(got[i])
			h2, _ := batch.ParseHeader(want[i])
			t.Fatalf("batch %d differs: got %+v want %+v", i, h1, h2)
		}
	}
}

func ctxTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// crashPoint is an injector that counts the filesystem operations made while
// it is armed and, just before operation number at, takes a power-cut image
// of mem (unsynced writes torn at random).
type crashPoint struct {
	mem   *vfs.MemFS
	fs    vfs.FS // mem through the injector
	at    int64
	armed atomic.Bool
	ops   atomic.Int64

	mu   sync.Mutex
	img  *vfs.MemFS // nil until operation at is made
	what string     // the operation img was taken before
}

func newCrashPoint(mem *vfs.MemFS, at int64) *crashPoint {
	c := &crashPoint{mem: mem, at: at}
	c.fs = vfs.NewErrorFS(mem, c)
	return c
}

func (c *crashPoint) MaybeError(op vfs.Op) error {
	if !c.armed.Load() || c.ops.Add(1)-1 != c.at {
		return nil
	}
	img := c.mem.CrashClone(vfs.WithTornWrites(uint64(c.at)))
	c.mu.Lock()
	c.img, c.what = img, fmt.Sprintf("power cut before op %d (%v %s)", c.at, op.Kind, filepath.Base(op.Path))
	c.mu.Unlock()
	return nil
}

// image returns the power-cut image, nil if operation at was never made, and
// a description of the cut.
func (c *crashPoint) image() (*vfs.MemFS, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img, c.what
}

// crashAtEachOp calls run once per every-th filesystem operation run makes
// through c.fs while c is armed, each time on a fresh copy of base with the
// power cut before that operation, and then check with the image, until a run
// makes fewer operations. It returns how many images it checked.
func crashAtEachOp(t *testing.T, base *vfs.MemFS, every int64, run func(c *crashPoint), check func(c *crashPoint, img *vfs.MemFS, what string)) int {
	t.Helper()
	for n := int64(0); ; n++ {
		c := newCrashPoint(base.CrashClone(), n*every)
		run(c)
		img, what := c.image()
		if img == nil {
			return int(n)
		}
		check(c, img, what)
	}
}

// crashAtEachLogOp is crashAtEachOp for op on the log in base: the log is
// opened before the power cut is armed and closed after op.
func crashAtEachLogOp(t *testing.T, base *vfs.MemFS, cfg Config, op func(*Log) error, check func(img *vfs.MemFS, what string)) int {
	t.Helper()
	return crashAtEachOp(t, base, 1, func(c *crashPoint) {
		l, err := Open(c.fs, testDir, cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		c.armed.Store(true)
		err = op(l)
		c.armed.Store(false)
		l.Close()
		if err != nil {
			t.Fatalf("op: %v", err)
		}
	}, func(_ *crashPoint, img *vfs.MemFS, what string) { check(img, what) })
}

// crashAtEachOpen is crashAtEachOp for opening the log in base (a recovery),
// checking it with opened, and closing it: opened checks the log each whole
// Open gave, check each power-cut image.
func crashAtEachOpen(t *testing.T, base *vfs.MemFS, cfg Config, opened func(*Log), check func(img *vfs.MemFS, what string)) int {
	t.Helper()
	return crashAtEachOp(t, base, 1, func(c *crashPoint) {
		c.armed.Store(true)
		l, err := Open(c.fs, testDir, cfg)
		if err != nil {
			t.Fatalf("recovering Open: %v", err)
		}
		opened(l)
		l.Close()
	}, func(_ *crashPoint, img *vfs.MemFS, what string) { check(img, what) })
}

// prefixOf reports whether got is want's first len(got) batches.
func prefixOf(got, want [][]byte) bool {
	return len(got) <= len(want) && slices.EqualFunc(got, want[:len(got)], bytes.Equal)
}

// baseOffsets returns the base offsets of batches, for failure messages.
func baseOffsets(batches [][]byte) []int64 {
	var offs []int64
	for _, b := range batches {
		h, _ := batch.ParseHeader(b)
		offs = append(offs, h.BaseOffset)
	}
	return offs
}
