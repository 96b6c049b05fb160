package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/controller/boltstore"
	"github.com/strata-stream/strata/internal/vfs"
)

// boltName is the file of the controller's earlier store (package boltstore).
const boltName = "raft.db"

// MigrateBolt moves the Raft log and stable values of dir/raft.db, the bbolt
// store earlier versions kept, into w, if w is empty and raft.db exists. The
// migrated contents replace raft.wal in one rename, so a crash part way leaves
// raft.db to migrate again; then raft.db is renamed raft.db.migrated. bbolt
// opens its file through the operating system, so only a WAL on vfs.Default
// migrates: on any other filesystem raft.db cannot exist.
func MigrateBolt(fsys vfs.FS, dir string, w *WAL) (migrated bool, err error) {
	path := filepath.Join(dir, boltName)
	if fsys != vfs.Default {
		return false, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("raftstore: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holdsRaftStateLocked() {
		return false, nil // migrated before; raft.db was left behind
	}
	if err := w.loadBoltLocked(path); err != nil {
		return false, err
	}
	if _, err := w.rewriteLocked(); err != nil {
		return false, err
	}
	if err := os.Rename(path, path+".migrated"); err != nil {
		return true, fmt.Errorf("raftstore: %w", err)
	}
	return true, fsys.SyncDir(dir)
}

// loadBoltLocked reads the bbolt store at path into w's memory.
func (w *WAL) loadBoltLocked(path string) error {
	old, err := boltstore.Open(path)
	if err != nil {
		return err
	}
	defer old.Close()
	err = old.ForEachStable(func(key, val []byte) error {
		w.setStable(string(key), val)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftstore: migrating %s: %w", path, err)
	}
	first, err := old.FirstIndex()
	if err != nil {
		return err
	}
	last, err := old.LastIndex()
	if err != nil {
		return err
	}
	for i := first; first != 0 && i <= last; i++ {
		var l raft.Log
		if err := old.GetLog(i, &l); err != nil {
			return fmt.Errorf("raftstore: migrating %s: entry %d: %w", path, i, err)
		}
		w.putEntry(i, boltstore.EncodeLog(&l))
	}
	return nil
}
