package bench

import (
	"context"
	"testing"
	"time"
)

// deadlinePassed is a context in the moment after its deadline has passed and
// before its timer has marked it done: what a dial bounded by the run's
// deadline sees when it fails with "i/o timeout" at the end of a run.
type deadlinePassed struct{ context.Context }

func (deadlinePassed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
func (deadlinePassed) Err() error                  { return nil }

func TestRunOver(t *testing.T) {
	live, cancelLive := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLive()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no deadline", context.Background(), false},
		{"deadline ahead", live, false},
		{"cancelled", done, true},
		// The end-of-run dials that bench connect used to count as failed
		// connections: the deadline has passed, Err is still nil.
		{"deadline passed, not yet done", deadlinePassed{context.Background()}, true},
	} {
		if got := runOver(tc.ctx); got != tc.want {
			t.Errorf("%s: runOver = %t, want %t", tc.name, got, tc.want)
		}
	}
}
