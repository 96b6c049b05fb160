package storage

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// idleLogs opens n logs on fsys, appends one batch to each and waits until it
// is durable: n partitions that took a write and went quiet.
func idleLogs(tb testing.TB, fsys vfs.FS, n int) []*Log {
	tb.Helper()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fsys, fmt.Sprintf("/logs/p-%d", i), Config{IndexMaxBytes: testIndexBytes})
		if err != nil {
			tb.Fatal(err)
		}
		logs[i] = l
		info, err := l.Append(mkBatch(1, 100, 0), 0)
		if err != nil {
			tb.Fatal(err)
		}
		if err := l.WaitDurable(ctxTimeout(tb), info.LastOffset); err != nil {
			tb.Fatal(err)
		}
	}
	return logs
}

// BenchmarkIdleLogs reports what an idle log costs beyond its data:
// goroutines and goroutine stack bytes per log, over 1,000 logs that each took
// one write and went quiet (load-independent counts).
func BenchmarkIdleLogs(b *testing.B) {
	const n = 1000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		b.StartTimer()
		logs := idleLogs(b, vfs.NewMem(), n)
		b.StopTimer()
		g1 := runtime.NumGoroutine()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(g1-g0)/n, "goroutines/log")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stack-B/log")
		for _, l := range logs {
			l.Close()
		}
		b.StartTimer()
	}
}

// TestIdleLogsHoldNoGoroutine: once its data is durable a log's flusher exits,
// and the next append starts it again (and is made durable); an Interval log
// with a time trigger keeps its flusher for the ticker; Close waits for both.
func TestIdleLogsHoldNoGoroutine(t *testing.T) {
	const n = 50
	g0 := runtime.NumGoroutine()
	fsys := vfs.NewMem()
	logs := idleLogs(t, fsys, n)
	wait.For(t, "idle logs' flushers to exit", func() bool { return runtime.NumGoroutine() <= g0 })
	for _, l := range logs {
		info, err := l.Append(mkBatch(1, 100, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(ctxTimeout(t), info.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "flushers to exit again", func() bool { return runtime.NumGoroutine() <= g0 })

	timed, err := Open(fsys, "/logs/timed", Config{IndexMaxBytes: testIndexBytes, Flush: FlushPolicy{Mode: Interval, Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	// A goroutine another test left may exit meanwhile, so the count is an upper
	// bound and the timed log's own flusher is checked by its flag.
	if !flusherRunning(timed) {
		t.Fatal("a timed Interval log runs no flusher")
	}
	wait.For(t, "one goroutine for the timed log", func() bool { return runtime.NumGoroutine() <= g0+1 })
	for _, l := range append(logs, timed) {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := runtime.NumGoroutine(); got > g0 {
		t.Fatalf("%d goroutines after Close, want at most %d", got, g0)
	}
}

func flusherRunning(l *Log) bool {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushMu.running
}
