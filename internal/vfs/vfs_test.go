package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// implementations returns every FS the conformance suite runs over, each with a
// fresh, existing directory to work in.
func implementations() []struct {
	name string
	new  func(t *testing.T) (FS, string)
} {
	return []struct {
		name string
		new  func(t *testing.T) (FS, string)
	}{
		{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }},
		{"mem", func(t *testing.T) (FS, string) { return NewMem(), "/data" }},
		{"errorfs-os", func(t *testing.T) (FS, string) { return NewErrorFS(Default, nil), t.TempDir() }},
		{"errorfs-mem", func(t *testing.T) (FS, string) {
			off := FailOn(OpAll)
			off.Disable()
			return NewErrorFS(NewMem(), off), "/data"
		}},
	}
}

func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, fsys FS, dir string)
	}{
		{"WriteReadBack", testWriteReadBack},
		{"ReadAtPastEOF", testReadAtPastEOF},
		{"WriteAtPosition", testWriteAtPosition},
		{"WriteAtGap", testWriteAtGap},
		{"Truncate", testTruncate},
		{"CreateTruncates", testCreateTruncates},
		{"OpenReadWrite", testOpenReadWrite},
		{"OpenReadOnly", testOpenReadOnly},
		{"NotExist", testNotExist},
		{"Rename", testRename},
		{"RenameDir", testRenameDir},
		{"MkdirAllList", testMkdirAllList},
		{"Remove", testRemove},
		{"RemoveAll", testRemoveAll},
		{"Stat", testStat},
		{"Closed", testClosed},
		{"RemovedWhileOpen", testRemovedWhileOpen},
		{"NegativeOffsets", testNegativeOffsets},
		{"ConcurrentReadAt", testConcurrentReadAt},
		{"ConcurrentReadWrite", testConcurrentReadWrite},
	}
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					fsys, root := impl.new(t)
					dir := filepath.Join(root, "d")
					if err := fsys.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					c.run(t, fsys, dir)
				})
			}
		})
	}
}

func create(t *testing.T, fsys FS, name string) File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func write(t *testing.T, f File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

// writeFile creates name holding s and syncs it.
func writeFile(t *testing.T, fsys FS, name, s string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, s)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the contents of name, read with Read until io.EOF.
func readFile(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func list(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func testWriteReadBack(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	f := create(t, fsys, name)
	if f.Name() != name {
		t.Fatalf("Name() = %q, want %q", f.Name(), name)
	}
	write(t, f, "hello ")
	write(t, f, "world")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if size, err := f.Size(); err != nil || size != 11 {
		t.Fatalf("Size() = %d, %v; want 11", size, err)
	}
	if got := readFile(t, fsys, name); got != "hello world" {
		t.Fatalf("contents = %q", got)
	}
	// Reading through the writing handle continues from its position: the end.
	if n, err := f.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read at end = %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := f.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
}

func testReadAtPastEOF(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	write(t, f, "abcdef")
	buf := make([]byte, 4)
	for _, c := range []struct {
		off     int64
		n       int
		err     error
		content string
	}{
		{0, 4, nil, "abcd"},
		{2, 4, nil, "cdef"},
		{4, 2, io.EOF, "ef"},
		{6, 0, io.EOF, ""},
		{100, 0, io.EOF, ""},
	} {
		n, err := f.ReadAt(buf, c.off)
		if n != c.n || err != c.err || string(buf[:n]) != c.content {
			t.Errorf("ReadAt(off %d) = %d %q, %v; want %d %q, %v", c.off, n, buf[:n], err, c.n, c.content, c.err)
		}
	}
}

func testWriteAtPosition(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	write(t, f, "0123456789")
	// WriteAt does not move the position Write appends at.
	if _, err := f.WriteAt([]byte("ab"), 2); err != nil {
		t.Fatal(err)
	}
	write(t, f, "XY")
	if got := readFile(t, fsys, f.Name()); got != "01ab456789XY" {
		t.Fatalf("contents = %q", got)
	}
}

func testWriteAtGap(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	if _, err := f.WriteAt([]byte("z"), 4); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, f.Name()); got != "\x00\x00\x00\x00z" {
		t.Fatalf("contents = %q", got)
	}
}

func testTruncate(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	write(t, f, "abcdef")
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, f.Name()); got != "ab" {
		t.Fatalf("after shrink: %q", got)
	}
	// Growing again exposes zeros, not the old bytes.
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, f.Name()); got != "ab\x00\x00" {
		t.Fatalf("after grow: %q", got)
	}
	if err := f.Truncate(-1); err == nil {
		t.Fatal("Truncate(-1) succeeded")
	}
}

func testCreateTruncates(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, "old contents")
	writeFile(t, fsys, name, "new")
	if got := readFile(t, fsys, name); got != "new" {
		t.Fatalf("contents = %q", got)
	}
}

func testOpenReadWrite(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	f, err := fsys.OpenReadWrite(name) // creates
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "abcdef")
	f.Close()
	f, err = fsys.OpenReadWrite(name) // keeps contents; Write starts at 0
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write(t, f, "XY")
	if size, _ := f.Size(); size != 6 {
		t.Fatalf("Size() = %d, want 6", size)
	}
	if got := readFile(t, fsys, name); got != "XYcdef" {
		t.Fatalf("contents = %q", got)
	}
}

func testOpenReadOnly(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, "abc")
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("Write on a read-only file succeeded")
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on a read-only file succeeded")
	}
	if err := f.Truncate(0); err == nil {
		t.Error("Truncate on a read-only file succeeded")
	}
	if got := readFile(t, fsys, name); got != "abc" {
		t.Fatalf("contents = %q", got)
	}
}

func testNotExist(t *testing.T, fsys FS, dir string) {
	missing := filepath.Join(dir, "missing")
	_, openErr := fsys.Open(missing)
	_, statErr := fsys.Stat(missing)
	_, listErr := fsys.List(missing)
	_, createErr := fsys.Create(filepath.Join(missing, "f"))
	for name, err := range map[string]error{
		"Open":            openErr,
		"Stat":            statErr,
		"List":            listErr,
		"Remove":          fsys.Remove(missing),
		"Rename":          fsys.Rename(missing, filepath.Join(dir, "x")),
		"SyncDir":         fsys.SyncDir(missing),
		"Create in dir":   createErr,
		"Rename into dir": fsys.Rename(dir, filepath.Join(missing, "x")),
	} {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: err = %v, want fs.ErrNotExist", name, err)
		}
	}
}

func testRename(t *testing.T, fsys FS, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, fsys, a, "A")
	writeFile(t, fsys, b, "B")
	if err := fsys.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, b); got != "A" {
		t.Fatalf("b = %q, want A", got)
	}
	if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(a) after rename: %v", err)
	}
	if err := fsys.Rename(b, b); err != nil {
		t.Fatalf("Rename to itself: %v", err)
	}
	if got := list(t, fsys, dir); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("List = %q", got)
	}
}

func testRenameDir(t *testing.T, fsys FS, dir string) {
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := fsys.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, filepath.Join(src, "sub", "f"), "x")
	if err := fsys.Rename(src, dst); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, filepath.Join(dst, "sub", "f")); got != "x" {
		t.Fatalf("moved file = %q", got)
	}
	if err := fsys.Rename(dst, filepath.Join(dst, "sub", "inside")); err == nil {
		t.Fatal("renaming a directory into itself succeeded")
	}
	if err := fsys.Rename(filepath.Join(dst, "sub", "f"), dst); err == nil {
		t.Fatal("renaming a file over a non-empty directory succeeded")
	}
}

func testMkdirAllList(t *testing.T, fsys FS, dir string) {
	deep := filepath.Join(dir, "x", "y", "z")
	for range 2 { // idempotent
		if err := fsys.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"c", "a", "b"} {
		writeFile(t, fsys, filepath.Join(dir, name), name)
	}
	if got, want := list(t, fsys, dir), []string{"a", "b", "c", "x"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if got := list(t, fsys, deep); len(got) != 0 {
		t.Fatalf("List(empty dir) = %q", got)
	}
	if err := fsys.MkdirAll(filepath.Join(dir, "a", "sub"), 0o755); err == nil {
		t.Fatal("MkdirAll below a file succeeded")
	}
	if _, err := fsys.List(filepath.Join(dir, "a")); err == nil {
		t.Fatal("List of a file succeeded")
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func testRemove(t *testing.T, fsys FS, dir string) {
	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(sub, "f")
	writeFile(t, fsys, f, "x")
	if err := fsys.Remove(sub); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	if err := fsys.Remove(f); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if got := list(t, fsys, dir); len(got) != 0 {
		t.Fatalf("List = %q", got)
	}
}

func testRemoveAll(t *testing.T, fsys FS, dir string) {
	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(filepath.Join(sub, "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, filepath.Join(sub, "deeper", "f"), "x")
	if err := fsys.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(sub); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after RemoveAll: %v", err)
	}
	if err := fsys.RemoveAll(filepath.Join(dir, "missing", "deeper")); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
}

func testStat(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, "12345")
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != "f" || fi.Size() != 5 || fi.IsDir() || !fi.Mode().IsRegular() {
		t.Fatalf("Stat(file) = %q size %d dir %v mode %v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode())
	}
	fi, err = fsys.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != "d" || !fi.IsDir() || !fi.Mode().IsDir() {
		t.Fatalf("Stat(dir) = %q dir %v mode %v", fi.Name(), fi.IsDir(), fi.Mode())
	}
}

func testClosed(t *testing.T, fsys FS, dir string) {
	f, err := fsys.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, readErr := f.Read(make([]byte, 1))
	_, readAtErr := f.ReadAt(make([]byte, 1), 0)
	_, writeErr := f.Write([]byte("x"))
	_, writeAtErr := f.WriteAt([]byte("x"), 0)
	_, sizeErr := f.Size()
	for name, err := range map[string]error{
		"Read":     readErr,
		"ReadAt":   readAtErr,
		"Write":    writeErr,
		"WriteAt":  writeAtErr,
		"Size":     sizeErr,
		"Sync":     f.Sync(),
		"Truncate": f.Truncate(0),
		"Close":    f.Close(),
	} {
		if !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want fs.ErrClosed", name, err)
		}
	}
}

func testRemovedWhileOpen(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	f := create(t, fsys, name)
	write(t, f, "still here")
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 0); n != 10 || err != nil || string(buf) != "still here" {
		t.Fatalf("ReadAt after Remove = %d %q, %v", n, buf[:n], err)
	}
}

func testNegativeOffsets(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	write(t, f, "abc")
	if _, err := f.ReadAt(make([]byte, 1), -1); err == nil || err == io.EOF {
		t.Errorf("ReadAt(-1) err = %v, want an error other than io.EOF", err)
	}
	if _, err := f.WriteAt([]byte("x"), -1); err == nil {
		t.Error("WriteAt(-1) succeeded")
	}
}

func testConcurrentReadAt(t *testing.T, fsys FS, dir string) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	f := create(t, fsys, filepath.Join(dir, "f"))
	write(t, f, string(data))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			buf := make([]byte, 10)
			for off := int64(g); off+10 <= int64(len(data)); off += 10 {
				if _, err := f.ReadAt(buf, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf, data[off:off+10]) {
					errs <- errors.New("ReadAt returned wrong bytes")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testConcurrentReadWrite has readers check, while one goroutine appends, the
// chunk written last; the writer waits for each chunk to be checked before the next
// so that reads and writes really interleave.
func testConcurrentReadWrite(t *testing.T, fsys FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	const chunk, chunks = 8, 100
	var written, checked atomic.Int64 // chunks
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(stop)
		for i := range int64(chunks) {
			if _, err := f.Write(bytes.Repeat([]byte{byte(i)}, chunk)); err != nil {
				t.Error(err)
				return
			}
			written.Store(i + 1)
			for checked.Load() <= i {
				if t.Failed() {
					return
				}
				runtime.Gosched()
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			buf := make([]byte, chunk)
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := written.Load() - 1
				if i < 0 {
					runtime.Gosched()
					continue
				}
				if _, err := f.ReadAt(buf, i*chunk); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(buf, bytes.Repeat([]byte{byte(i)}, chunk)) {
					t.Errorf("chunk %d read as %v", i, buf)
					return
				}
				checked.CompareAndSwap(i, i+1)
				runtime.Gosched() // in-memory reads never block: let the writer run
			}
		})
	}
	wg.Wait()
}
