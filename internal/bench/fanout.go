package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fanout is Config.Fanout readers that each read every new record of the topic
// while a produce run writes it, as that many consumer groups would (each gets
// every partition, assigned directly: no group coordination to measure).
type fanout struct {
	stop  context.CancelFunc
	read  []atomic.Int64
	done  chan error
	count int
}

// startFanout starts the readers at the topic's current end offsets.
func (c *Config) startFanout(ctx context.Context, partitions []int32) (*fanout, error) {
	_, end, err := listOffsets(ctx, c, partitions)
	if err != nil {
		return nil, err
	}
	readCtx, stop := context.WithCancel(ctx)
	f := &fanout{stop: stop, read: make([]atomic.Int64, c.Fanout), done: make(chan error, c.Fanout), count: c.Fanout}
	for i := range c.Fanout {
		go func() {
			f.done <- c.readAll(readCtx, partitions, end, nil, nil, func(*kgo.Record) bool {
				f.read[i].Add(1)
				return true
			})
		}()
	}
	return f, nil
}

// finish waits, up to timeout, for every reader to have read delivered
// records, stops them and returns the fewest any of them read.
func (f *fanout) finish(delivered int64, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for f.fewest() < delivered && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.stop()
	var firstErr error
	for range f.count {
		if err := <-f.done; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	fewest := f.fewest()
	if firstErr == nil && fewest < delivered {
		firstErr = fmt.Errorf("%w: a fan-out reader read %d of %d delivered records within %s", ErrRecordsFailed, fewest, delivered, timeout)
	}
	return fewest, firstErr
}

func (f *fanout) fewest() int64 {
	n := f.read[0].Load()
	for i := range f.read {
		n = min(n, f.read[i].Load())
	}
	return n
}
