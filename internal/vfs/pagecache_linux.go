package vfs

import "golang.org/x/sys/unix"

var _ CacheDropper = osFile{}

// DropCache implements CacheDropper with posix_fadvise(2) POSIX_FADV_DONTNEED.
func (f osFile) DropCache(off, n int64) error {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if cerr := rc.Control(func(fd uintptr) {
		ferr = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
	}); cerr != nil {
		return cerr
	}
	return ferr
}

var _ WriteBacker = osFile{}

// WriteBack implements WriteBacker with sync_file_range(2).
func (f osFile) WriteBack(off, n int64) error {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if cerr := rc.Control(func(fd uintptr) {
		ferr = unix.SyncFileRange(int(fd), off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	}); cerr != nil {
		return cerr
	}
	return ferr
}
