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

// crashAtEachOp runs op on the log in a copy of base once per filesystem
// operation op makes, cutting the power before that operation (unsynced
// writes torn at random), and hands check each image with a description of
// the operation it was cut before. It returns how many operations op made.
func crashAtEachOp(t *testing.T, base *vfs.MemFS, cfg Config, op func(*Log) error, check func(img *vfs.MemFS, what string)) int {
	t.Helper()
	for n := int64(0); ; n++ {
		mem := base.CrashClone()
		var armed atomic.Bool
		var mu sync.Mutex
		var img *vfs.MemFS
		var at vfs.Op
		fsys := countingFS(mem, &armed, func(i int64, o vfs.Op) error {
			if i == n {
				mu.Lock()
				img, at = mem.CrashClone(vfs.WithTornWrites(uint64(n))), o
				mu.Unlock()
			}
			return nil
		})
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		armed.Store(true)
		err = op(l)
		armed.Store(false)
		l.Close()
		if err != nil {
			t.Fatalf("op: %v", err)
		}
		mu.Lock()
		c := img
		mu.Unlock()
		if c == nil {
			return int(n)
		}
		check(c, fmt.Sprintf("power cut before op %d (%v %s)", n, at.Kind, filepath.Base(at.Path)))
	}
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
