package storage

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestReconfigure checks that each setting Reconfigure changes reaches the
// open log when the docs say: before has the setting off or large, after
// changes it, and check sees the new behaviour.
func TestReconfigure(t *testing.T) {
	const seg = 4 << 10
	tests := []struct {
		name          string
		before, after Config
		check         func(t *testing.T, l *Log, fsys vfs.FS, clk *clock)
	}{
		{
			name:   "retention.bytes at the next pass",
			before: Config{SegmentBytes: seg},
			after:  Config{SegmentBytes: seg, RetentionBytes: 2 * seg},
			check: func(t *testing.T, l *Log, _ vfs.FS, _ *clock) {
				if n, err := l.EnforceRetention(l.LogEndOffset()); err != nil || n == 0 || l.LogStartOffset() == 0 {
					t.Fatalf("retention deleted %d segments (%v), log start %d", n, err, l.LogStartOffset())
				}
			},
		},
		{
			name:   "retention.ms at the next pass",
			before: Config{SegmentBytes: seg},
			after:  Config{SegmentBytes: seg, RetentionAge: time.Minute},
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				clk.Advance(time.Hour)
				if n, err := l.EnforceRetention(l.LogEndOffset()); err != nil || n == 0 || l.LogStartOffset() == 0 {
					t.Fatalf("retention deleted %d segments (%v), log start %d", n, err, l.LogStartOffset())
				}
			},
		},
		{
			name:   "segment.bytes at the next roll",
			before: Config{SegmentBytes: 1 << 20},
			after:  Config{SegmentBytes: seg},
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				n := l.NumSegments()
				appendN(t, l, 1, 1, 100, clk.Now().UnixMilli(), 0)
				if l.NumSegments() != n+1 {
					t.Fatalf("%d segments after an append past the new size, want %d", l.NumSegments(), n+1)
				}
			},
		},
		{
			name:   "segment.ms at the next roll",
			before: Config{SegmentBytes: 1 << 20, SegmentAge: time.Hour},
			after:  Config{SegmentBytes: 1 << 20, SegmentAge: time.Second},
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				n := l.NumSegments()
				appendN(t, l, 1, 1, 100, clk.Now().Add(time.Minute).UnixMilli(), 0)
				if l.NumSegments() != n+1 {
					t.Fatalf("%d segments after an append a minute younger, want %d", l.NumSegments(), n+1)
				}
			},
		},
		{
			name:   "segment.jitter.ms from the next segment",
			before: Config{SegmentBytes: 1 << 20, SegmentAge: time.Hour},
			after: Config{SegmentBytes: 1 << 20, SegmentAge: time.Hour, SegmentJitter: time.Hour,
				randN: func(n int64) int64 { return n - int64(time.Minute) }},
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				n := l.NumSegments()
				for _, step := range []struct {
					at       time.Duration // after the first batch
					segments int
				}{
					{2 * time.Minute, n},      // the active segment keeps its jitter, 0
					{62 * time.Minute, n + 1}, // rolls at segment.ms; the new one draws 59m
					{64 * time.Minute, n + 2}, // rolls after 1m
				} {
					appendN(t, l, 1, 1, 100, clk.Now().Add(step.at).UnixMilli(), 0)
					if l.NumSegments() != step.segments {
						t.Fatalf("%d segments after an append %v after the first, want %d", l.NumSegments(), step.at, step.segments)
					}
				}
			},
		},
		{
			name:   "file.delete.delay.ms from the next deletion",
			before: Config{SegmentBytes: seg},
			after:  Config{SegmentBytes: seg, FileDeleteDelay: time.Hour},
			check: func(t *testing.T, l *Log, fsys vfs.FS, _ *clock) {
				if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
				if len(deletedFiles(t, fsys)) == 0 {
					t.Fatal("a deleted segment's file went before the new delay")
				}
			},
		},
		{
			name:   "message.timestamp.type from the next append",
			before: Config{SegmentBytes: seg},
			after:  Config{SegmentBytes: seg, LogAppendTime: true},
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				info, err := l.Append(mkBatch(1, 10, 5), 0)
				if err != nil || info.LogAppendTime != clk.Now().UnixMilli() {
					t.Fatalf("append stamped %d (%v), want %d", info.LogAppendTime, err, clk.Now().UnixMilli())
				}
			},
		},
		{
			name:   "flush.messages at once",
			before: Config{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval}},
			after:  Config{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval, IntervalMessages: 1}},
			check: func(t *testing.T, l *Log, _ vfs.FS, _ *clock) {
				syncedAfterAppend(t, l, "flush.messages=1")
			},
		},
		{
			name:   "flush.ms at once, and its removal",
			before: Config{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval}},
			after:  Config{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval, Interval: 5 * time.Millisecond}},
			check: func(t *testing.T, l *Log, _ vfs.FS, _ *clock) {
				syncedAfterAppend(t, l, "a 5 ms flush interval")
				if err := l.Reconfigure(Config{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval}}); err != nil {
					t.Fatal(err)
				}
				wait.For(t, "the flusher without a ticker to exit", func() bool {
					l.flushMu.Lock()
					defer l.flushMu.Unlock()
					return !l.flushMu.running
				})
			},
		},
		{
			name:   "preallocate off: the zeroer stops and the file is cut back",
			before: preallocConfig(1 << 20),
			after:  Config{SegmentBytes: 1 << 20, IndexIntervalBytes: 512},
			check: func(t *testing.T, l *Log, fsys vfs.FS, _ *clock) {
				active := filepath.Join(testDir, segmentName(0, logSuffix))
				if got := fileSize(t, fsys, active); got != l.Size() {
					t.Fatalf("active segment file %d bytes, log %d", got, l.Size())
				}
				zeroed := l.Stats().PreallocBytes
				appendN(t, l, 20, 1, 100, 5, 0)
				if got := fileSize(t, fsys, active); got != l.Size() || l.pre != nil || l.Stats().PreallocBytes != zeroed {
					t.Fatalf("after more appends: file %d bytes, log %d, zeroer %v, zeroed %d then %d", got, l.Size(), l.pre != nil, zeroed, l.Stats().PreallocBytes)
				}
			},
		},
		{
			name:   "preallocate on from the next write",
			before: Config{SegmentBytes: 1 << 20, IndexIntervalBytes: 512},
			after:  preallocConfig(1 << 20),
			check: func(t *testing.T, l *Log, _ vfs.FS, clk *clock) {
				appendN(t, l, 1, 1, 100, clk.Now().UnixMilli(), 0)
				wait.For(t, "the zeroer to write", func() bool { return l.Stats().PreallocBytes > 0 })
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			fsys := vfs.NewMem()
			tc.before.Now, tc.after.Now = clk.Now, clk.Now
			l := openLog(t, fsys, tc.before)
			appendN(t, l, 100, 1, 100, clk.Now().UnixMilli(), 0) // ~15 KiB
			if err := l.Reconfigure(tc.after); err != nil {
				t.Fatal(err)
			}
			tc.check(t, l, fsys, clk)
		})
	}
}

// TestReconfigureRefuses checks that a bad config, a change of flush mode and
// a closed log are refused, and that a refused config changes nothing.
func TestReconfigureRefuses(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 1 << 20})
	for _, cfg := range []Config{
		{SegmentBytes: 1},
		{SegmentBytes: 1 << 20, RetentionBytes: -2},
		{SegmentBytes: 1 << 20, Flush: FlushPolicy{Mode: Interval}},
	} {
		if err := l.Reconfigure(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Reconfigure(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	if got := l.conf().SegmentBytes; got != 1<<20 {
		t.Fatalf("SegmentBytes %d after refused changes", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Reconfigure(Config{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reconfigure after Close = %v, want ErrClosed", err)
	}
}

// TestReconfigureFlusherGoroutines checks that a log gaining a flush interval
// gets a flusher that stays for its ticker, and that one losing it has its
// flusher exit once idle, so that reconfigured logs keep
// TestIdleLogsHoldNoGoroutine's promise.
func TestReconfigureFlusherGoroutines(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{Flush: FlushPolicy{Mode: Interval}})
	appendN(t, l, 1, 1, 10, 5, 0) // for syncedAfterAppend to see Reconfigure's kick synced
	running := func() bool {
		l.flushMu.Lock()
		defer l.flushMu.Unlock()
		return l.flushMu.running
	}
	if err := l.Reconfigure(Config{Flush: FlushPolicy{Mode: Interval, Interval: 5 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	syncedAfterAppend(t, l, "a 5 ms flush interval") // its ticker runs
	if !running() {
		t.Fatal("no flusher with a flush interval")
	}
	for _, every := range []time.Duration{time.Minute, 0} {
		if err := l.Reconfigure(Config{Flush: FlushPolicy{Mode: Interval, Interval: every}}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the flusher to exit", func() bool { return !running() })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// syncedAfterAppend waits until the log is durable to its end (Reconfigure's
// kick of the flusher syncs what came before), then appends one batch, whose
// only way to disk is the new flush policy (the log's Interval policy had no
// trigger), and waits for it to be synced.
func syncedAfterAppend(t *testing.T, l *Log, policy string) {
	t.Helper()
	wait.For(t, "the log durable to its end", func() bool { return l.DurableOffset() == l.LogEndOffset() })
	info, err := l.Append(mkBatch(1, 10, 5), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(ctxTimeout(t), info.LastOffset); err != nil {
		t.Fatalf("an append not synced with %s: %v", policy, err)
	}
}
