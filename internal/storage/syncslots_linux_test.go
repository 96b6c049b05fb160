package storage

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// slowSyncFS is an in-memory file system whose fsyncs of segment log files
// each take syncTime blocked in the kernel while slow is set (a nanosleep holds
// its OS thread as a slow fsync does; a time.Sleep would hold a goroutine
// only).
func slowSyncFS(slow *atomic.Bool, syncTime syscall.Timespec) vfs.FS {
	return vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if slow.Load() && op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, logSuffix) {
			ts := syncTime
			for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
			}
		}
		return nil
	}))
}

// TestManyLogsDurableBoundThreads: 1,000 logs that each take a record at once,
// on a disk whose fsyncs take 50 ms, start no more OS threads than the fsync
// slots and a margin for the runtime's own. Each fsync in the kernel holds a
// thread, and the runtime keeps every thread it started: unbounded, the
// fsyncs started 348 (session 16).
func TestManyLogsDurableBoundThreads(t *testing.T) {
	const n, margin = 1000, 32
	var slow atomic.Bool
	fsys := slowSyncFS(&slow, syscall.Timespec{Nsec: 50e6})
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fsys, fmt.Sprintf("/logs/p-%d", i), Config{IndexMaxBytes: testIndexBytes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		logs[i] = l
	}
	before := threadsCreated()
	slow.Store(true)
	appendEachDurable(t, logs, mkBatch(1, 100, 0))
	slow.Store(false)
	if started := threadsCreated() - before; started > maxSyncsInFlight+margin {
		t.Fatalf("%d logs taking a record each started %d OS threads; want at most %d (fsync slots) + %d",
			n, started, maxSyncsInFlight, margin)
	}
}
