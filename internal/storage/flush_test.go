package storage

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// slowSync is an injector that makes every fsync of a .log file take a while, as
// a real disk does, so that concurrent appends pile up behind it.
type slowSync struct{ d time.Duration }

func (s slowSync) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpSync && filepath.Ext(op.Path) == logSuffix {
		time.Sleep(s.d)
	}
	return nil
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	fsys := vfs.NewErrorFS(vfs.NewMem(), slowSync{2 * time.Millisecond})
	l := openLog(t, fsys, Config{})
	var listened atomic.Int64
	l.SetDurableListener(func(end int64) {
		if end < listened.Load() {
			t.Errorf("durable listener went back from %d to %d", listened.Load(), end)
		}
		listened.Store(end)
	})
	const writers, perWriter = 8, 25
	appendDurably(t, l, writers, perWriter)
	st := l.Stats()
	t.Logf("%d appends in %d fsyncs", writers*perWriter, st.Syncs)
	// Without gathering the fsyncs settle into two cohorts of four appends each;
	// with it, nearly all eight share each fsync.
	if st.Syncs > writers*perWriter/5 {
		t.Fatalf("%d fsyncs for %d appends: group commit did not gather", st.Syncs, writers*perWriter)
	}
	end := int64(2 * writers * perWriter)
	wait.For(t, "listener to see the end", func() bool { return listened.Load() == end })
	if st.SyncTime <= 0 || st.SyncMax <= 0 {
		t.Fatalf("sync timings not recorded: %+v", st)
	}
}

// appendDurably runs writers closed-loop appenders, each appending perWriter
// batches of two records and waiting for each to be durable before the next.
func appendDurably(t *testing.T, l *Log, writers, perWriter int) {
	t.Helper()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				info, err := l.Append(mkBatch(2, 100, 0), 0)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
					t.Error(err)
					return
				}
				if l.DurableOffset() <= info.LastOffset {
					t.Errorf("WaitDurable returned with durable %d <= %d", l.DurableOffset(), info.LastOffset)
				}
			}
		}()
	}
	wg.Wait()
}

func TestIntervalFlushByMessages(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, Config{Flush: FlushPolicy{Mode: Interval, IntervalMessages: 10}})
	appendN(t, l, 3, 3, 10, 0, 0) // 9 records: below the trigger
	if err := waitCtx(l, 8, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("9 records were synced (%v); the trigger is 10", err)
	}
	if got := l.Stats().Syncs; got != 0 {
		t.Fatalf("%d syncs before the trigger", got)
	}
	appendN(t, l, 1, 1, 10, 0, 0)
	if err := l.WaitDurable(ctxTimeout(t), 9); err != nil {
		t.Fatal(err)
	}
}

func TestIntervalFlushByTime(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{Flush: FlushPolicy{Mode: Interval, Interval: 5 * time.Millisecond}})
	appendN(t, l, 1, 1, 10, 0, 0)
	if err := l.WaitDurable(ctxTimeout(t), 0); err != nil {
		t.Fatal(err)
	}
}

// waitCtx waits for offset to become durable for at most d.
func waitCtx(l *Log, offset int64, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.WaitDurable(ctx, offset)
}

func TestRollMakesOldSegmentDurable(t *testing.T) {
	// No flush triggers at all: only a roll (and Close) syncs, as in Kafka's default.
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, Flush: FlushPolicy{Mode: Interval}})
	batches := appendN(t, l, 4096/len(mkBatch(1, 100, 0))+1, 1, 100, 0, 0)
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	if err := l.WaitDurable(ctxTimeout(t), int64(len(batches)-2)); err != nil {
		t.Fatal(err)
	}
}

func TestWaitDurableAfterTruncation(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{Flush: FlushPolicy{Mode: Interval}})
	appendN(t, l, 4, 1, 10, 0, 0)
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(context.Background(), 3) }()
	if err := l.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrTruncated) {
		t.Fatalf("WaitDurable on a truncated offset = %v", err)
	}
}

func TestFailStopOnSyncError(t *testing.T) {
	mem := vfs.NewMem()
	rule := vfs.FailOn(vfs.OpSync).Path("*.log").After(2)
	l := openLog(t, vfs.NewErrorFS(mem, rule), Config{})
	var heard []error
	var heardMu sync.Mutex
	l.SetFailureListener(func(err error) {
		heardMu.Lock()
		heard = append(heard, err)
		heardMu.Unlock()
	})
	var lastErr error
	for i := 0; lastErr == nil && i < 100; i++ {
		info, err := l.Append(mkBatch(1, 10, 0), 0)
		if err != nil {
			lastErr = err
			break
		}
		lastErr = l.WaitDurable(ctxTimeout(t), info.LastOffset)
	}
	if !errors.Is(lastErr, ErrLogFailed) || !errors.Is(lastErr, vfs.ErrInjected) {
		t.Fatalf("after a failed fsync: %v", lastErr)
	}
	durable := l.DurableOffset()
	rule.Disable() // the disk recovers, but the log must not trust it
	checks := []struct {
		name string
		err  error
	}{
		{"Append", func() error { _, err := l.Append(mkBatch(1, 10, 0), 0); return err }()},
		{"AppendAsFollower", func() error { _, err := l.AppendAsFollower(mkBatch(1, 10, 0)); return err }()},
		{"WaitDurable", l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1)},
		{"Truncate", l.Truncate(0)},
		{"DeleteRecords", l.DeleteRecords(1)},
		{"AssignEpoch", l.AssignEpoch(3, l.LogEndOffset())},
		{"EnforceRetention", func() error { _, err := l.EnforceRetention(0); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, ErrLogFailed) {
			t.Errorf("%s on a failed log = %v", c.name, c.err)
		}
	}
	if _, err := l.Read(0, 100, l.LogEndOffset()); err != nil {
		t.Errorf("reads must still work: %v", err)
	}
	// The log wakes its waiters as it fails and calls the listener after.
	heardCount := func() int {
		heardMu.Lock()
		defer heardMu.Unlock()
		return len(heard)
	}
	waitFor(t, func() bool { return heardCount() > 0 }, "the failure listener")
	heardMu.Lock()
	if len(heard) != 1 || !errors.Is(heard[0], ErrLogFailed) || !errors.Is(l.Err(), vfs.ErrInjected) {
		t.Errorf("failure listener heard %v (want one ErrLogFailed); Err() = %v", heard, l.Err())
	}
	heardMu.Unlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(filepath.Join(testDir, cleanShutdownName)); !isNotExist(err) {
		t.Fatalf("a failed log left a clean-shutdown marker: %v", err)
	}
	r := openLog(t, mem, Config{})
	if r.LogEndOffset() < durable || r.Stats().RecoveredSegments == 0 {
		t.Fatalf("reopen: end %d (durable was %d), stats %+v", r.LogEndOffset(), durable, r.Stats())
	}
}

func TestFailStopOnShortWrite(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if armed.Load() && op.Kind == vfs.OpWrite && filepath.Ext(op.Path) == logSuffix {
			return &vfs.ShortWriteError{N: 20, Err: vfs.ErrInjected}
		}
		return nil
	})
	l := openLog(t, vfs.NewErrorFS(mem, inj), Config{})
	want := appendN(t, l, 3, 2, 10, 0, 0)
	armed.Store(true)
	if _, err := l.Append(mkBatch(2, 10, 0), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Append with a short write = %v", err)
	}
	armed.Store(false)
	if _, err := l.Append(mkBatch(2, 10, 0), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Append after a failed write = %v", err)
	}
	if l.LogEndOffset() != 6 {
		t.Fatalf("failed append moved the log end to %d", l.LogEndOffset())
	}
	l.Close()
	r := openLog(t, mem, Config{})
	if st := r.Stats(); st.RecoveryTruncatedBytes != 20 {
		t.Fatalf("recovery dropped %d bytes, want the 20 of the short write", st.RecoveryTruncatedBytes)
	}
	sameBatches(t, readAll(t, r), want)
}

// TestGatherWakesFlusherOnce checks that a gathering flusher is woken by the
// append that reaches its target, not by every append before it: eight
// closed-loop appenders behind slow fsyncs make each gather wait for about seven.
func TestGatherWakesFlusherOnce(t *testing.T) {
	fsys := vfs.NewErrorFS(vfs.NewMem(), slowSync{2 * time.Millisecond})
	l := openLog(t, fsys, Config{})
	const writers, perWriter = 8, 25
	appendDurably(t, l, writers, perWriter)
	gathers, early := l.stats.gathers.Load(), l.stats.earlyGatherWakeups.Load()
	t.Logf("%d appends, %d fsyncs, %d gathers, %d early wake-ups", writers*perWriter, l.Stats().Syncs, gathers, early)
	if gathers == 0 {
		t.Fatal("the flusher never gathered")
	}
	// An early wake-up is possible only from a signal meant for an earlier
	// gather that timed out; one per gather is the old, woken-by-every-append
	// flusher's lower bound.
	if early > gathers/4 {
		t.Fatalf("%d early wake-ups in %d gathers: the flusher was woken before its target", early, gathers)
	}
}

// TestAppendHints: an append hinted as followed shares its fsync with the
// append right behind it (a pipelining producer's next request), where the
// second append used to land while the first one's fsync ran and wait for a
// second fsync in sequence; with no append behind it, the first is made
// durable after the bounded wait all the same. An append hinted to flush
// within a bound starts no fsync: the next append's covers it, or one at its
// bound. What was waited for survives a power cut. In a synctest bubble, so
// the 2 ms fsyncs and the bounds are fake time and the order of the appends
// against the flusher is fixed.
func TestAppendHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const syncTook = 2 * time.Millisecond
		mem := vfs.NewMem()
		l := openLog(t, vfs.NewErrorFS(mem, slowSync{syncTook}), Config{})
		ctx := context.Background()
		appendWith := func(hints AppendHints) int64 {
			t.Helper()
			// mkBatch's batches are valid: no need to check their CRCs.
			info, err := l.AppendValidated(mkBatch(1, 100, 0), 0, hints)
			if err != nil {
				t.Fatal(err)
			}
			return info.LastOffset
		}
		appendOne := func() int64 { return appendWith(AppendHints{}) }
		durable := func(offset int64) {
			t.Helper()
			if err := l.WaitDurable(ctx, offset); err != nil {
				t.Fatal(err)
			}
		}
		durable(appendOne()) // one fsync: the bound of the next gathering

		for _, tc := range []struct {
			name   string
			expect bool
			behind bool // a second append follows once the flusher is blocked
			syncs  int64
		}{
			// Each case follows an fsync that covered one append, so the
			// gathering after an fsync of several (TestGatherWakesFlusherOnce)
			// plays no part.
			{"followed, not expected", false, true, 2},
			{"expected, nothing behind", true, false, 1},
			{"expected and followed", true, true, 1},
		} {
			syncs := l.Stats().Syncs
			start := time.Now()
			last := appendWith(AppendHints{Followed: tc.expect})
			synctest.Wait() // the flusher is in its fsync or gathering
			if tc.behind {
				last = appendOne()
			}
			durable(last)
			if got := l.Stats().Syncs - syncs; got != tc.syncs {
				t.Errorf("%s: %d fsyncs, want %d", tc.name, got, tc.syncs)
			}
			// At worst the gathering's bound, then the fsync (or two fsyncs in
			// sequence).
			if took := time.Since(start); took > 2*syncTook+maxGather {
				t.Errorf("%s: durable after %v", tc.name, took)
			}
		}

		// A chain: a pipelining producer's queued requests, each appended
		// with the next one read already. The gathering waits for each in
		// turn and one fsync covers all three (the second append used to end
		// the gathering, and the third waited for a second fsync).
		durable(appendOne()) // the last fsync covered one append: no gathering of its own
		syncs := l.Stats().Syncs
		start := time.Now()
		appendWith(AppendHints{Followed: true})
		synctest.Wait() // the flusher gathers for the second append
		appendWith(AppendHints{Followed: true})
		synctest.Wait() // for the third, within the same bound
		durable(appendOne())
		if got := l.Stats().Syncs - syncs; got != 1 {
			t.Errorf("a chain of three followed appends: %d fsyncs, want 1", got)
		}
		if took := time.Since(start); took > syncTook+maxGather {
			t.Errorf("a chain of three followed appends: durable after %v", took)
		}

		// A deferred append wakes no flusher: its fsync comes at its bound, or
		// with the next append's.
		const within = 10 * time.Millisecond
		syncs = l.Stats().Syncs
		start = time.Now()
		last := appendWith(AppendHints{FlushWithin: within})
		synctest.Wait()
		if got := l.Stats().Syncs - syncs; got != 0 {
			t.Errorf("a deferred append started %d fsyncs", got)
		}
		durable(last)
		if took := time.Since(start); took < within || took > within+maxGather+syncTook {
			t.Errorf("a deferred append alone was durable after %v, want its bound %v and one fsync", took, within)
		}
		syncs, start = l.Stats().Syncs, time.Now()
		appendWith(AppendHints{FlushWithin: within})
		last = appendOne()
		durable(last)
		if got, took := l.Stats().Syncs-syncs, time.Since(start); got != 1 || took >= within {
			t.Errorf("a deferred append and the next: %d fsyncs, durable after %v; want 1, before %v", got, took, within)
		}

		// A deferred append's bound that passes after a later fsync covered
		// it starts no fsync, whatever newer deferred append is pending:
		// that one waits for its own bound.
		time.Sleep(within + maxGather + syncTook) // past every earlier bound
		synctest.Wait()
		syncs, start = l.Stats().Syncs, time.Now()
		appendWith(AppendHints{FlushWithin: within})
		durable(appendOne())
		time.Sleep(within / 2)
		last = appendWith(AppendHints{FlushWithin: within})
		time.Sleep(within/2 + time.Millisecond) // past the first one's bound
		synctest.Wait()
		if got := l.Stats().Syncs - syncs; got != 1 {
			t.Errorf("a covered deferred append's bound: %d fsyncs, want 1 (the second deferred append fsynced before its bound)", got)
		}
		durable(last)
		if took := time.Since(start); took < within/2+within {
			t.Errorf("the second deferred append was durable after %v, want its own bound %v", took, within/2+within)
		}

		want := l.LogEndOffset()
		reopened := openLog(t, mem.CrashClone(), Config{})
		if got := reopened.LogEndOffset(); got != want {
			t.Fatalf("after a power cut the log ends at %d, want %d: an acknowledged append was lost", got, want)
		}
	})
}

// TestBigAppendsNotGathered: after an fsync that covered two appends, the
// next append's fsync waits for a second returning append (up to half the
// last fsync) when the appends are small, and starts at once when they
// average bigAppendBytes or more. In a synctest bubble: 2 ms fsyncs of fake
// time.
func TestBigAppendsNotGathered(t *testing.T) {
	const syncTook = 2 * time.Millisecond
	for _, tc := range []struct {
		name    string
		value   int
		minTook time.Duration // from the lone append to its durability
		maxTook time.Duration
	}{
		{"small appends gather", 100, syncTook + syncTook/2, syncTook + syncTook/2 + time.Millisecond},
		{"big appends do not", bigAppendBytes + 1<<10, syncTook, syncTook + time.Millisecond/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := openLog(t, vfs.NewErrorFS(vfs.NewMem(), slowSync{syncTook}), Config{})
				ctx := context.Background()
				appendOne := func() int64 {
					t.Helper()
					info, err := l.AppendValidated(mkBatch(1, tc.value, 0), 0, AppendHints{})
					if err != nil {
						t.Fatal(err)
					}
					return info.LastOffset
				}
				appendOne()
				synctest.Wait() // the flusher is in the first append's fsync
				appendOne()
				last := appendOne() // both land during it: the next fsync covers two
				if err := l.WaitDurable(ctx, last); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				start := time.Now()
				if err := l.WaitDurable(ctx, appendOne()); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took < tc.minTook || took > tc.maxTook {
					t.Errorf("%d-byte appends: the lone append was durable after %v, want %v to %v", tc.value, took, tc.minTook, tc.maxTook)
				}
			})
		})
	}
}

// TestGatherBackoff plays the endings of gatherings after fsyncs of several
// appends against the backoff: a closed loop's (nearly every gathering reaches
// its target, and one that runs out ends at its bound) must keep gathering, a
// paced producer's (half run out, overrunning the bound) must leave most
// fsyncs alone, and a paced load that turns into a closed loop must gather
// again within a few hundred fsyncs.
func TestGatherBackoff(t *testing.T) {
	type ending struct{ reached, overran bool }
	hit, cheapMiss, miss := ending{true, false}, ending{false, false}, ending{false, true}
	// play runs n fsyncs whose gatherings end in the pattern's turn, one
	// after another, and returns the share of them that gathered.
	play := func(g *gatherBackoff, n int, pattern []ending) float64 {
		gathered := 0
		for range n {
			if g.take() {
				e := pattern[gathered%len(pattern)]
				g.learn(e.reached, e.overran)
				gathered++
			}
		}
		return float64(gathered) / float64(n)
	}
	closedLoop := []ending{hit, hit, hit, hit, cheapMiss, hit, hit, hit, hit, miss}
	paced := []ending{miss, hit}

	for _, tc := range []struct {
		name     string
		warmup   []ending // played first, for 1,000 fsyncs
		pattern  []ending
		min, max float64 // the share of the next 1,000 fsyncs that gather
	}{
		{"closed loop", nil, closedLoop, 1, 1},
		{"paced", nil, paced, 0, 0.05},
		{"paced, then a closed loop", paced, closedLoop, 0.7, 1},
		{"a closed loop, then paced", closedLoop, paced, 0, 0.05},
	} {
		var g gatherBackoff
		if tc.warmup != nil {
			play(&g, 1000, tc.warmup)
		}
		if got := play(&g, 1000, tc.pattern); got < tc.min || got > tc.max {
			t.Errorf("%s: %.3f of the fsyncs gathered, want %.2f to %.2f", tc.name, got, tc.min, tc.max)
		}
	}
}
