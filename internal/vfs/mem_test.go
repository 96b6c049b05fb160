package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"

	"pgregory.net/rapid"
)

// snapshot returns every path below the root of m: directories as "path/" with an
// empty value, files with their contents.
func snapshot(t *testing.T, m *MemFS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		if strings.Count(dir, "/") > 20 {
			t.Fatalf("directory cycle at %s", dir)
		}
		for _, name := range list(t, m, dir) {
			p := path.Join(dir, name)
			fi, err := m.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = readFile(t, m, p)
		}
	}
	walk("/")
	return out
}

// durableDir makes /d and syncs the root so that /d survives a crash.
func durableDir(t *testing.T, m *MemFS) {
	t.Helper()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/")
}

func syncDir(t *testing.T, m FS, dir string) {
	t.Helper()
	if err := m.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, m FS, from, to string) {
	t.Helper()
	if err := m.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func TestMemCrash(t *testing.T) {
	cases := []struct {
		name string
		// run works on a MemFS that already holds a durable, empty /d.
		run  func(t *testing.T, m *MemFS)
		want map[string]string
	}{
		{
			name: "synced data and name survive",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "synced")
				syncDir(t, m, "/d")
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "unsynced data is lost",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "synced")
				syncDir(t, m, "/d")
				f, err := m.OpenReadWrite("/d/f")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte(" and more"), 6); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("S"), 0); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "synced file vanishes without SyncDir",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "synced")
			},
			want: map[string]string{},
		},
		{
			name: "dir-synced but never synced file is empty",
			run: func(t *testing.T, m *MemFS) {
				write(t, create(t, m, "/d/f"), "unsynced")
				syncDir(t, m, "/d")
			},
			want: map[string]string{"/d/f": ""},
		},
		{
			name: "unsynced truncation is undone",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "abcdef")
				syncDir(t, m, "/d")
				f, err := m.OpenReadWrite("/d/f")
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(2); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/f": "abcdef"},
		},
		{
			name: "unsynced re-create keeps the old contents",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "old")
				syncDir(t, m, "/d")
				write(t, create(t, m, "/d/f"), "new")
			},
			want: map[string]string{"/d/f": "old"},
		},
		{
			name: "rename without SyncDir is undone",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "A")
				writeFile(t, m, "/d/b", "B")
				syncDir(t, m, "/d")
				rename(t, m, "/d/a", "/d/b")
			},
			want: map[string]string{"/d/a": "A", "/d/b": "B"},
		},
		{
			name: "rename with SyncDir is kept",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a.tmp", "A")
				writeFile(t, m, "/d/a", "old")
				syncDir(t, m, "/d")
				rename(t, m, "/d/a.tmp", "/d/a")
				syncDir(t, m, "/d")
			},
			want: map[string]string{"/d/a": "A"},
		},
		{
			name: "removal without SyncDir comes back",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "back")
				syncDir(t, m, "/d")
				if err := m.Remove("/d/f"); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/f": "back"},
		},
		{
			name: "removal with SyncDir is kept",
			run: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "gone")
				syncDir(t, m, "/d")
				if err := m.Remove("/d/f"); err != nil {
					t.Fatal(err)
				}
				syncDir(t, m, "/d")
			},
			want: map[string]string{},
		},
		{
			name: "RemoveAll without SyncDir comes back",
			run: func(t *testing.T, m *MemFS) {
				if err := m.MkdirAll("/d/sub", 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, m, "/d/sub/f", "x")
				syncDir(t, m, "/d/sub")
				syncDir(t, m, "/d")
				if err := m.RemoveAll("/d/sub"); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/sub/": "", "/d/sub/f": "x"},
		},
		{
			name: "new directory vanishes without SyncDir of its parent",
			run: func(t *testing.T, m *MemFS) {
				if err := m.MkdirAll("/d/sub", 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, m, "/d/sub/f", "x")
				syncDir(t, m, "/d/sub")
			},
			want: map[string]string{},
		},
		{
			name: "half-synced cross-directory rename leaves the file in both",
			run: func(t *testing.T, m *MemFS) {
				if err := m.MkdirAll("/d/x", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := m.MkdirAll("/d/y", 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, m, "/d/x/f", "F")
				syncDir(t, m, "/d/x")
				syncDir(t, m, "/d")
				rename(t, m, "/d/x/f", "/d/y/f")
				syncDir(t, m, "/d/y")
			},
			want: map[string]string{"/d/x/": "", "/d/y/": "", "/d/x/f": "F", "/d/y/f": "F"},
		},
		{
			name: "half-synced directory moves cannot make a cycle",
			run: func(t *testing.T, m *MemFS) {
				if err := m.MkdirAll("/d/a", 0o755); err != nil {
					t.Fatal(err)
				}
				syncDir(t, m, "/d")
				rename(t, m, "/d/a", "/a")
				rename(t, m, "/d", "/a/d")
				syncDir(t, m, "/a")
			},
			// Durably "/" holds d, d holds a, and a holds d again: the image
			// keeps d where it is met first and drops the entry that closes the cycle.
			want: map[string]string{"/d/a/": ""},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMem()
			durableDir(t, m)
			c.run(t, m)
			before := snapshot(t, m)
			clone := m.CrashClone()
			got := snapshot(t, clone)
			delete(got, "/d/")
			if !maps.Equal(got, c.want) {
				t.Errorf("after crash: %q\nwant %q", got, c.want)
			}
			// The original is untouched and a second crash of the image changes nothing.
			if after := snapshot(t, m); !maps.Equal(after, before) {
				t.Errorf("CrashClone changed the original: %q, was %q", after, before)
			}
			if again := snapshot(t, clone.CrashClone()); !maps.Equal(again, snapshot(t, clone)) {
				t.Errorf("crashing a crash image changed it: %q", again)
			}
		})
	}
}

func TestMemCrashCloneIndependent(t *testing.T) {
	m := NewMem()
	durableDir(t, m)
	f := create(t, m, "/d/f")
	write(t, f, "one")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/d")
	clone := m.CrashClone()

	// Writes to the original after the clone do not reach it, and the reverse.
	write(t, f, " two")
	g, err := clone.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteAt([]byte("ONE"), 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, clone, "/d/new", "x")
	if got := readFile(t, m, "/d/f"); got != "one two" {
		t.Errorf("original = %q", got)
	}
	if got := readFile(t, clone, "/d/f"); got != "ONE" {
		t.Errorf("clone = %q", got)
	}
	if _, err := m.Stat("/d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("clone's new file visible in original: %v", err)
	}
}

func TestMemPowerCut(t *testing.T) {
	m := NewMem()
	durableDir(t, m)
	f := create(t, m, "/d/f")
	write(t, f, "kept")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/d")
	write(t, f, " lost")
	writeFile(t, m, "/d/undurable", "x")

	m.PowerCut()

	_, writeErr := f.Write([]byte("x"))
	_, readErr := f.ReadAt(make([]byte, 1), 0)
	_, sizeErr := f.Size()
	for name, err := range map[string]error{"Write": writeErr, "ReadAt": readErr, "Size": sizeErr, "Sync": f.Sync()} {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s on a pre-crash handle: %v, want ErrCrashed", name, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close on a pre-crash handle: %v", err)
	}
	if got, want := snapshot(t, m), map[string]string{"/d/": "", "/d/f": "kept"}; !maps.Equal(got, want) {
		t.Errorf("after PowerCut: %q, want %q", got, want)
	}
	// The filesystem works normally afterwards.
	writeFile(t, m, "/d/f", "again")
	if got := readFile(t, m, "/d/f"); got != "again" {
		t.Errorf("after rewrite: %q", got)
	}
}

func TestMemTornWrites(t *testing.T) {
	m := NewMem()
	durableDir(t, m)
	f := create(t, m, "/d/log")
	write(t, f, "base|")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/d")
	// Three unsynced appends, a gap between the second and third so they are not merged.
	write(t, f, "first|")
	write(t, f, "second|")
	if _, err := f.WriteAt([]byte("third"), 20); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/d/undurable", "x") // never dir-synced: must vanish even when torn
	volatile := readFile(t, m, "/d/log")

	lengths := map[int]bool{}
	for seed := range uint64(64) {
		clone := m.CrashClone(WithTornWrites(seed))
		got := snapshot(t, clone)
		if _, ok := got["/d/undurable"]; ok {
			t.Fatalf("seed %d: a name never dir-synced survived", seed)
		}
		log := got["/d/log"]
		if !strings.HasPrefix(volatile, log) || len(log) < len("base|") {
			t.Fatalf("seed %d: torn contents %q are not a prefix of %q at least as long as the synced part", seed, log, volatile)
		}
		if again := readFile(t, m.CrashClone(WithTornWrites(seed)), "/d/log"); again != log {
			t.Fatalf("seed %d: not deterministic: %q then %q", seed, log, again)
		}
		lengths[len(log)] = true
	}
	// A gap is zeros only if the write after it survived, so every prefix qualifies;
	// 64 seeds must show the synced-only, complete and torn-in-between outcomes.
	if !lengths[len("base|")] || !lengths[len(volatile)] || len(lengths) < 5 {
		t.Errorf("torn lengths seen %v: want the synced length %d, the full length %d and others",
			lengths, len("base|"), len(volatile))
	}
}

// TestMemFileModel checks, over random histories of writes, truncations and syncs
// on one file, that reads see every change, a crash keeps exactly the synced
// contents, and a torn crash keeps some prefix of the unsynced changes.
func TestMemFileModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := NewMem()
		f, err := m.Create("/f")
		if err != nil {
			rt.Fatal(err)
		}
		if err := m.SyncDir("/"); err != nil {
			rt.Fatal(err)
		}
		var (
			volatile, synced []byte
			pending          []memOp // what the model has not synced, unmerged
			pos              int64
		)
		change := func(op memOp) {
			volatile = op.apply(volatile)
			pending = append(pending, op)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"WriteAt": func(rt *rapid.T) {
				off := int64(rapid.IntRange(0, 48).Draw(rt, "off"))
				p := rapid.SliceOfN(rapid.Byte(), 1, 12).Draw(rt, "p")
				if _, err := f.WriteAt(p, off); err != nil {
					rt.Fatal(err)
				}
				change(memOp{off: off, data: bytes.Clone(p)})
			},
			"Write": func(rt *rapid.T) {
				p := rapid.SliceOfN(rapid.Byte(), 1, 12).Draw(rt, "p")
				if _, err := f.Write(p); err != nil {
					rt.Fatal(err)
				}
				change(memOp{off: pos, data: bytes.Clone(p)})
				pos += int64(len(p))
			},
			"Truncate": func(rt *rapid.T) {
				size := int64(rapid.IntRange(0, 60).Draw(rt, "size"))
				if err := f.Truncate(size); err != nil {
					rt.Fatal(err)
				}
				change(memOp{off: size, truncate: true})
			},
			"Sync": func(rt *rapid.T) {
				if err := f.Sync(); err != nil {
					rt.Fatal(err)
				}
				synced, pending = bytes.Clone(volatile), nil
			},
			"Crash": func(rt *rapid.T) {
				if got := memContents(rt, m.CrashClone()); !bytes.Equal(got, synced) {
					rt.Fatalf("crash kept %q, want the synced %q", got, synced)
				}
				seed := rapid.Uint64().Draw(rt, "seed")
				got := memContents(rt, m.CrashClone(WithTornWrites(seed)))
				if !tornOutcome(got, synced, pending) {
					rt.Fatalf("torn crash kept %q: not synced %q plus a prefix of %v", got, synced, pending)
				}
			},
			"": func(rt *rapid.T) {
				if got := memContents(rt, m); !bytes.Equal(got, volatile) {
					rt.Fatalf("read %q, want %q", got, volatile)
				}
			},
		})
	})
}

func memContents(rt *rapid.T, m *MemFS) []byte {
	f, err := m.Open("/f")
	if err != nil {
		rt.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		rt.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		rt.Fatal(err)
	}
	return b
}

// tornOutcome reports whether got is synced with the first k pending changes
// applied and, possibly, a prefix of change k.
func tornOutcome(got, synced []byte, pending []memOp) bool {
	b := bytes.Clone(synced)
	for k := 0; ; k++ {
		if bytes.Equal(got, b) {
			return true
		}
		if k == len(pending) {
			return false
		}
		if op := pending[k]; !op.truncate {
			for j := 1; j < len(op.data); j++ {
				part := memOp{off: op.off, data: op.data[:j]}
				if bytes.Equal(got, part.apply(bytes.Clone(b))) {
					return true
				}
			}
		}
		b = pending[k].apply(b)
	}
}

// TestMemConcurrentCrashIsConsistentCut runs a writer that appends to a and then
// to b, syncing each, against CrashClones: no image may hold more of b than of a.
func TestMemConcurrentCrashIsConsistentCut(t *testing.T) {
	m := NewMem()
	durableDir(t, m)
	a, b := create(t, m, "/d/a"), create(t, m, "/d/b")
	syncDir(t, m, "/d")
	const records = 300
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for range records {
			for _, f := range []File{a, b} {
				if _, err := f.Write([]byte("r")); err != nil {
					t.Error(err)
					return
				}
				if err := f.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	clones := 0
	for stop := false; !stop; clones++ {
		select {
		case <-done:
			stop = true
		default:
		}
		got := snapshot(t, m.CrashClone())
		if la, lb := len(got["/d/a"]), len(got["/d/b"]); lb > la || la > lb+1 {
			t.Fatalf("inconsistent crash image: a has %d records, b %d", la, lb)
		}
	}
	wg.Wait()
	if got := snapshot(t, m.CrashClone()); len(got["/d/b"]) != records {
		t.Fatalf("final image holds %d records of b, want %d", len(got["/d/b"]), records)
	}
	t.Logf("%d crash images checked", clones)
}

func TestMemBadInput(t *testing.T) {
	m := NewMem()
	durableDir(t, m)
	f := create(t, m, "/d/f")
	if _, err := f.WriteAt([]byte("x"), 1<<40); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("WriteAt at 1 TiB: %v, want EFBIG", err)
	}
	if err := f.Truncate(1 << 40); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("Truncate to 1 TiB: %v, want EFBIG", err)
	}
	_, openEmpty := m.Open("")
	_, createRoot := m.Create("/")
	_, openDir := m.Open("/d")
	_, createDir := m.Create("/d")
	_, listEmpty := m.List("")
	_, belowFile := m.Create("/d/f/g")
	for name, err := range map[string]error{
		"Open empty name":     openEmpty,
		"Create root":         createRoot,
		"Open a directory":    openDir,
		"Create a directory":  createDir,
		"List empty name":     listEmpty,
		"Create below a file": belowFile,
		"Remove root":         m.Remove("/"),
		"RemoveAll root":      m.RemoveAll("/"),
		"Rename root":         m.Rename("/", "/x"),
		"Rename onto root":    m.Rename("/d/f", "/"),
		"MkdirAll empty":      m.MkdirAll("", 0o755),
		"SyncDir a file":      m.SyncDir("/d/f"),
		"Rename dir on file":  m.Rename("/d", "/d/f"),
	} {
		if err == nil {
			t.Errorf("%s succeeded", name)
		}
	}
	if err := m.RemoveAll(""); err != nil {
		t.Errorf("RemoveAll(\"\") = %v, want nil like os.RemoveAll", err)
	}
	// Relative and absolute names are the same file.
	writeFile(t, m, "d/rel", "r")
	if got := readFile(t, m, "/d/../d/./rel"); got != "r" {
		t.Errorf("relative name read back %q", got)
	}
}

func ExampleMemFS_CrashClone() {
	m := NewMem()
	m.MkdirAll("/data", 0o755)
	m.SyncDir("/") // keep /data itself

	seg, _ := m.Create("/data/00000.log")
	seg.Write([]byte("synced"))
	seg.Sync()
	m.SyncDir("/data") // keep the name 00000.log
	seg.Write([]byte(" but not this"))

	tmp, _ := m.Create("/data/checkpoint.tmp")
	tmp.Sync() // data synced, but the name never was

	img := m.CrashClone()
	names, _ := img.List("/data")
	f, _ := img.Open("/data/00000.log")
	b, _ := io.ReadAll(f)
	fmt.Printf("%v %q\n", names, b)
	// Output: [00000.log] "synced"
}

// BenchmarkMemAppendSync measures the segment-log pattern on MemFS: a 4 KiB append
// then Sync, so the cost of keeping the durable copy shows.
func BenchmarkMemAppendSync(b *testing.B) {
	m := NewMem()
	f, err := m.Create("/log")
	if err != nil {
		b.Fatal(err)
	}
	p := bytes.Repeat([]byte{'x'}, 4096)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%4096 == 0 { // keep the file at most 16 MiB
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.WriteAt(p, int64(i%4096)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMkdirAllDurable: directories made with MkdirAllDurable survive a power cut,
// with a file synced inside them; with plain MkdirAll they do not.
func TestMkdirAllDurable(t *testing.T) {
	for _, durable := range []bool{false, true} {
		m := NewMem()
		mk := m.MkdirAll
		if durable {
			mk = func(dir string, perm os.FileMode) error { return MkdirAllDurable(m, dir, perm) }
		}
		if err := mk("/data/logs/t-0", 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := m.Create("/data/logs/t-0/x")
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("hello"))
		f.Sync()
		f.Close()
		m.SyncDir("/data/logs/t-0")
		_, err = m.CrashClone().Stat("/data/logs/t-0/x")
		if durable && err != nil {
			t.Fatalf("durable directories lost on a power cut: %v", err)
		}
		if !durable && err == nil {
			t.Fatal("plain MkdirAll directories survived a power cut: the crash model is too kind")
		}
	}
}

func TestMemSyncFS(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("/a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CrashClone().Stat("/a"); err == nil {
		t.Fatal("an unsynced directory survived a crash")
	}
	if err := m.SyncFS("/a"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	g, err := c.Open("/a/b/f")
	if err != nil {
		t.Fatalf("after SyncFS: %v", err)
	}
	b := make([]byte, 5)
	if n, _ := g.ReadAt(b, 0); n != 5 || string(b) != "hello" {
		t.Fatalf("after SyncFS the file holds %q", b[:n])
	}
	g.Close()
	f.Close()
}
