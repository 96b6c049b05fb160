package storage

import "time"

// CopyLag holds closed segments back from upload for a while (Kafka 4.4's
// remote.copy.lag.ms and remote.copy.lag.bytes, with -1 there already resolved
// to the local retention): a segment may go once its newest record is at least
// Age old (or dated in the future), or once at least Bytes of the log follow
// it, whichever comes first. Either one 0 uploads every segment at once, as
// the zero CopyLag does; a negative one never releases a segment, so with both
// negative nothing is uploaded. Uploads keep offset order: a segment held back
// holds back those after it.
type CopyLag struct {
	Age   time.Duration
	Bytes int64
}

// immediate reports whether every closed segment may go at once.
func (c CopyLag) immediate() bool { return c.Age == 0 || c.Bytes == 0 }

// allows reports whether a segment whose newest record is dated newest (Unix
// milliseconds), with after bytes of the log following it, may go at now.
func (c CopyLag) allows(newest, after int64, now time.Time) bool {
	if c.immediate() {
		return true
	}
	if age := now.UnixMilli() - newest; c.Age > 0 && (age < 0 || age >= c.Age.Milliseconds()) {
		return true
	}
	return c.Bytes > 0 && after >= c.Bytes
}

// copyEnd returns the end of the closed segments an upload from offset from
// may take at now: those that end at or below limit (closedEndAtOrBelow),
// up to the first that lag holds back, counting from the one holding from.
func (l *Log) copyEnd(from, limit int64, lag CopyLag, now time.Time) int64 {
	end := l.closedEndAtOrBelow(limit)
	if lag.immediate() {
		return end
	}
	views, total := l.sealedViewsAndSize()
	defer releaseViews(views)
	var through int64 // bytes of the segments up to and including v
	for _, v := range views {
		through += v.size
		if v.next <= from {
			continue
		}
		if v.s.base >= end {
			break
		}
		// A timestamp that cannot be read lets the segment go, as in Kafka:
		// the upload's own read of it reports the damage.
		newest, err := v.s.newestTimestamp(&l.stats)
		if err == nil && !lag.allows(newest, total-through, now) {
			return v.s.base
		}
	}
	return end
}

// sealedViewsAndSize returns sealedViews and the bytes of the whole log,
// active segment included, as of the same moment.
func (l *Log) sealedViewsAndSize() ([]segmentView, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed || l.mu.failed != nil {
		return nil, 0
	}
	segs := l.mu.segments
	views := make([]segmentView, 0, len(segs)-1)
	var total int64
	for i, s := range segs {
		total += s.size
		if i < len(segs)-1 {
			views = append(views, acquireViewLocked(s))
		}
	}
	return views, total
}
