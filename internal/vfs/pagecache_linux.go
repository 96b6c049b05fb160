package vfs

import "golang.org/x/sys/unix"

var _ CacheDropper = osFile{}

// DropCache implements CacheDropper with posix_fadvise(2) POSIX_FADV_DONTNEED.
func (f osFile) DropCache(off, n int64) error {
	return f.onFD(func(fd int) error { return unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
}

var _ WriteBacker = osFile{}

// WriteBack implements WriteBacker with sync_file_range(2).
func (f osFile) WriteBack(off, n int64) error {
	return f.onFD(func(fd int) error {
		return unix.SyncFileRange(fd, off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}

// onFD runs call on the file's descriptor, which stays open until it returns.
func (f osFile) onFD(call func(fd int) error) error {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	if err := rc.Control(func(fd uintptr) { callErr = call(int(fd)) }); err != nil {
		return err
	}
	return callErr
}
