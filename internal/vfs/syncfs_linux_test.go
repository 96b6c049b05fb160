package vfs

import (
	"path/filepath"
	"testing"
)

func TestOSSyncFS(t *testing.T) {
	dir := t.TempDir()
	f, err := Default.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	s, ok := Default.(FSSyncer)
	if !ok {
		t.Fatal("the OS filesystem has no SyncFS on Linux")
	}
	if err := s.SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFS(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncFS of a missing directory succeeded")
	}
}
