package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetryConcurrentTxn: an implicit add answered CONCURRENT_TRANSACTIONS (the
// previous transaction's markers not yet written) is retried on the broker within
// its bound, so the produce succeeds once the coordinator is ready; other answers
// come back at once, and the bound and the request's context end the retries.
func TestRetryConcurrentTxn(t *testing.T) {
	concurrent := kerr.ConcurrentTransactions.Code
	for _, tc := range []struct {
		name     string
		answers  []int16 // the coordinator's answers, the last one repeated
		max      time.Duration
		canceled bool
		want     int16
		calls    int
	}{
		{"ready", []int16{0}, 100 * time.Millisecond, false, 0, 1},
		{"markers written during the retry", []int16{concurrent, concurrent, 0}, 100 * time.Millisecond, false, 0, 3},
		{"fenced at once", []int16{kerr.ProducerFenced.Code}, 100 * time.Millisecond, false, kerr.ProducerFenced.Code, 1},
		{"no retry without a bound", []int16{concurrent, 0}, 0, false, concurrent, 1},
		{"bound reached", []int16{concurrent}, 15 * time.Millisecond, false, concurrent, 2},
		{"request canceled", []int16{concurrent, 0}, time.Second, true, concurrent, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.canceled {
				cancel()
			}
			calls := 0
			got := retryConcurrentTxn(ctx, 10*time.Millisecond, tc.max, func() int16 {
				calls++
				return tc.answers[min(calls, len(tc.answers))-1]
			})
			if got != tc.want || calls != tc.calls {
				t.Fatalf("answered %d after %d calls, want %d after %d", got, calls, tc.want, tc.calls)
			}
		})
	}
}
