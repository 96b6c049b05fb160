package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestFileConformanceOS(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) remote.Store {
		s, err := remote.Open("file://"+t.TempDir()+"/objects", vfs.Default)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestFileConformanceMem(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) remote.Store {
		s, err := remote.NewFile(vfs.NewMem(), "/objects")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A power cut keeps every object whose Put returned and never a partial one.
func TestFilePutSurvivesPowerCut(t *testing.T) {
	mem := vfs.NewMem()
	s, err := remote.NewFile(mem, "/objects")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "t/0/a", strings.NewReader("durable"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "t/0/b", strings.NewReader("torn"), 10); err == nil {
		t.Fatal("short put succeeded")
	}
	crashed := mem.CrashClone()
	s2, err := remote.NewFile(crashed, "/objects")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(ctx, "t/0/a", 0, -1)
	if err != nil || string(got) != "durable" {
		t.Fatalf("after power cut: %q, %v", got, err)
	}
	keys, err := s2.List(ctx, "")
	if err != nil || len(keys) != 1 {
		t.Fatalf("after power cut: keys %v, %v", keys, err)
	}
}

// I/O failures are reported as ErrUnavailable (retriable), and a failed Put
// leaves no object.
func TestFileErrorsAreUnavailable(t *testing.T) {
	sync := vfs.FailOn(vfs.OpSync)
	sync.Disable()
	read := vfs.FailOn(vfs.OpRead)
	read.Disable()
	s, err := remote.NewFile(vfs.NewErrorFS(vfs.NewMem(), vfs.Any(sync, read)), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	sync.Enable()
	if err := s.Put(ctx, "j", strings.NewReader("y"), 1); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("put with failing fsync: %v, want ErrUnavailable", err)
	}
	sync.Disable()
	if _, err := s.Get(ctx, "j", 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("failed put left an object: %v", err)
	}
	read.Enable()
	if _, err := s.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("get with failing reads: %v, want ErrUnavailable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cctx, "k", strings.NewReader("x"), 1); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("put with a dead context: %v, want ErrUnavailable", err)
	}
}

func TestOpenURLs(t *testing.T) {
	for _, u := range []string{"s4://bucket", "file://host/x", "file:relative", "::"} {
		if _, err := remote.Open(u, vfs.NewMem()); !errors.Is(err, remote.ErrUnsupportedURL) {
			t.Errorf("Open(%q): %v, want ErrUnsupportedURL", u, err)
		}
	}
	if _, err := remote.Open("file:///objects", vfs.NewMem()); err != nil {
		t.Errorf("Open(file:///objects): %v", err)
	}
}

// PutUnsynced objects are visible at once and survive a power cut, whole, once
// SyncNames covered them: with one syncfs and no fsync where the filesystem
// has syncfs, else with an fsync of each object and of its directory.
func TestFilePutUnsyncedDurableAfterSyncNames(t *testing.T) {
	for _, tc := range []struct {
		name        string
		syncFS      bool
		wantSyncs   int // file fsyncs of the two SyncNames calls
		wantDirs    int // directory fsyncs of the two calls
		wantSyncFSs int
	}{
		{"syncfs", true, 0, 0, 2},
		{"fsync each", false, 3, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var counting atomic.Bool
			var syncs, dirs, syncFSs atomic.Int64
			fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
				if !tc.syncFS && op.Kind == vfs.OpSyncFS {
					return errors.ErrUnsupported
				}
				if counting.Load() {
					switch op.Kind {
					case vfs.OpSync:
						syncs.Add(1)
					case vfs.OpSyncDir:
						dirs.Add(1)
					case vfs.OpSyncFS:
						syncFSs.Add(1)
					}
				}
				return nil
			}))
			s, err := remote.NewFile(fsys, "/objects")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			body := func(key string) string { return strings.Repeat("bytes of "+key, 1000) }
			for _, dir := range []string{"/objects/t/0", "/objects/t/1"} { // not counted
				if err := vfs.MkdirAllDurable(mem, dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			counting.Store(true)
			for _, key := range []string{"t/0/a", "t/0/b", "t/1/c"} {
				if err := s.PutUnsynced(ctx, key, strings.NewReader(body(key)), int64(len(body(key)))); err != nil {
					t.Fatal(err)
				}
				if got, err := s.Get(ctx, key, 0, -1); err != nil || string(got) != body(key) {
					t.Fatalf("Get(%s) after PutUnsynced = %.20q, %v", key, got, err)
				}
			}
			if n := syncs.Load() + dirs.Load() + syncFSs.Load(); n != 0 {
				t.Fatalf("PutUnsynced synced %d times, want 0", n)
			}
			keysAfterCrash := func() []string {
				t.Helper()
				s2, err := remote.NewFile(mem.CrashClone(), "/objects")
				if err != nil {
					t.Fatal(err)
				}
				keys, err := s2.List(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				return keys
			}
			if keys := keysAfterCrash(); len(keys) != 0 {
				t.Fatalf("unsynced objects survived a power cut: %v", keys)
			}
			if err := s.SyncNames(ctx, "t/0/a", "t/0/b"); err != nil {
				t.Fatal(err)
			}
			if keys := keysAfterCrash(); !slices.Contains(keys, "t/0/a") || !slices.Contains(keys, "t/0/b") {
				t.Fatalf("after SyncNames of t/0/a and t/0/b and a power cut: %v", keys)
			}
			if err := s.SyncNames(ctx, "t/1/c"); err != nil {
				t.Fatal(err)
			}
			img, err := remote.NewFile(mem.CrashClone(), "/objects")
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"t/0/a", "t/0/b", "t/1/c"} {
				if got, err := img.Get(ctx, key, 0, -1); err != nil || string(got) != body(key) {
					t.Fatalf("after SyncNames and a power cut %s holds %.20q, %v", key, got, err)
				}
			}
			if syncs.Load() != int64(tc.wantSyncs) || dirs.Load() != int64(tc.wantDirs) || syncFSs.Load() != int64(tc.wantSyncFSs) {
				t.Fatalf("SyncNames: %d file fsyncs, %d directory fsyncs, %d syncfs; want %d, %d, %d",
					syncs.Load(), dirs.Load(), syncFSs.Load(), tc.wantSyncs, tc.wantDirs, tc.wantSyncFSs)
			}
			if err := s.SyncNames(ctx, "../x"); !errors.Is(err, remote.ErrInvalidKey) {
				t.Fatalf("SyncNames of a bad key: %v", err)
			}
		})
	}
}

// A small object (a manifest, a block index) is copied through a buffer of its
// own size, not the pooled 1 MiB one: after a collection emptied the pool, a
// put of 300 bytes allocated a new 1 MiB on the old code.
func TestFileSmallPutAllocates(t *testing.T) {
	s, err := remote.NewFile(vfs.NewMem(), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := bytes.Repeat([]byte("m"), 300)
	const puts = 20
	var before, after runtime.MemStats
	var allocated uint64
	for i := range puts {
		runtime.GC() // twice: sync.Pool keeps a victim cache for one cycle
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := s.Put(ctx, fmt.Sprintf("t/0/m-%d", i), bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		allocated += after.TotalAlloc - before.TotalAlloc
	}
	if per := allocated / puts; per > 64<<10 {
		t.Fatalf("a put of %d bytes allocated %d bytes, want well under the 1 MiB copy buffer", len(data), per)
	}
}

// RemoveIncomplete removes the temporary files of interrupted Puts under the
// prefix (a crash leaves them; List never shows them) last written before the
// time given, all of them for a zero time, and nothing else.
func TestFileRemoveIncomplete(t *testing.T) {
	mem := vfs.NewMem()
	s, err := remote.NewFile(mem, "/objects")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"t/0/a", "t/0/sub/c", "t/1/b"} {
		if err := s.Put(ctx, key, strings.NewReader("object"), 6); err != nil {
			t.Fatal(err)
		}
	}
	temps := []string{"/objects/t/0/a.tmp-9", "/objects/t/0/sub/c.tmp-3", "/objects/t/1/b.tmp-4"}
	for _, p := range temps {
		f, err := mem.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	left := func() []string {
		t.Helper()
		var out []string
		for _, p := range temps {
			if _, err := mem.Stat(p); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	written := time.Now()
	for _, tc := range []struct {
		prefix   string
		before   time.Time
		wantKept int
		wantLeft []string
	}{
		{"t/0/", written.Add(-time.Hour), 2, temps},
		{"t/0/", written.Add(time.Hour), 0, temps[2:]},
		{"t/1/", time.Time{}, 0, nil},
	} {
		kept, err := s.RemoveIncomplete(ctx, tc.prefix, tc.before)
		if err != nil || kept != tc.wantKept || !slices.Equal(left(), tc.wantLeft) {
			t.Fatalf("RemoveIncomplete(%q, %v): kept %d, %v; left %v, want kept %d, left %v",
				tc.prefix, tc.before, kept, err, left(), tc.wantKept, tc.wantLeft)
		}
	}
	if keys, err := s.List(ctx, ""); err != nil || !slices.Equal(keys, []string{"t/0/a", "t/0/sub/c", "t/1/b"}) {
		t.Fatalf("objects after RemoveIncomplete: %v, %v", keys, err)
	}
}
