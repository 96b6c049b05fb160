package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
)

// parkSteps are the points of a long poll (handlers' Fetch) at which the test
// appends: before the first read, between the read and Watch, between Watch and
// the re-read, and after the re-read, before waiting.
const parkSteps = 4

// parkedRead reads p from offset the way a Fetch long poll does: read; if
// nothing, Watch and read again; then wait on the watcher or maxWait, and read
// again after every wake. step(i) is called at the i-th point of parkSteps (the
// wait itself is the last). It returns the time from the call to the read
// that found data, and false when maxWait passed first.
func parkedRead(t *testing.T, p *Partition, offset int64, maxWait time.Duration, step func(i int)) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(maxWait)
	var w *Watcher
	step(0)
	for {
		res, err := p.Read(offset, 1<<20, ReadUncommitted)
		if err != nil {
			t.Fatalf("Read(%d): %v", offset, err)
		}
		res.Chunk.Release()
		if res.Chunk.Size > 0 {
			return time.Since(start), true
		}
		if !time.Now().Before(deadline) {
			return time.Since(start), false
		}
		if w == nil {
			step(1)
			w = NewWatcher()
			p.Watch(w)
			defer p.Unwatch(w)
			step(2)
			continue
		}
		step(3)
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-w.C:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// TestParkedReadWokenByHighWatermark: a consumer's long poll parked at the
// high-water mark is woken by the HWM advance that makes its offset readable,
// with no time passing on synctest's fake clock: not by its MaxWait, nor by a
// later append. The append lands at every step of the parking. One node (the
// HWM follows the group-commit fsync) and three (it follows the followers'
// fetches); acks=1, so nothing but the reader waits for the HWM.
func TestParkedReadWokenByHighWatermark(t *testing.T) {
	const maxWait = 500 * time.Millisecond // Kafka's fetch.max.wait.ms
	for _, nodes := range []int{1, 3} {
		for at := range parkSteps {
			t.Run(fmt.Sprintf("nodes=%d/append-at-step-%d", nodes, at), func(t *testing.T) {
				limit := time.Duration(0)
				if nodes > 1 {
					limit = 2 * memRoundTrip
				}
				synctest.Test(t, func(t *testing.T) {
					c := newMemCluster(t, nodes, 1)
					p := c.replica(1)
					for round := range 20 {
						offset := p.HighWatermark()
						took, ok := parkedRead(t, p, offset, maxWait, func(i int) {
							if i == at {
								if _, err := p.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
									t.Fatal(err)
								}
							}
						})
						if !ok || took > limit {
							t.Fatalf("round %d: read at %d found data %t after %s (fake clock), want within %s", round, offset, ok, took, limit)
						}
						synctest.Wait() // the cluster settles: followers caught up
					}
				})
			})
		}
	}
}

// TestWaitHighWatermarkReusesWaiter: an acks=all wait allocates nothing once
// its pool is warm, and a reused waiter still wakes on the next append.
func TestWaitHighWatermarkReusesWaiter(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	defer p.close()
	ctx := context.Background()
	end := p.log.LogEndOffset()
	if err := p.WaitHighWatermark(ctx, end+1, time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("waiting past the log end: %v, want ErrTimeout", err)
	}
	if !raceEnabled {
		allocs := testing.AllocsPerRun(20, func() {
			if err := p.WaitHighWatermark(ctx, end+1, time.Microsecond); !errors.Is(err, ErrTimeout) {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("WaitHighWatermark allocated %v times per call", allocs)
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.WaitHighWatermark(ctx, end+1, time.Minute) }()
	mustAppend(t, p, txnBatch(t, 9, 0, 1, false))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait for offset %d after the append: %v", end+1, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a reused waiter was not woken by the append")
	}
}
