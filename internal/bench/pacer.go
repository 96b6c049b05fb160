package bench

import (
	"context"
	"time"
)

// pacer spaces one producer's sends at a fixed rate, open loop: the k-th send (from
// 0) is due at start + k/rate whatever happened to the earlier ones, so a producer
// that fell behind sends back to back until it has caught up. A zero rate means
// every send is due at once.
type pacer struct {
	start time.Time
	rate  float64 // sends per second
	k     int64
	fine  *fineTimer // made by the first wait; nil where the OS has none
	woke  time.Time  // when the last wait ended
}

// fineSpan is how much of a wait before a due time is slept on the fine timer. Go's
// own timers fire up to a millisecond late when the process is idle (its netpoller
// sleeps in whole milliseconds), which a paced run would count as the broker's
// latency: an idle 2-core machine measured a median of 0.54 ms and a p99 of 1.06 ms
// late for Go timers against 31 us and 70 us for a Linux timerfd.
const fineSpan = 2 * time.Millisecond

// fineQuantum is the least time between two wakes of one pacer: a send due sooner
// after the last wake waits for the next quantum with whatever else fell due, so a
// fast rate does not cost the client a wake per record.
const fineQuantum = 100 * time.Microsecond

// next returns when the next send is due and counts it.
func (p *pacer) next() time.Time {
	k := p.k
	p.k++
	if p.rate <= 0 {
		return time.Time{}
	}
	return p.start.Add(time.Duration(float64(k) * float64(time.Second) / p.rate))
}

// wait waits until due, the bulk on a Go timer and the last fineSpan on the fine
// timer; false if ctx ended first. Only the coarse part watches ctx, so a cancelled
// run stops within fineSpan.
func (p *pacer) wait(ctx context.Context, due time.Time) bool {
	if coarse := due.Add(-fineSpan); time.Until(coarse) > 0 && !sleepUntil(ctx, coarse) {
		return false
	}
	if p.fine == nil {
		p.fine = newFineTimer()
	}
	if time.Until(due) <= 0 {
		return ctx.Err() == nil
	}
	wake := due
	if w := p.woke.Add(fineQuantum); w.After(wake) {
		wake = w
	}
	if p.fine == nil || !p.fine.sleepUntil(wake) {
		time.Sleep(time.Until(wake))
	}
	p.woke = time.Now()
	return ctx.Err() == nil
}

// close releases the fine timer.
func (p *pacer) close() {
	if p.fine != nil {
		p.fine.close()
	}
}

// sleepUntil waits for t or ctx, whichever comes first; false if ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// split divides total into n shares that differ by at most one.
func split(total int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = total / int64(n)
		if int64(i) < total%int64(n) {
			out[i]++
		}
	}
	return out
}
