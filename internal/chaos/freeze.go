package chaos

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// freezeFS wraps a node's FS so that a power cut can be taken at one instant
// for every node: once frozen, every operation that changes the disk fails with
// EIO, and Freeze returns only after the changes already under way have
// finished. From then on the inner FS's durable state no longer moves, so a
// CrashClone taken at any later time is the state at the instant of the freeze.
// Reads still work: a frozen node keeps answering from its page cache until it
// is stopped.
//
// Changes under hold (the controller's Raft store) do not fail: they wait until
// Thaw, which the harness calls once it has taken the crash image, and then run
// on the old disk, which nothing reads again. hashicorp/raft panics when it
// cannot store its term, which would take down the test process and every
// in-process node with it; a powered-off node is gone, so what it does after
// the instant must be neither durable nor fatal. (Seed 2 of TestSharePowerLoss
// panicked so: "failed to save current term: raftstore: sync ... raft.wal:
// input/output error".)
type freezeFS struct {
	inner    vfs.FS
	hold     string // path prefix of the changes Freeze holds rather than fails ("" for none)
	frozen   atomic.Bool
	inflight atomic.Int64 // changes that passed the frozen check and have not returned
	thawed   chan struct{}
	thaw     sync.Once
}

var _ vfs.FS = (*freezeFS)(nil)

func newFreezeFS(inner vfs.FS, hold string) *freezeFS {
	return &freezeFS{inner: inner, hold: hold, thawed: make(chan struct{})}
}

// Thaw lets the held changes, and every later one under hold, run on the
// inner FS: call it after the crash image is taken, before the node stops
// (stopping waits for its Raft goroutines, which may be waiting here).
func (f *freezeFS) Thaw() { f.thaw.Do(func() { close(f.thawed) }) }

// Freeze stops every later change and waits for those under way.
func (f *freezeFS) Freeze() {
	f.frozen.Store(true)
	for f.inflight.Load() > 0 {
		time.Sleep(50 * time.Microsecond) // changes in memory finish in microseconds
	}
}

// held reports whether path is under hold (or is its directory).
func (f *freezeFS) held(path string) bool {
	return f.hold != "" && (strings.HasPrefix(path, f.hold) || path == strings.TrimSuffix(f.hold, string(filepath.Separator)))
}

// change runs op unless frozen (then it fails, or under hold waits for Thaw).
// The count is taken before the check, so Freeze either sees an operation in
// flight or the operation sees the freeze.
func (f *freezeFS) change(opName, path string, op func() error) error {
	f.inflight.Add(1)
	if f.frozen.Load() {
		f.inflight.Add(-1)
		if !f.held(path) {
			return &fs.PathError{Op: opName, Path: path, Err: syscall.EIO}
		}
		<-f.thawed
		return op()
	}
	defer f.inflight.Add(-1)
	return op()
}

func (f *freezeFS) file(opName, name string, open func(string) (vfs.File, error)) (vfs.File, error) {
	var file vfs.File
	err := f.change(opName, name, func() error {
		var err error
		file, err = open(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &freezeFile{File: file, fs: f}, nil
}

func (f *freezeFS) Create(name string) (vfs.File, error) {
	return f.file("create", name, f.inner.Create)
}

func (f *freezeFS) Open(name string) (vfs.File, error) {
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &freezeFile{File: file, fs: f}, nil
}

func (f *freezeFS) OpenReadWrite(name string) (vfs.File, error) {
	return f.file("open", name, f.inner.OpenReadWrite)
}

func (f *freezeFS) Remove(name string) error {
	return f.change("remove", name, func() error { return f.inner.Remove(name) })
}

func (f *freezeFS) RemoveAll(name string) error {
	return f.change("remove", name, func() error { return f.inner.RemoveAll(name) })
}

func (f *freezeFS) Rename(oldname, newname string) error {
	return f.change("rename", oldname, func() error { return f.inner.Rename(oldname, newname) })
}

func (f *freezeFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.change("mkdir", dir, func() error { return f.inner.MkdirAll(dir, perm) })
}

func (f *freezeFS) List(dir string) ([]string, error) { return f.inner.List(dir) }

func (f *freezeFS) Stat(name string) (os.FileInfo, error) { return f.inner.Stat(name) }

func (f *freezeFS) SyncDir(dir string) error {
	return f.change("syncdir", dir, func() error { return f.inner.SyncDir(dir) })
}

// OpenFSSync passes the inner FS's syncfs through (--log-dir-sync=filesystem);
// each syncfs is a change the freeze stops.
func (f *freezeFS) OpenFSSync(dir string) (vfs.FSSyncHandle, error) {
	o, ok := f.inner.(vfs.FSSyncOpener)
	if !ok {
		return nil, fmt.Errorf("chaos: syncfs of %s: %w", dir, errors.ErrUnsupported)
	}
	h, err := o.OpenFSSync(dir)
	if err != nil {
		return nil, err
	}
	return freezeFSSync{FSSyncHandle: h, fs: f, dir: dir}, nil
}

type freezeFSSync struct {
	vfs.FSSyncHandle
	fs  *freezeFS
	dir string
}

func (s freezeFSSync) SyncFS() error { return s.fs.change("syncfs", s.dir, s.FSSyncHandle.SyncFS) }

// freezeFile passes reads through and subjects changes to the freeze.
type freezeFile struct {
	vfs.File
	fs *freezeFS
}

func (f *freezeFile) Write(p []byte) (n int, err error) {
	err = f.fs.change("write", f.Name(), func() error {
		n, err = f.File.Write(p)
		return err
	})
	return n, err
}

func (f *freezeFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.fs.change("write", f.Name(), func() error {
		n, err = f.File.WriteAt(p, off)
		return err
	})
	return n, err
}

func (f *freezeFile) Sync() error {
	return f.fs.change("sync", f.Name(), f.File.Sync)
}

func (f *freezeFile) Truncate(size int64) error {
	return f.fs.change("truncate", f.Name(), func() error { return f.File.Truncate(size) })
}
