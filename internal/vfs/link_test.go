package vfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLinkFile runs the Linker contract over every implementation that has it:
// the second name shares the file (a write through one is read through the
// other), Links counts both, an existing name is refused, and a file with no
// name left cannot be linked.
func TestLinkFile(t *testing.T) {
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			if runtime.GOOS != "linux" && (impl.name == "os" || impl.name == "errorfs-os") {
				t.Skip("hard links through the operating system are Linux only")
			}
			fsys, dir := impl.new(t)
			if err := fsys.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			l, ok := fsys.(Linker)
			if !ok {
				t.Fatalf("%T does not implement Linker", fsys)
			}
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			f, err := fsys.Create(a)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			if n, err := l.Links(a); err != nil || n != 1 {
				t.Fatalf("Links before: %d, %v; want 1", n, err)
			}
			if err := l.LinkFile(f, b); err != nil {
				t.Fatal(err)
			}
			if n, err := l.Links(a); err != nil || n != 2 {
				t.Fatalf("Links after: %d, %v; want 2", n, err)
			}
			if _, err := f.WriteAt([]byte("J"), 0); err != nil {
				t.Fatal(err)
			}
			g, err := fsys.Open(b)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 5)
			if _, err := g.ReadAt(got, 0); err != nil || string(got) != "Jello" {
				t.Fatalf("read through the link: %q, %v; want the shared bytes", got, err)
			}
			g.Close()
			if err := l.LinkFile(f, b); err == nil {
				t.Fatal("linking over an existing name succeeded")
			}
			// Once both names are gone the open file cannot be named again.
			if err := fsys.Remove(a); err != nil {
				t.Fatal(err)
			}
			if n, err := l.Links(b); err != nil || n != 1 {
				t.Fatalf("Links after removing one name: %d, %v; want 1", n, err)
			}
			if err := fsys.Remove(b); err != nil {
				t.Fatal(err)
			}
			if err := l.LinkFile(f, filepath.Join(dir, "c")); err == nil {
				t.Fatal("linked a file with no name left")
			}
			if _, err := l.Links(b); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Links of a removed name: %v; want not exist", err)
			}
		})
	}
}

// TestMemLinkPowerCut: a link is a name like any other: gone after a power cut
// unless its directory was synced, and then the two names stay one inode.
func TestMemLinkPowerCut(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/d"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.LinkFile(f, "/d/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CrashClone().Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an unsynced link survived a power cut: %v", err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	img := m.CrashClone()
	if n, err := img.Links("/d/b"); err != nil || n != 2 {
		t.Fatalf("after the directory sync and a power cut: %d links, %v; want 2", n, err)
	}
	if b, err := img.Stat("/d/b"); err != nil || b.Size() != 4 {
		t.Fatalf("linked file after a power cut: %v, %v", b, err)
	}
	other := NewMem()
	g, err := other.Create("/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LinkFile(g, "/d/c"); err == nil {
		t.Fatal("linked another MemFS's file")
	}
}
