//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// reserved holds the lock files of the ports this process handed out, open for
// its lifetime: the kernel drops the locks when the process exits, however it ends.
var reserved struct {
	sync.Mutex
	files []*os.File
}

// reserve takes port for this process with an exclusive flock on a file named
// after it; false when another process (or this one, earlier) holds it, or the
// lock cannot be taken.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "strata-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved.Lock()
	reserved.files = append(reserved.files, f)
	reserved.Unlock()
	return true
}
