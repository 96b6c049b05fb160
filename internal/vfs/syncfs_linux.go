package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

var _ FSSyncer = osFS{}

// SyncFS implements FSSyncer with syncfs(2) on the filesystem holding dir.
func (osFS) SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		d.Close()
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return d.Close()
}
