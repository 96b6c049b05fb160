package bench

import (
	"slices"
	"sync"
	"time"
)

// Window is one slice of a paced run's latency over time: the records due in
// [Start, Start + the window's length), their count, p99 and max. A stall
// shows in the windows whose records it held, so a timeline tells a tail
// that sits in the first seconds of a run (something that ends) from one
// spread over it.
type Window struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
	P99   float64   `json:"p99_ms"`
	Max   float64   `json:"max_ms"`
}

// timeline keeps every latency by the window its record was due in. A
// latency run is a few thousand records a second for tens of seconds: the
// values themselves are small enough to keep.
type timeline struct {
	start time.Time
	step  time.Duration
	mu    struct {
		sync.Mutex
		windows [][]time.Duration
	}
}

// newTimeline returns a timeline of windows of step; sendAll sets its start.
func newTimeline(step time.Duration) *timeline { return &timeline{step: step} }

// record adds the latency of a record due at due.
func (t *timeline) record(due time.Time, d time.Duration) {
	i := max(int(due.Sub(t.start)/t.step), 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.mu.windows) <= i {
		t.mu.windows = append(t.mu.windows, nil)
	}
	t.mu.windows[i] = append(t.mu.windows[i], d)
}

// windows summarises each window, empty ones included (a window without a
// record is a stall as much as a slow one).
func (t *timeline) windows() []Window {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Window, len(t.mu.windows))
	for i, ds := range t.mu.windows {
		w := Window{Start: t.start.Add(time.Duration(i) * t.step), Count: len(ds)}
		if len(ds) > 0 {
			slices.Sort(ds)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			w.P99, w.Max = ms(ds[(len(ds)*99+99)/100-1]), ms(ds[len(ds)-1]) // nearest rank
		}
		out[i] = w
	}
	return out
}
