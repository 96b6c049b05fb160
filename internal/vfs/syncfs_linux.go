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

var _ FSSyncOpener = osFS{}

// OpenFSSync implements FSSyncOpener with a descriptor of dir held open.
func (osFS) OpenFSSync(dir string) (FSSyncHandle, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return osFSSync{d}, nil
}

type osFSSync struct{ d *os.File }

func (s osFSSync) SyncFS() error {
	if err := unix.Syncfs(int(s.d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: s.d.Name(), Err: err}
	}
	return nil
}

func (s osFSSync) Close() error { return s.d.Close() }
