package storage

import "time"

// The flusher is one goroutine per log. Appends write to the page cache and kick it;
// it fsyncs the active segment, advances the durable offset to the log end offset
// it saw before the fsync began, wakes every WaitDurable caller and calls the
// durable listener. Appends that land while an fsync runs are covered together by
// the next one: that is the group commit. Under the Interval policy the kicks come
// from a record count and a ticker instead.

// kickFlusher wakes the flusher without blocking.
func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// afterAppend tells the flusher about records just appended.
func (l *Log) afterAppend(records int64) {
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
	for {
		select {
		case <-l.kick:
		case <-tick:
		case <-l.stop:
			return
		}
		l.flush()
	}
}

// flush fsyncs the active segment once if the log holds unsynced data. Earlier
// segments were fsynced when they rolled.
func (l *Log) flush() {
	l.mu.RLock()
	if l.mu.failed != nil || l.mu.closed || l.mu.leo <= l.mu.durable {
		l.mu.RUnlock()
		return
	}
	s, end, gen := l.active(), l.mu.leo, l.mu.truncGen
	s.acquire()
	l.mu.RUnlock()

	l.unflushedRecords.Store(0)
	err := l.syncSegment(s)
	s.release()
	if err != nil {
		l.fail(err)
		return
	}

	l.mu.Lock()
	if gen != l.mu.truncGen {
		// A truncation ran during the sync: end may not exist any more. Try again.
		l.mu.Unlock()
		l.kickFlusher()
		return
	}
	advanced := end > l.mu.durable
	if advanced {
		l.mu.durable = end
		l.notifyLocked()
	}
	l.mu.Unlock()
	if fn := l.listener.Load(); advanced && fn != nil {
		(*fn)(end)
	}
}
