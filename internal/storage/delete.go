package storage

import (
	"sync"
	"time"
)

// delayedDeletes holds the log's references to segments it deleted (renamed to
// .deleted) until FileDeleteDelay has passed, as Kafka's "delete-file" task
// does (LocalLog.deleteSegmentFiles). Letting go of them removes each file once
// no reader holds it either (segment.release). A timer per deletion; Close
// lets go of what still waits.
type delayedDeletes struct {
	mu      sync.Mutex
	closed  bool
	pending map[*pendingDelete]struct{}
}

// pendingDelete is one deletion's segments and the timer that releases them.
type pendingDelete struct {
	segs  []*segment
	timer *time.Timer
}

// releaseDeleted drops the log's references to segs, just renamed to
// .deleted, once FileDeleteDelay has passed: at once without a delay or once
// the log is closed.
func (l *Log) releaseDeleted(segs []*segment) {
	if len(segs) == 0 {
		return
	}
	if delay := l.conf().FileDeleteDelay; delay > 0 && l.deletes.hold(segs, delay) {
		return
	}
	releaseSegments(segs)
}

// hold keeps segs until delay has passed; false (nothing held) once closed.
func (d *delayedDeletes) hold(segs []*segment, delay time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	if d.pending == nil {
		d.pending = make(map[*pendingDelete]struct{})
	}
	p := &pendingDelete{segs: segs}
	p.timer = time.AfterFunc(delay, func() { d.expire(p) })
	d.pending[p] = struct{}{}
	return true
}

// expire releases p's segments unless close already did.
func (d *delayedDeletes) expire(p *pendingDelete) {
	d.mu.Lock()
	_, ok := d.pending[p]
	delete(d.pending, p)
	d.mu.Unlock()
	if ok {
		releaseSegments(p.segs)
	}
}

// close stops the timers and releases every segment still waiting, so that
// their files go now (or when their last reader lets go) rather than be left
// for the next Open; later deletions release at once.
func (d *delayedDeletes) close() {
	d.mu.Lock()
	d.closed = true
	pending := d.pending
	d.pending = nil
	d.mu.Unlock()
	for p := range pending {
		p.timer.Stop()
		releaseSegments(p.segs)
	}
}
