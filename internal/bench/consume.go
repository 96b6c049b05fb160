package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Consume reads the topic from its start and measures throughput and poll latency.
func Consume(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate("consume"); err != nil {
		return Result{}, err
	}
	res := c.result("consume")
	partitions, start, end, prefilled, err := prefill(ctx, &c)
	res.Partitions, res.Prefilled = int32(len(partitions)), prefilled
	if err != nil {
		return res, err
	}
	target := available(start, end)
	if c.Count > 0 {
		target = min(target, c.Count)
	}
	if target == 0 {
		return res, fmt.Errorf("topic %q: %w (produce some, or give --count to have them produced)", c.Topic, ErrNoRecords)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, c.Duration)
		defer cancel()
	}
	var counted, bytes atomic.Int64
	polls := newRecorder()
	began := time.Now()
	err = c.readAll(runCtx, partitions, start, end, polls, func(r *kgo.Record) bool {
		k := counted.Add(1)
		if k > target {
			return false
		}
		bytes.Add(int64(len(r.Value)))
		if k == target {
			cancel()
		}
		return true
	})
	res.Records = min(counted.Load(), target)
	res.Bytes = bytes.Load()
	if res.Records > 0 {
		res.RecordSize = int(res.Bytes / res.Records) // what the topic held, on average
	}
	res.finish(time.Since(began))
	res.Latency = polls.summary("poll that returned records")
	return res, err
}

// Prefill creates the topic if missing and produces the records it lacks for a
// consume run of c (c.Count in all), untimed, as Consume does first; it returns
// how many it produced. Called before Consume, it keeps the production out of
// whatever is measured around Consume (bench/compare charges each consume round
// the broker CPU it used).
func Prefill(ctx context.Context, c Config) (int64, error) {
	if err := c.Validate("consume"); err != nil {
		return 0, err
	}
	_, _, _, prefilled, err := prefill(ctx, &c)
	return prefilled, err
}

// prefill is Prefill; it also returns the topic's partitions and their start
// and end offsets after the production.
func prefill(ctx context.Context, c *Config) (partitions []int32, start, end map[int32]int64, prefilled int64, err error) {
	if partitions, err = ensureTopic(ctx, c); err != nil {
		return nil, nil, nil, 0, err
	}
	if start, end, err = listOffsets(ctx, c, partitions); err != nil {
		return partitions, nil, nil, 0, err
	}
	missing := c.Count - available(start, end)
	if missing <= 0 {
		return partitions, start, end, 0, nil
	}
	fill := *c
	fill.Progress = nil
	fill.Producers = max(fill.Producers, 1)
	sent := fill.sendAll(ctx, sendSpec{count: missing})
	if err := sent.err(); err != nil {
		return partitions, start, end, sent.delivered, fmt.Errorf("prefilling the topic: %w", err)
	}
	// acks=0 and acks=1 answer before the high-water mark passes the records:
	// wait until what was delivered is readable.
	want := available(start, end) + sent.delivered
	deadline := time.Now().Add(prefillVisible)
	for {
		if start, end, err = listOffsets(ctx, c, partitions); err != nil || available(start, end) >= want || !time.Now().Before(deadline) {
			return partitions, start, end, sent.delivered, err
		}
		select {
		case <-ctx.Done():
			return partitions, start, end, sent.delivered, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// prefillVisible bounds prefill's wait for its records to become readable.
const prefillVisible = 30 * time.Second

// available counts the offsets between start and end over all partitions: the
// records, and any transaction markers among them (an upper bound on the records).
func available(start, end map[int32]int64) int64 {
	var n int64
	for p, e := range end {
		n += max(e-start[p], 0)
	}
	return n
}

// readAll reads the partitions with Config.Consumers clients, each given a share,
// from the from offsets up to (excluding) the end offsets, or forever if end is
// nil, until ctx ends. onRecord sees every record (not transaction markers); false
// stops its consumer.
// Polls that return records are timed into polls (if not nil). An ended ctx is
// not an error.
func (c *Config) readAll(ctx context.Context, partitions []int32, from, end map[int32]int64, polls *recorder, onRecord func(*kgo.Record) bool) error {
	n := min(c.Consumers, len(partitions))
	shares := make([]map[int32]kgo.Offset, n)
	for i, p := range partitions {
		if end != nil && from[p] >= end[p] {
			continue // nothing to read here
		}
		if shares[i%n] == nil {
			shares[i%n] = map[int32]kgo.Offset{}
		}
		shares[i%n][p] = kgo.NewOffset().At(from[p])
	}
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, share := range shares {
		if share == nil {
			continue
		}
		wg.Go(func() {
			if err := c.readShare(ctx, share, end, polls, onRecord); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	return firstErr
}

// readShare is one consumer of readAll.
func (c *Config) readShare(ctx context.Context, share map[int32]kgo.Offset, end map[int32]int64, polls *recorder, onRecord func(*kgo.Record) bool) error {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: share}),
		// Transaction markers take offsets too, and a topic may end with one:
		// they are seen (not counted) so that a read knows it reached the end.
		kgo.KeepControlRecords(),
	}, c.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	open := len(share) // partitions not read to their end yet
	for {
		began := time.Now()
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) && !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fmt.Errorf("fetching %s partition %d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var got int64
		stop := false
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				if stop || (end != nil && r.Offset >= end[fp.Partition]) {
					return
				}
				if !r.Attrs.IsControl() {
					got++
					if !onRecord(r) {
						stop = true
						return
					}
				}
				if end != nil && r.Offset+1 == end[fp.Partition] {
					open--
				}
			}
		})
		if got > 0 {
			if polls != nil {
				polls.record(time.Since(began))
			}
			c.progress(got)
		}
		if stop || (end != nil && open == 0) {
			return nil
		}
	}
}
