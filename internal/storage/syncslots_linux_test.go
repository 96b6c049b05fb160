package storage

import (
	"fmt"
	"runtime"
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

// TestManyLogsDurableBoundThreads: 2,000 logs that each take a record at once,
// on a disk whose fsyncs take 100 ms, start no more OS threads than the fsync
// slots and a margin for the runtime's own. Each fsync in the kernel holds a
// thread, and the runtime keeps every thread it started: unbounded, the
// fsyncs started 1,151 (session 16).
func TestManyLogsDurableBoundThreads(t *testing.T) {
	const n, margin = 2000, 32
	var slow atomic.Bool
	logs := openLogs(t, slowSyncFS(&slow, syscall.Timespec{Nsec: 100e6}), "/logs", n)
	before := threadsCreated()
	slow.Store(true)
	appendEachDurable(t, logs, mkBatch(1, 100, 0))
	slow.Store(false)
	if started := threadsCreated() - before; started > maxSyncsInFlight+margin {
		t.Fatalf("%d logs taking a record each started %d OS threads; want at most %d (fsync slots) + %d",
			n, started, maxSyncsInFlight, margin)
	}
}

// BenchmarkManyLogsSlowSync: 1,000 logs on the in-memory disk whose log fsyncs
// take 50 ms in the kernel each append a record at once and wait until it is
// durable (one op: 1,000 appends). It reports the OS threads the process
// started and the growth of stack memory (goroutine and thread stacks), per
// log: what a broker's partitions that each take a record cost it in threads
// when its disk is slow. Run each case in its own process: the runtime keeps
// and reuses the threads an earlier case started.
func BenchmarkManyLogsSlowSync(b *testing.B) {
	const n = 1000
	for _, slots := range []int{n, maxSyncsInFlight} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			saved := syncSlots
			syncSlots = make(chan struct{}, slots)
			defer func() { syncSlots = saved }()
			var slow atomic.Bool
			logs := openLogs(b, slowSyncFS(&slow, syscall.Timespec{Nsec: 50e6}), "/logs", n)
			batch := mkBatch(1, 100, 0)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			threads := threadsCreated()
			slow.Store(true)
			for b.Loop() {
				appendEachDurable(b, logs, batch)
			}
			slow.Store(false)
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(threadsCreated()-threads)/n, "threads/log")
			b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stack-B/log")
		})
	}
}
