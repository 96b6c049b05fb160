package bench

import (
	"errors"
	"testing"
	"time"
)

// TestMonoClock: the one-read clock gives the wall time time.Now gives, and a
// monotonic reading that durations can be taken from.
func TestMonoClock(t *testing.T) {
	c := monoClock{start: time.Now()}
	before := time.Now()
	now := c.now()
	after := time.Now()
	if now.Before(before) || now.After(after) {
		t.Fatalf("now %v outside %v .. %v (monotonic)", now, before, after)
	}
	// The wall clock alone (Round(0) drops the monotonic reading): the same,
	// within what the wall clock may have been slewed by meanwhile.
	const slack = time.Millisecond
	wall := now.Round(0)
	if wall.Before(before.Round(0).Add(-slack)) || wall.After(after.Round(0).Add(slack)) {
		t.Fatalf("wall %v outside %v .. %v", wall, before.Round(0), after.Round(0))
	}
	if d := time.Since(now); d < 0 || d > time.Minute {
		t.Fatalf("time since now: %v", d)
	}
}

// TestSentRecordRecycled: an acknowledged record is counted, timed and handed
// out again clean, and a failed one counted with the first error kept.
func TestSentRecordRecycled(t *testing.T) {
	spec := sendSpec{latency: newRecorder()}
	a := &acknowledgements{c: &Config{}, spec: &spec}
	due := time.Now()
	for i := range 100 {
		r := a.record(due)
		if r.rec.Value != nil || !r.rec.Timestamp.IsZero() || r.rec.Offset != 0 || !r.due.Equal(due) {
			t.Fatalf("record %d handed out dirty: %+v, due %v", i, r.rec, r.due)
		}
		r.rec.Value, r.rec.Timestamp, r.rec.Offset = []byte("v"), due, int64(i)
		r.done(&r.rec, nil)
	}
	errFirst, errLater := errors.New("first"), errors.New("later")
	for _, err := range []error{errFirst, errLater} {
		r := a.record(due)
		r.done(&r.rec, err)
	}
	if got := a.delivered.Load(); got != 100 {
		t.Fatalf("delivered %d, want 100", got)
	}
	if got := a.failed.Load(); got != 2 || a.firstErr != errFirst {
		t.Fatalf("failed %d (first error %v), want 2 (%v)", got, a.firstErr, errFirst)
	}
	if got := spec.latency.summary("").Count; got != 100 {
		t.Fatalf("latency of %d records, want 100", got)
	}
}

// BenchmarkClock: a read of the time with time.Now and with monoClock (one
// clock read fewer).
func BenchmarkClock(b *testing.B) {
	var sink time.Time
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	b.Run("monoClock", func(b *testing.B) {
		c := monoClock{start: time.Now()}
		for b.Loop() {
			sink = c.now()
		}
	})
	_ = sink
}
