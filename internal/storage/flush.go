package storage

import "time"

// The flusher is one goroutine per log. Appends write to the page cache and kick it;
// it fsyncs the active segment, advances the durable offset to the log end offset
// it saw before the fsync began, wakes every WaitDurable caller and calls the
// durable listener. Appends that land while an fsync runs are covered together by
// the next one: that is the group commit. Under the Interval policy the kicks come
// from a record count and a ticker instead.
//
// Gathering. Started the moment the previous one ends, the next fsync would cover
// only the appends that arrived during the previous one, while the appenders it
// just woke are still on their way back: with eight closed-loop appenders the
// fsyncs settle into two alternating cohorts of four. So after an fsync that
// covered n > 1 appends, the flusher waits until n appends have arrived since it
// woke that fsync's waiters (the woken appenders returning) before the next fsync,
// but never longer than half the last fsync took (at most maxGather). A lone
// appender (n = 1) is never delayed.

// maxGather bounds the gathering wait whatever the disk's latency.
const maxGather = 2 * time.Millisecond

// kickFlusher wakes the flusher without blocking.
func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// afterAppend tells the flusher about records just appended.
func (l *Log) afterAppend(records int64) {
	l.appends.Add(1)
	p := l.cfg.Flush
	if p.Mode == GroupCommit {
		l.kickFlusher()
		return
	}
	if p.IntervalMessages > 0 && l.unflushedRecords.Add(records) >= p.IntervalMessages {
		l.kickFlusher()
	}
}

func (l *Log) runFlusher() {
	defer close(l.flusherDone)
	var tick <-chan time.Time
	if p := l.cfg.Flush; p.Mode == Interval && p.Interval > 0 {
		t := time.NewTicker(p.Interval)
		defer t.Stop()
		tick = t.C
	}
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	var r flushResult
	for {
		select {
		case <-l.kick:
		case <-tick:
		case <-l.stop:
			return
		}
		if l.cfg.Flush.Mode == GroupCommit && r.covered > 1 {
			if !l.gatherAppends(gather, r.appendsAtWake+r.covered, min(r.took/2, maxGather)) {
				return
			}
		}
		r = l.flush()
	}
}

// flushResult is what one fsync did, for gathering before the next.
type flushResult struct {
	covered       int64 // appends the fsync made durable
	appendsAtWake int64 // the append count just before the fsync's waiters woke
	took          time.Duration
}

// gatherAppends waits until the append count reaches target or wait passes; false
// if the log is stopping.
func (l *Log) gatherAppends(timer *time.Timer, target int64, wait time.Duration) bool {
	timer.Reset(wait)
	defer timer.Stop()
	for l.appends.Load() < target {
		select {
		case <-l.kick:
		case <-timer.C:
			return true
		case <-l.stop:
			return false
		}
	}
	return true
}

// flush fsyncs the active segment once if the log holds unsynced data (earlier
// segments were fsynced when they rolled).
func (l *Log) flush() flushResult {
	l.mu.RLock()
	if l.mu.failed != nil || l.mu.closed || l.mu.leo <= l.mu.durable {
		l.mu.RUnlock()
		return flushResult{}
	}
	s, end, gen := l.active(), l.mu.leo, l.mu.truncGen
	appends := l.appends.Load()
	s.acquire()
	l.mu.RUnlock()

	l.unflushedRecords.Store(0)
	took, err := l.timedSync(s)
	r := flushResult{took: took}
	s.release()
	if err != nil {
		l.fail(err)
		return r
	}

	l.mu.Lock()
	if gen != l.mu.truncGen {
		// A truncation ran during the sync: end may not exist any more. Try again.
		l.mu.Unlock()
		l.kickFlusher()
		return r
	}
	r.appendsAtWake = l.appends.Load()
	advanced := end > l.mu.durable
	if advanced {
		l.mu.durable = end
		l.notifyLocked()
	}
	l.mu.Unlock()
	if fn := l.listener.Load(); advanced && fn != nil {
		(*fn)(end)
	}
	r.covered = appends - l.flushedAppends
	l.flushedAppends = appends
	return r
}
