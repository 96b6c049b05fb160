package bench

import (
	"testing"
	"time"
)

// TestTimelineWindows: each latency lands in the window its record was due
// in; a window's p99 is its nearest-rank 99th percentile; a window without
// records is listed, empty.
func TestTimelineWindows(t *testing.T) {
	start := time.Unix(1000, 0)
	tl := newTimeline(time.Second)
	tl.start = start
	for i := range 200 { // window 0: 1..200 ms
		tl.record(start.Add(time.Duration(i)*time.Millisecond), time.Duration(i+1)*time.Millisecond)
	}
	tl.record(start.Add(2500*time.Millisecond), 7*time.Millisecond) // window 2; window 1 empty
	tl.record(start.Add(-time.Millisecond), 3*time.Millisecond)     // due before the start: window 0
	ws := tl.windows()
	if len(ws) != 3 {
		t.Fatalf("%d windows, want 3: %+v", len(ws), ws)
	}
	want := []Window{
		{Start: start, Count: 201, P99: 198, Max: 200}, // 199th of 1, 2, 3, 3, 4, ..., 200
		{Start: start.Add(time.Second)},
		{Start: start.Add(2 * time.Second), Count: 1, P99: 7, Max: 7},
	}
	for i, w := range ws {
		if !w.Start.Equal(want[i].Start) || w.Count != want[i].Count || w.P99 != want[i].P99 || w.Max != want[i].Max {
			t.Errorf("window %d = %+v, want %+v", i, w, want[i])
		}
	}
}
