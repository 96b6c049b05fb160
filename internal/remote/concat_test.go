package remote_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// Concat reads its sections end to end, from any offset, and stops at the end.
func TestConcatReadAt(t *testing.T) {
	sec := func(s string, off int64) *io.SectionReader {
		return io.NewSectionReader(strings.NewReader(s), off, int64(len(s))-off)
	}
	c := remote.Concat(sec("xxabc", 2), sec("", 0), sec("defg", 0), sec("h", 0))
	const all = "abcdefgh"
	if c.Size() != int64(len(all)) {
		t.Fatalf("Size = %d, want %d", c.Size(), len(all))
	}
	for off := 0; off <= len(all); off++ {
		for n := 0; n <= len(all)+1; n++ {
			b := make([]byte, n)
			k, err := c.ReadAt(b, int64(off))
			want := all[off:min(off+n, len(all))]
			if string(b[:k]) != want {
				t.Fatalf("ReadAt(%d bytes at %d) = %q, want %q", n, off, b[:k], want)
			}
			if k < n && err != io.EOF || k == n && err != nil && err != io.EOF {
				t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, k, err)
			}
		}
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != all {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
}

// A file:// object put from a Concat of a section of an operating-system file
// (copied by the kernel) and bytes holds both, in order; so does one from a
// section of the Concat (copied through a buffer).
func TestFilePutConcat(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), 50_000)
	path := filepath.Join(dir, "segment")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := remote.NewFile(vfs.Default, filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	tail := []byte("index")
	body := func() *io.SectionReader {
		return remote.Concat(io.NewSectionReader(f, 10, int64(len(data))-10), io.NewSectionReader(bytes.NewReader(tail), 0, int64(len(tail))))
	}
	want := append(append([]byte(nil), data[10:]...), tail...)
	ctx := context.Background()
	b := body()
	if err := s.Put(ctx, "t/0/whole", b, b.Size()); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "t/0/whole", 0, -1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object of %d bytes (%v), want %d", len(got), err, len(want))
	}
	b = body()
	if _, err := b.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "t/0/part", b, b.Size()-7); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, "t/0/part", 0, -1)
	if err != nil || !bytes.Equal(got, want[7:]) {
		t.Fatalf("object of %d bytes (%v), want %d", len(got), err, len(want)-7)
	}
}
