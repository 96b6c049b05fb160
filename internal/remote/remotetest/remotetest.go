// Package remotetest is the conformance suite every remote.Store implementation
// runs: Run(t, newStore) checks the contract in the remote package doc.
package remotetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/remote"
)

// Run checks the Store contract on fresh stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) remote.Store) {
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return c
	}
	put := func(t *testing.T, s remote.Store, key string, b []byte) {
		t.Helper()
		if err := s.Put(ctx(t), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	t.Run("PutGetRanges", func(t *testing.T) {
		s := newStore(t)
		data := []byte("0123456789abcdefghij")
		put(t, s, "p/0/seg", data)
		for _, tc := range []struct {
			off, n int64
			want   string
		}{
			{0, -1, string(data)},
			{0, 20, string(data)},
			{5, 3, "567"},
			{15, 100, "fghij"},
			{19, 1, "j"},
			{0, 0, ""},
		} {
			got, err := s.Get(ctx(t), "p/0/seg", tc.off, tc.n)
			if err != nil || string(got) != tc.want {
				t.Errorf("get [%d,+%d) = %q, %v; want %q", tc.off, tc.n, got, err, tc.want)
			}
		}
		if _, err := s.Get(ctx(t), "p/0/seg", 21, 1); !errors.Is(err, remote.ErrRange) {
			t.Errorf("get past end: %v, want ErrRange", err)
		}
	})
	t.Run("EmptyObject", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "empty", nil)
		got, err := s.Get(ctx(t), "empty", 0, -1)
		if err != nil || len(got) != 0 {
			t.Fatalf("get empty = %q, %v", got, err)
		}
	})
	t.Run("Replace", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "k", []byte("old contents"))
		put(t, s, "k", []byte("new"))
		got, err := s.Get(ctx(t), "k", 0, -1)
		if err != nil || string(got) != "new" {
			t.Fatalf("get after replace = %q, %v", got, err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx(t), "nope/x", 0, -1); !errors.Is(err, remote.ErrNotFound) {
			t.Fatalf("get missing: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx(t), "nope/x"); err != nil {
			t.Fatalf("delete missing: %v", err)
		}
	})
	t.Run("ShortReaderIsNotStored", func(t *testing.T) {
		s := newStore(t)
		err := s.Put(ctx(t), "short", strings.NewReader("abc"), 10)
		if err == nil {
			t.Fatal("put of 3 bytes declared as 10 succeeded")
		}
		if _, err := s.Get(ctx(t), "short", 0, -1); !errors.Is(err, remote.ErrNotFound) {
			t.Fatalf("a failed put left an object: %v", err)
		}
		if keys, err := s.List(ctx(t), ""); err != nil || len(keys) != 0 {
			t.Fatalf("list after failed put = %v, %v", keys, err)
		}
	})
	// The tier uploads a segment as a section of its file: Put reads it from
	// the section's current position, and a section shorter than size stores
	// nothing. The file is a real one, so a store that hands such sections to
	// the kernel (file:// on Linux) is checked on that path too.
	t.Run("PutFileSection", func(t *testing.T) {
		s := newStore(t)
		f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		data := bytes.Repeat([]byte("0123456789"), 300_000) // several copy pieces
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		sr := io.NewSectionReader(f, 7, int64(len(data))-17)
		if _, err := io.ReadFull(sr, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
		want := data[12 : len(data)-10]
		if err := s.Put(ctx(t), "seg", sr, int64(len(want))); err != nil {
			t.Fatalf("put from a file section: %v", err)
		}
		got, err := s.Get(ctx(t), "seg", 0, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get = %d bytes (equal %v), %v; want %d bytes", len(got), bytes.Equal(got, want), err, len(want))
		}
		short := io.NewSectionReader(f, int64(len(data))-100, 100)
		if err := s.Put(ctx(t), "short", short, 200); err == nil {
			t.Fatal("put of a 100-byte section declared as 200 succeeded")
		}
		if _, err := s.Get(ctx(t), "short", 0, -1); !errors.Is(err, remote.ErrNotFound) {
			t.Fatalf("a failed put left an object: %v", err)
		}
	})
	t.Run("FailingReaderIsNotStored", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "k", []byte("kept"))
		r := io.MultiReader(strings.NewReader("partial"), errReader{})
		if err := s.Put(ctx(t), "k", r, 100); err == nil {
			t.Fatal("put from a failing reader succeeded")
		}
		got, err := s.Get(ctx(t), "k", 0, -1)
		if err != nil || string(got) != "kept" {
			t.Fatalf("after failed replace: %q, %v; want the old object", got, err)
		}
	})
	t.Run("ListDelete", func(t *testing.T) {
		s := newStore(t)
		keys := []string{"a/1", "a/2", "a/b/3", "ab/4", "b/5"}
		for _, k := range keys {
			put(t, s, k, []byte(k))
		}
		for _, tc := range []struct {
			prefix string
			want   []string
		}{
			{"", keys},
			{"a/", []string{"a/1", "a/2", "a/b/3"}},
			{"a", []string{"a/1", "a/2", "a/b/3", "ab/4"}},
			{"a/b", []string{"a/b/3"}},
			{"c", nil},
		} {
			got, err := s.List(ctx(t), tc.prefix)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("list %q = %v, %v; want %v", tc.prefix, got, err, tc.want)
			}
		}
		if err := s.Delete(ctx(t), "a/2"); err != nil {
			t.Fatal(err)
		}
		got, err := s.List(ctx(t), "a/")
		if want := []string{"a/1", "a/b/3"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("list after delete = %v, %v; want %v", got, err, want)
		}
		if _, err := s.Get(ctx(t), "a/2", 0, -1); !errors.Is(err, remote.ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
	})
	t.Run("InvalidKeys", func(t *testing.T) {
		s := newStore(t)
		for _, k := range []string{"", "/abs", "a//b", "a/../b", "a/"} {
			if err := s.Put(ctx(t), k, strings.NewReader("x"), 1); !errors.Is(err, remote.ErrInvalidKey) {
				t.Errorf("put %q: %v, want ErrInvalidKey", k, err)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Go(func() {
				for i := range 5 {
					key := fmt.Sprintf("c/%d/%d", w, i)
					body := bytes.Repeat([]byte{byte(w), byte(i)}, 1000)
					if err := s.Put(context.Background(), key, bytes.NewReader(body), int64(len(body))); err != nil {
						errs <- err
						return
					}
					got, err := s.Get(context.Background(), key, 0, -1)
					if err != nil || !bytes.Equal(got, body) {
						errs <- fmt.Errorf("get %s: %d bytes, %v", key, len(got), err)
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
		keys, err := s.List(ctx(t), "c/")
		if err != nil || len(keys) != 20 {
			t.Fatalf("list = %d keys, %v; want 20", len(keys), err)
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("reader broke") }
