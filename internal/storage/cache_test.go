package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// dropFS hands out files whose DropCache calls it records, over any FS.
type dropFS struct {
	vfs.FS
	mu    sync.Mutex
	drops map[string][][2]int64 // file name -> [off, end) of each DropCache
}

func newDropFS(inner vfs.FS) *dropFS {
	return &dropFS{FS: inner, drops: map[string][][2]int64{}}
}

func (f *dropFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return dropFile{File: file, fs: f}, nil
}

func (f *dropFS) Create(name string) (vfs.File, error) { return f.wrap(f.FS.Create(name)) }
func (f *dropFS) Open(name string) (vfs.File, error)   { return f.wrap(f.FS.Open(name)) }
func (f *dropFS) OpenReadWrite(name string) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name))
}

// dropped returns the ranges dropped from name so far.
func (f *dropFS) dropped(name string) [][2]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]int64(nil), f.drops[name]...)
}

type dropFile struct {
	vfs.File
	fs *dropFS
}

func (f dropFile) DropCache(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.drops[f.Name()] = append(f.fs.drops[f.Name()], [2]int64{off, off + n})
	return nil
}

// appendDurable appends batches of 16 records of 1000 bytes (about 16 KiB each)
// until the log's active segment is at least size bytes, waiting for each to be
// durable, and returns the segment's size.
func appendDurable(t *testing.T, l *Log, size int64) int64 {
	t.Helper()
	return appendDurableBatches(t, l, size, 16)
}

// appendDurableBatches is appendDurable with batches of records records.
func appendDurableBatches(t *testing.T, l *Log, size int64, records int) int64 {
	t.Helper()
	for i := 0; activeSize(l) < size; i++ {
		info, err := l.Append(mkBatch(records, 1000, int64(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	return activeSize(l)
}

func activeSize(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().size
}

// TestFlushDropsDurableBytesButTheTail: after its fsyncs a log has advised the
// page cache to drop every durable byte of its active segment but the newest
// CacheTailBytes, in whole pages, each byte once, never a byte no fsync covered;
// with CacheTailBytes negative it drops nothing; after a truncation the drops
// start again from the truncated end.
func TestFlushDropsDurableBytesButTheTail(t *testing.T) {
	const tail = 256 << 10
	seg := filepath.Join(testDir, segmentName(0, logSuffix))
	for _, tc := range []struct {
		name string
		tail int64
	}{
		{"tail", tail},
		{"default tail", 0},
		{"off", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newDropFS(vfs.NewMem())
			l := openLog(t, fsys, Config{CacheTailBytes: tc.tail})
			size := appendDurable(t, l, 4<<20)
			keep := tc.tail
			if keep == 0 {
				keep = DefaultCacheTailBytes
			}
			if keep < 0 || keep > size {
				// The flusher drops after it wakes the waiters: give it its turn.
				appendDurable(t, l, size+minCacheDrop)
				if got := fsys.dropped(seg); len(got) != 0 {
					t.Fatalf("dropped %v with %d bytes written and a tail of %d", got, size, tc.tail)
				}
				return
			}
			want := (size - keep - minCacheDrop) / pageSize * pageSize
			wait.For(t, fmt.Sprintf("drops to reach %d", want), func() bool {
				got := fsys.dropped(seg)
				return len(got) > 0 && got[len(got)-1][1] >= want
			})
			checkDrops(t, fsys.dropped(seg), 0, activeSize(l)-keep)

			// Truncated below what was dropped, the file's end is written again:
			// the drops go on from the truncation (or below it: dropping a page
			// twice is harmless).
			before := len(fsys.dropped(seg))
			if err := l.Truncate(l.LogEndOffset() / 4); err != nil {
				t.Fatal(err)
			}
			from := activeSize(l) / pageSize * pageSize
			appendDurable(t, l, size+2*minCacheDrop)
			wait.For(t, "drops after the truncation", func() bool {
				got := fsys.dropped(seg)
				return len(got) > before && got[len(got)-1][1] >= (activeSize(l)-keep-minCacheDrop)/pageSize*pageSize
			})
			checkDrops(t, fsys.dropped(seg)[before:], from, activeSize(l)-keep)
		})
	}
}

// checkDrops fails unless drops are page-aligned and each reaches back
// maxFolioBytes into the one before (or to the file's start), the first
// starting at or below from, and end at or below limit.
func checkDrops(t *testing.T, drops [][2]int64, from, limit int64) {
	t.Helper()
	if drops[0][0] > from {
		t.Fatalf("drops start at %d, past %d: %v", drops[0][0], from, drops)
	}
	next := drops[0][0]
	for i, d := range drops {
		want := max(next-maxFolioBytes, 0)
		if i == 0 {
			want = d[0]
		}
		if d[0] != want || d[0]%pageSize != 0 || d[1]%pageSize != 0 || d[1] <= next {
			t.Fatalf("drop %v after %d: want page-aligned ranges from %d past the last (all: %v)", d, next, want, drops)
		}
		next = d[1]
	}
	if next > limit {
		t.Fatalf("dropped up to %d, beyond the durable bytes but the tail (%d): %v", next, limit, drops)
	}
}

// TestFlushDropsRolledSegment: a rolled segment's cached end is dropped once
// the next segment's drops begin, and not before.
func TestFlushDropsRolledSegment(t *testing.T) {
	const tail, segBytes = 256 << 10, 4 << 20
	fsys := newDropFS(vfs.NewMem())
	l := openLog(t, fsys, Config{CacheTailBytes: tail, SegmentBytes: segBytes})
	first := filepath.Join(testDir, segmentName(0, logSuffix))
	for i := 0; l.NumSegments() < 2; i++ {
		info, err := l.Append(mkBatch(16, 1000, int64(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	rolled := fsys.dropped(first)
	if len(rolled) == 0 {
		t.Fatal("the first segment was never dropped from while active")
	}
	l.mu.RLock()
	firstSize := l.mu.segments[0].size
	l.mu.RUnlock()
	if end := rolled[len(rolled)-1][1]; end > firstSize-tail {
		t.Fatalf("the first segment was dropped up to %d while it held the tail (size %d)", end, firstSize)
	}
	appendDurable(t, l, tail+2*minCacheDrop)
	wait.For(t, "the rolled segment's end to be dropped", func() bool {
		got := fsys.dropped(first)
		return len(got) > len(rolled) && got[len(got)-1][1] >= firstSize
	})
	checkDrops(t, fsys.dropped(first), 0, (firstSize+pageSize-1)/pageSize*pageSize)
}
