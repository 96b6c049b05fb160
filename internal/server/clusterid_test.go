package server

import (
	"path/filepath"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestLoadDirectoryID: a data dir gets a random id on first use and keeps it;
// a new data dir gets another; a file that holds no id is refused.
func TestLoadDirectoryID(t *testing.T) {
	fsys := vfs.NewMem()
	for _, d := range []string{"a", "b", "bad"} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	first, err := loadDirectoryID(fsys, "a")
	if err != nil || first.IsZero() {
		t.Fatalf("first load = %v, %v", first, err)
	}
	if again, err := loadDirectoryID(fsys, "a"); err != nil || again != first {
		t.Errorf("reload = %v, %v; want %v", again, err, first)
	}
	if other, err := loadDirectoryID(fsys, "b"); err != nil || other == first {
		t.Errorf("another data dir = %v, %v; want a new id", other, err)
	}
	if err := writeIDFile(fsys, "bad", filepath.Join("bad", directoryIDFile), "not-a-uuid"); err != nil {
		t.Fatal(err)
	}
	if id, err := loadDirectoryID(fsys, "bad"); err == nil {
		t.Errorf("a file without an id = %v, want an error", id)
	}
}
