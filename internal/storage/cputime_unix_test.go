//go:build unix

package storage

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used, which a
// shared, oversubscribed machine inflates far less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
