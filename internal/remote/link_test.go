package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// LinkUnsynced makes a whole file an object with no copy when the store's
// filesystem holds it, replaces an existing object, is durable after
// SyncNames (not before), and reports linked false for a file it cannot link.
func TestFileLinkUnsynced(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	s, err := remote.NewFile(mem, "/objects")
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Create("/data/seg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("segment bytes")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/data"} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "t/0/a", strings.NewReader("old"), 3); err != nil {
		t.Fatal(err)
	}
	linked, err := s.LinkUnsynced(ctx, "t/0/a", f)
	if err != nil || !linked {
		t.Fatalf("LinkUnsynced: %v, %v", linked, err)
	}
	if got, err := s.Get(ctx, "t/0/a", 0, -1); err != nil || string(got) != "segment bytes" {
		t.Fatalf("Get of the linked object: %q, %v", got, err)
	}
	if n, err := mem.Links("/objects/t/0/a"); err != nil || n != 2 {
		t.Fatalf("the object has %d names (%v), want 2", n, err)
	}
	if keys, err := s.List(ctx, "t/"); err != nil || len(keys) != 1 {
		t.Fatalf("List: %v, %v; want only t/0/a", keys, err)
	}
	s2, _ := remote.NewFile(mem.CrashClone(), "/objects")
	if got, err := s2.Get(ctx, "t/0/a", 0, -1); err != nil || string(got) != "old" {
		t.Fatalf("after a power cut before SyncNames: %q, %v; want the old object", got, err)
	}
	if err := s.SyncNames(ctx, "t/0/a"); err != nil {
		t.Fatal(err)
	}
	s3, _ := remote.NewFile(mem.CrashClone(), "/objects")
	if got, err := s3.Get(ctx, "t/0/a", 0, -1); err != nil || string(got) != "segment bytes" {
		t.Fatalf("after a power cut after SyncNames: %q, %v", got, err)
	}

	// Another filesystem's file is not linked, and nothing is stored.
	other := vfs.NewMem()
	g, err := other.Create("/x")
	if err != nil {
		t.Fatal(err)
	}
	if linked, err := s.LinkUnsynced(ctx, "t/0/b", g); err != nil || linked {
		t.Fatalf("linking another filesystem's file: %v, %v; want false, nil", linked, err)
	}
	if keys, err := s.List(ctx, "t/"); err != nil || len(keys) != 1 {
		t.Fatalf("List after a refused link: %v, %v", keys, err)
	}
}

// Through the operating system (Linux: linkat of /proc/self/fd) the object is
// the file itself, with the file's name gone too.
func TestFileLinkUnsyncedOS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("links through the operating system are Linux only")
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := remote.NewFile(vfs.Default, filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Create(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("segment bytes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "seg")); err != nil {
		t.Fatal(err)
	}
	// A file with no name left cannot be linked: the caller copies it.
	if linked, err := s.LinkUnsynced(ctx, "t/0/a", f); err != nil || linked {
		t.Fatalf("linking a removed file: %v, %v; want false, nil", linked, err)
	}
	g, err := vfs.Default.Create(filepath.Join(dir, "seg2"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Write([]byte("more bytes")); err != nil {
		t.Fatal(err)
	}
	if linked, err := s.LinkUnsynced(ctx, "t/0/a", g); err != nil || !linked {
		t.Fatalf("LinkUnsynced: %v, %v", linked, err)
	}
	if err := s.SyncNames(ctx, "t/0/a"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "t/0/a", 0, -1); err != nil || string(got) != "more bytes" {
		t.Fatalf("Get: %q, %v", got, err)
	}
	a, _ := os.Stat(filepath.Join(dir, "seg2"))
	b, _ := os.Stat(filepath.Join(dir, "objects", "t", "0", "a"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Fatal("the object is not the file itself")
	}
}
