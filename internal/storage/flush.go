package storage

import "time"

// The flusher does every fsync of a log's active segment. Appends write to the
// page cache and kick it; it fsyncs the active segment, advances the durable
// offset to the log end offset it saw before the fsync began, wakes every
// WaitDurable caller and calls the durable listener. Appends that land while an
// fsync runs are covered together by the next one: that is the group commit.
// Under the Interval policy the kicks come from a record count and, with an
// Interval, a ticker.
//
// Goroutines. A log that is not being written holds no goroutine: a kick starts
// the flusher goroutine when none runs, and it exits once no kick came for
// flusherLinger after an fsync (a broker with 10,000 quiet partitions keeps no
// 10,000 parked goroutines and their stacks, while a producer sending one
// request at a time does not start, grow and time a new flusher for each).
// Only an Interval log with a time trigger keeps its flusher for its life, for
// the ticker. At most one flusher runs per log; flushMu orders a kick against an
// exit so that no kick is missed, and Close waits for a running flusher.
// The fsync itself takes one of the process's syncSlots (log.go): a flusher in
// fsync holds an OS thread, and the runtime never gives a thread back.
//
// Gathering. Started the moment the previous one ends, the next fsync would cover
// only the appends that arrived during the previous one, while the appenders it
// just woke are still on their way back: with eight closed-loop appenders the
// fsyncs settle into two alternating cohorts of four. So after an fsync that
// covered n > 1 appends, the flusher waits until n appends have arrived since it
// woke that fsync's waiters (the woken appenders returning) before the next fsync,
// but never longer than half the last fsync took (at most maxGather). A lone
// appender (n = 1) is never delayed, nor, for long, producers that send at a
// rate: their appends were not on their way, so a gathering runs out before its
// target and only delays the fsync, and that backs the gathering off
// (gatherBackoff), nor appends of bigAppendBytes or more on average, whose own
// write-back outweighs the fsync's fixed cost that a shared fsync would save.
// What the last fsync covered is kept on the log, so a flusher
// that exited and was started again still gathers. While it
// gathers the flusher does not take kicks: the append that reaches the target
// wakes it once (gatherTarget, gathered), so the appends before it cost no
// goroutine wake-up each.
//
// Hints (AppendHints). Gathering learns from the last fsync; a producer that
// pipelines requests tells more: when its next request is already read as one
// is appended (Followed), the fsync that would cover that append alone waits
// for the next one too (in the same wait as gathering, with its bound),
// instead of starting at once and leaving the next append to a second fsync
// in sequence. The hint chains: an append that ends a gathering and is followed
// itself moves the target on, so a producer's requests queued one behind the
// other (the Java client's 16 KiB batches, up to five in flight) join one
// fsync, all within the one bound. A transactional producer's flush is the
// case too: franz-go sends a 1,000-record transaction of 1 KiB records as a
// full 1 MB batch and, at the flush, the tail right behind it; the
// transaction's end waits for both. And
// an append nobody waits for (FlushWithin) wakes no flusher: a later append's
// fsync covers it, or one started by a timer at its bound.

// maxGather bounds the gathering wait whatever the disk's latency.
const maxGather = 2 * time.Millisecond

// bigAppendBytes: when the last fsync's appends averaged this much or more,
// the flusher does not gather for the woken appenders' return. Such an
// append takes about as long to write back as an fsync's fixed cost, so
// sharing one saves little, and waiting for the returning ones holds the disk
// idle and the producers in step: franz-go's 1 MB batches, five in flight, on
// one partition ran at 622k-726k records/s with the wait and 695k-910k
// without (session 29). A Followed append is still waited for.
const bigAppendBytes = 256 << 10

// flusherLinger is how long an idle flusher waits for the next kick before it
// exits.
const flusherLinger = 10 * time.Millisecond

// kickFlusher wakes the flusher, starting it if none runs, without blocking.
func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if !l.flushMu.running && !l.flushMu.stopped {
		l.startFlusherLocked()
	}
}

// startFlusher starts the flusher goroutine; none runs yet.
func (l *Log) startFlusher() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.startFlusherLocked()
}

// startFlusherLocked starts the flusher goroutine. flushMu is held.
func (l *Log) startFlusherLocked() {
	l.flushMu.running = true
	l.flushMu.done.Add(1)
	go l.runFlusher()
}

// stopFlusher stops the flusher and waits for it to exit; no kick starts one
// afterwards.
func (l *Log) stopFlusher() {
	l.markFlusherStopped()
	close(l.stop)
	l.flushMu.done.Wait()
}

// markFlusherStopped makes every later kick leave the flusher unstarted.
func (l *Log) markFlusherStopped() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.flushMu.stopped = true
}

// idleExit reports whether the flusher may exit: no kick is pending (checked
// under flushMu, so a later kick starts a new flusher). It marks the flusher
// gone when it may.
func (l *Log) idleExit() bool {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if len(l.kick) > 0 {
		return false
	}
	l.flushMu.running = false
	return true
}

// AppendHints tell a group-commit log's flusher about one append
// (AppendValidated); they change when its fsync runs, never what an fsync
// makes durable.
type AppendHints struct {
	// Followed: another append comes right behind this one (a pipelining
	// producer's next request is read already). The fsync that would cover
	// this append alone may wait for that one too, no longer than a
	// gathering waits (half the last fsync, at most maxGather), so that both
	// share it.
	Followed bool
	// FlushWithin, when positive: the append does not wake the flusher; the
	// fsync of a later append covers it, or one at the latest this long
	// after it. For records a crash may lose without harm, which nobody
	// waits for (a transaction coordinator's states that an earlier
	// committed state stands for), or whose waiter can afford the bound (a
	// transaction's marker, which the producer's next batch usually
	// follows), so that they cost no fsync of their own.
	FlushWithin time.Duration
}

// afterAppend tells the flusher about records just appended, ending at end
// (the log end offset after them).
func (l *Log) afterAppend(records, end int64, hints AppendHints) {
	if hints.FlushWithin > 0 {
		// Read apart from the count by flush: a race may miscount one, which
		// only shifts a gathering, a heuristic.
		l.deferredAppends.Add(1)
	}
	p := l.conf().Flush
	if p.Mode == GroupCommit && hints.Followed {
		// Stored before the count (appendMu orders the appends), so that a
		// gathering flusher that sees this append counted sees its follower
		// expected too (gatherAppends).
		l.expectTarget.Store(l.appends.Load() + 2)
	}
	n := l.appends.Add(1)
	if p.Mode == GroupCommit {
		// The append that reaches a gathering flusher's target ends its wait. The
		// flusher stores the target before it reads the count, and this append
		// counts before it reads the target, so one of the two sees the other.
		if n == l.gatherTarget.Load() {
			select {
			case l.gathered <- struct{}{}:
			default:
			}
		}
		if hints.FlushWithin > 0 {
			// At the bound, only if no fsync covered the append meanwhile:
			// a kick then would fsync whatever newer deferred append is
			// pending, long before its own bound (a transaction
			// coordinator's unacked state 100 ms later, one per
			// transaction, took an fsync of its own in most transactions).
			time.AfterFunc(hints.FlushWithin, func() {
				if l.mu.durable.Load() < end {
					l.kickFlusher()
				}
			})
			return
		}
		l.kickFlusher()
		return
	}
	if p.IntervalMessages > 0 && l.unflushedRecords.Add(records) >= p.IntervalMessages {
		l.kickFlusher()
	}
}

// runFlusher is the flusher goroutine. It reads the flush policy on every
// wake-up: while the policy has a time trigger (FlushPolicy.tick) it keeps a
// ticker and stays resident; otherwise it lingers for a kick and exits when
// idle. Reconfigure kicks it after a policy change, so a new interval takes
// effect at once and a flusher whose ticker was removed exits.
func (l *Log) runFlusher() {
	defer l.flushMu.done.Done()
	var ticker *time.Ticker
	var every time.Duration // the ticker's period; 0: no ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	// One timer bounds both the linger for a kick and the gathering (Go 1.23
	// timers: Reset and Stop leave no stale tick behind).
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if want := l.conf().Flush.tick(); want != every {
			switch {
			case want == 0:
				ticker.Stop()
				ticker = nil
			case ticker == nil:
				ticker = time.NewTicker(want)
			default:
				ticker.Reset(want)
			}
			every = want
		}
		var tick, linger <-chan time.Time
		if ticker != nil {
			tick = ticker.C
		} else {
			timer.Reset(flusherLinger)
			linger = timer.C
		}
		select {
		case <-l.kick:
		case <-tick:
		case <-linger:
			if l.idleExit() {
				return
			}
			continue // a kick is pending
		case <-l.stop:
			return
		}
		timer.Stop()
		if r := l.lastFlush; l.conf().Flush.Mode == GroupCommit {
			// One wait, for the expected append (AppendHints.Followed) or as
			// many as the last fsync covered, whichever is further.
			target := l.expectTarget.Swap(0)
			if target <= l.appends.Load() {
				target = 0
			}
			covering := false
			if r.covered > 1 && r.bytes < bigAppendBytes*r.covered && l.gatherSkip.take() {
				covering = r.appendsAtWake+r.covered > target
				target = max(target, r.appendsAtWake+r.covered)
			}
			if target > 0 {
				wait, start := min(r.took/2, maxGather), time.Now()
				reached, ok := l.gatherAppends(timer, target, wait)
				if !ok {
					return
				}
				if covering {
					l.gatherSkip.learn(reached, time.Since(start) > 2*wait)
				}
			}
		}
		// A kick whose appends an earlier fsync covered (a deferred append's,
		// AppendHints.FlushWithin) syncs nothing: the gathering keeps the
		// last real fsync.
		if r := l.flush(); r.synced {
			l.lastFlush = r
		}
	}
}

// flushResult is what one fsync did, for gathering before the next.
type flushResult struct {
	synced        bool  // an fsync ran
	covered       int64 // appends the fsync made durable, deferred ones not counted
	bytes         int64 // of the active segment, synced by it (all of it after a roll)
	appendsAtWake int64 // the append count just before the fsync's waiters woke
	took          time.Duration
}

// gatherAppends waits until the append count reaches target, or the target a
// followed append moved it to, or wait passes; reached is false if wait
// passed first, ok false if the log is stopping. The kicks of the appends it
// waited for are dropped: the fsync that follows covers them.
func (l *Log) gatherAppends(timer *time.Timer, target int64, wait time.Duration) (reached, ok bool) {
	select {
	case <-l.gathered: // left by an append that reached an earlier target late
	default:
	}
	defer l.gatherTarget.Store(0)
	timer.Reset(wait)
	defer timer.Stop()
	l.stats.gathers.Add(1)
	for {
		// An append that arrived followed (AppendHints.Followed) moves the
		// target on to its follower, within the same bound: a pipelining
		// producer's queued requests join this fsync one after another.
		target = max(target, l.expectTarget.Load())
		l.gatherTarget.Store(target)
		if l.appends.Load() >= target && l.expectTarget.Load() <= target {
			break
		}
		select {
		case <-l.gathered:
			if l.appends.Load() < target {
				l.stats.earlyGatherWakeups.Add(1)
			}
		case <-timer.C:
			l.dropKick()
			return false, true
		case <-l.stop:
			return false, false
		}
	}
	l.dropKick()
	return true, true
}

// gatherBackoff decides whether the flusher gathers after an fsync that covered
// several appends. Appenders in a closed loop, woken by the last fsync and
// coming straight back, reach the target nine times in ten (eight writers,
// BenchmarkAppend), and the process is busy, so a gathering that runs out ends
// at its bound. Producers that send at a rate reach it about half the time, by
// chance, and the rest of the time the gathering only delays the fsync, and by
// far more than its bound: on an idle process Go's timer fires up to a
// millisecond late, where the bound is half an fsync, a tenth of that. So a
// gathering that ran out and overran its bound (twice it) is a miss and costs
// two, one that reached its target pays one back, and past a debt of
// freeGatherDebt the fsyncs after each miss start at once, twice as many for
// each miss more (at most 1 << (maxGatherDebt - freeGatherDebt)). A closed
// loop stays out of debt; a paced producer's debt grows and its fsyncs are
// soon left alone. The flusher's own.
type gatherBackoff struct {
	skip int // fsyncs of several appends left to start without gathering
	debt int // two per miss less one per hit, within [0, maxGatherDebt]
}

const (
	freeGatherDebt = 4
	// maxGatherDebt caps the debt, so that a load that turns into a closed
	// loop gathers again after a few hits.
	maxGatherDebt = freeGatherDebt + 8
)

// take reports whether the flusher gathers now, counting a skipped one.
func (g *gatherBackoff) take() bool {
	if g.skip > 0 {
		g.skip--
		return false
	}
	return true
}

// learn records how a gathering ended: whether it reached its target, and
// whether it took more than twice its bound.
func (g *gatherBackoff) learn(reached, overran bool) {
	if reached {
		g.debt = max(g.debt-1, 0)
		return
	}
	if !overran {
		return
	}
	g.debt = min(g.debt+2, maxGatherDebt)
	if g.debt > freeGatherDebt {
		g.skip = 1 << (g.debt - freeGatherDebt)
	}
}

// dropKick takes a pending kick, if any. The flusher calls it just before an
// fsync: an append's data is in the log before its kick, so the fsync covers
// every append whose kick it took.
func (l *Log) dropKick() {
	select {
	case <-l.kick:
	default:
	}
}

// flush fsyncs the active segment once if the log holds unsynced data (earlier
// segments were fsynced when they rolled), then drops what it made durable from
// the page cache but the segment's tail (cache.go).
func (l *Log) flush() flushResult {
	t, ok := l.acquireFlushTarget()
	if !ok {
		return flushResult{}
	}
	defer t.seg.release()

	l.unflushedRecords.Store(0)
	took, err := l.timedSync(t.seg)
	r := flushResult{synced: true, took: took}
	if err != nil {
		l.fail(err)
		return r
	}

	untruncated, advanced, appendsAtWake := l.advanceDurable(t)
	if !untruncated {
		// A truncation ran during the sync: end may not exist any more. Try again.
		l.kickFlusher()
		return r
	}
	r.appendsAtWake = appendsAtWake
	if fn := l.listener.Load(); advanced && fn != nil {
		(*fn)(t.end)
	}
	// Deferred appends are not counted: the gathering before the next fsync
	// waits for appends that someone waits for.
	r.covered = max(0, t.appends-l.flushedAppends-(t.deferred-l.flushedDeferred))
	l.flushedAppends, l.flushedDeferred = t.appends, t.deferred
	r.bytes = t.size
	if t.seg == l.flushedSeg {
		r.bytes -= l.flushedSize
	}
	l.flushedSeg, l.flushedSize = t.seg, t.size
	l.dropCache(t.seg, t.size)
	return r
}

// flushTarget is what an fsync of the active segment is to make durable.
type flushTarget struct {
	seg       *segment
	end, size int64  // the log end offset and the segment's size before the fsync
	truncGen  uint64 // the truncation generation then
	// The append and deferred append counts then: an append is counted after
	// its data is published, so the fsync covers every append counted.
	appends, deferred int64
}

// acquireFlushTarget returns, acquired, the active segment and what an fsync of
// it now makes durable, or ok false when the log holds no unsynced data or
// must not be fsynced (failed, closed).
func (l *Log) acquireFlushTarget() (t flushTarget, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.failed != nil || l.mu.closed || l.mu.leo.Load() <= l.mu.durable.Load() {
		return flushTarget{}, false
	}
	s := l.active()
	t = flushTarget{seg: s, end: l.mu.leo.Load(), size: s.size, truncGen: l.mu.truncGen,
		deferred: l.deferredAppends.Load(), appends: l.appends.Load()}
	s.acquire()
	return t, true
}

// advanceDurable moves the durable offset up to the fsynced target's end and
// wakes WaitDurable callers if that advanced it. untruncated is false, and
// nothing changes, when a truncation ran since the target was taken;
// appendsAtWake is the append count just before the waiters woke.
func (l *Log) advanceDurable(t flushTarget) (untruncated, advanced bool, appendsAtWake int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.truncGen != l.mu.truncGen {
		return false, false, 0
	}
	appendsAtWake = l.appends.Load()
	advanced = t.end > l.mu.durable.Load()
	if advanced {
		l.mu.durable.Store(t.end)
		l.notifyLocked()
	}
	return true, advanced, appendsAtWake
}
