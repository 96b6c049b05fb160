package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

var _ SpaceReporter = osFS{}

// Space implements SpaceReporter with statfs(2) on dir.
func (osFS) Space(dir string) (total, usable int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Blocks) * st.Frsize, int64(st.Bavail) * st.Frsize, nil
}
