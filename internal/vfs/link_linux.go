package vfs

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

var _ Linker = osFS{}

// LinkFile implements Linker with linkat(2) on the file's /proc/self/fd entry
// (AT_SYMLINK_FOLLOW): it links the open file itself, never whatever its old
// name points at by now, and fails (ENOENT) once the file has no name left.
func (osFS) LinkFile(f File, newname string) error {
	of, ok := f.(OSFile)
	if !ok {
		return &os.LinkError{Op: "link", Old: f.Name(), New: newname, Err: syscall.EXDEV}
	}
	rc, err := of.OSFile().SyscallConn()
	if err != nil {
		return &os.LinkError{Op: "link", Old: f.Name(), New: newname, Err: err}
	}
	var lerr error
	if cerr := rc.Control(func(fd uintptr) {
		for {
			lerr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.AT_FDCWD, newname, unix.AT_SYMLINK_FOLLOW)
			if !errors.Is(lerr, unix.EINTR) {
				return
			}
		}
	}); cerr != nil {
		lerr = cerr
	}
	if lerr != nil {
		return &os.LinkError{Op: "link", Old: f.Name(), New: newname, Err: lerr}
	}
	return nil
}

// Links implements Linker from stat(2)'s link count.
func (osFS) Links(name string) (int, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, &os.PathError{Op: "stat", Path: name, Err: errors.ErrUnsupported}
	}
	return int(st.Nlink), nil
}
