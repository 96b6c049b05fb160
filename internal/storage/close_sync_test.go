package storage

import (
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestCloseSyncsOnlyWhatChanged counts the segment fsyncs a clean shutdown
// makes: none for a log whose active segment no fsync has missed (a broker
// of 10,000 idle partitions made 10,000 of them one after another, 16-50 s
// at shutdown on this machine), one for a log with changes no fsync covered
// yet.
func TestCloseSyncsOnlyWhatChanged(t *testing.T) {
	interval := FlushPolicy{Mode: Interval} // no trigger: only Close syncs
	for _, tc := range []struct {
		name  string
		flush FlushPolicy
		setup func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log
		want  int64
	}{
		{"new empty log", FlushPolicy{}, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			return openLog(t, fsys, cfg)
		}, 0},
		{"appends made durable", FlushPolicy{}, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			l := openLog(t, fsys, cfg)
			appendN(t, l, 3, 2, 30, 500, 1)
			if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}
			return l
		}, 0},
		{"truncated after a flush (the cut is synced)", FlushPolicy{}, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			l := openLog(t, fsys, cfg)
			appendN(t, l, 3, 2, 30, 500, 1)
			if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}
			if err := l.Truncate(2); err != nil {
				t.Fatal(err)
			}
			return l
		}, 0},
		{"reopened after a clean shutdown", FlushPolicy{}, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			l := openLog(t, fsys, cfg)
			appendN(t, l, 3, 2, 30, 500, 1)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			return openLog(t, fsys, cfg)
		}, 0},
		{"appends not yet synced", interval, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			l := openLog(t, fsys, cfg)
			appendN(t, l, 3, 2, 30, 500, 1)
			return l
		}, 1},
		{"recovered after a process crash, tail in the page cache only", interval, func(t *testing.T, fsys *vfs.MemFS, cfg Config, arm func()) *Log {
			l := openLog(t, fsys, cfg)
			appendN(t, l, 3, 2, 30, 500, 1)
			// The crashed process's files as the next one finds them: every
			// byte written, nothing synced, no clean-shutdown marker. The
			// open kicks the flusher, which may sync the tail before Close
			// does: counted from the open, it is synced exactly once.
			crashed := unsyncedCopy(t, fsys, testDir)
			arm()
			return openLog(t, crashed, cfg)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var syncs atomic.Int64
			var armed atomic.Bool
			cfg := Config{Flush: tc.flush, OnSync: func(time.Duration, error) {
				if armed.Load() {
					syncs.Add(1)
				}
			}}
			l := tc.setup(t, vfs.NewMem(), cfg, func() { armed.Store(true) })
			armed.Store(true)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := syncs.Load(); got != tc.want {
				t.Fatalf("%d segment fsyncs, want %d", got, tc.want)
			}
		})
	}
}

// unsyncedCopy copies dir's files into a new MemFS by writes no fsync covers.
func unsyncedCopy(t *testing.T, src *vfs.MemFS, dir string) *vfs.MemFS {
	t.Helper()
	dst := vfs.NewMem()
	if err := dst.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := src.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		from, err := src.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		size, err := from.Size()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		if _, err := from.ReadAt(b, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		from.Close()
		to, err := dst.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		to.Close()
	}
	return dst
}
