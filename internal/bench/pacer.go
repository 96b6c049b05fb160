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
}

// next returns when the next send is due and counts it.
func (p *pacer) next() time.Time {
	k := p.k
	p.k++
	if p.rate <= 0 {
		return time.Time{}
	}
	return p.start.Add(time.Duration(float64(k) * float64(time.Second) / p.rate))
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
