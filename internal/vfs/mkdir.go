package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// MkdirAllDurable creates dir and any missing parents, and makes each creation
// durable by syncing the directory that holds it, parents first. A directory
// created without that sync can vanish, with everything in it, on a power cut.
func MkdirAllDurable(fsys FS, dir string, perm os.FileMode) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range slices.Backward(missing) {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
