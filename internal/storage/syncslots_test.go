package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// openLogs opens n logs under dir on fsys, closed at the end of tb.
func openLogs(tb testing.TB, fsys vfs.FS, dir string, n int) []*Log {
	tb.Helper()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fsys, filepath.Join(dir, fmt.Sprintf("p-%d", i)), Config{IndexMaxBytes: testIndexBytes})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = l.Close() })
		logs[i] = l
	}
	return logs
}

// appendEachDurable appends a copy of batch (Append stamps it) to every log at
// once, one goroutine per log, and waits until each append is durable.
func appendEachDurable(tb testing.TB, logs []*Log, batch []byte) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(logs))
	for _, l := range logs {
		wg.Go(func() {
			info, err := l.Append(bytes.Clone(batch), 0)
			if err == nil {
				err = l.WaitDurable(ctxTimeout(tb), info.LastOffset)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// threadsCreated is the number of OS threads the process has started.
func threadsCreated() int { return pprof.Lookup("threadcreate").Count() }

// BenchmarkManyLogsDurable: every one of 1,000 logs on the real disk appends a
// small batch at once and waits until it is durable (one op: 1,000 appends),
// as a broker's partitions do when each takes a record. It reports appends/s
// (load-sensitive) and the OS threads the process started per log (run each
// case in its own process: the runtime keeps and reuses the threads an earlier
// case started).
func BenchmarkManyLogsDurable(b *testing.B) {
	const n = 1000
	for _, slots := range []int{n, 256, maxSyncsInFlight, 16} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			saved := syncSlots
			syncSlots = make(chan struct{}, slots)
			defer func() { syncSlots = saved }()
			logs := openLogs(b, vfs.Default, b.TempDir(), n)
			batch := mkBatch(1, 100, 0)
			before := threadsCreated()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				appendEachDurable(b, logs, batch)
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(float64(threadsCreated()-before)/n, "threads/log")
		})
	}
}
