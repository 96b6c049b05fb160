package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// E2E produces at Config.Rate while consumers read the new records, and measures
// each record from the time it was due to its arrival at a consumer.
func E2E(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate("e2e"); err != nil {
		return Result{}, err
	}
	res := c.result("e2e")
	partitions, err := ensureTopic(ctx, &c)
	if err != nil {
		return res, err
	}
	res.Partitions = int32(len(partitions))
	_, end, err := listOffsets(ctx, &c, partitions)
	if err != nil {
		return res, err
	}

	// The consumers start at today's end offsets, so they see exactly the records
	// produced below (and any another writer adds meanwhile: do not share the topic).
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var arrived, bytes atomic.Int64
	lat := newRecorder()
	readDone := make(chan error, 1)
	go func() {
		readDone <- c.readAll(readCtx, partitions, end, nil, nil, func(r *kgo.Record) bool {
			if len(r.Value) >= minE2ERecordSize {
				due := int64(binary.BigEndian.Uint64(r.Value))
				lat.record(time.Duration(time.Now().UnixNano() - due))
			}
			arrived.Add(1)
			bytes.Add(int64(len(r.Value)))
			return true
		})
	}()

	began := time.Now()
	pub := newRecorder()
	sent := c.sendAll(ctx, sendSpec{count: c.Count, duration: c.Duration, rate: c.Rate, stamp: true, latency: pub})
	// Wait for the delivered records to arrive.
	deadline := time.Now().Add(c.drainTimeout())
	var readErr error
	readFinished := false
	for !readFinished && arrived.Load() < sent.delivered && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case readErr = <-readDone:
			readFinished = true // the consumers stopped: nothing more will arrive
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed := time.Since(began)
	stopReading()
	if !readFinished {
		readErr = <-readDone
	}

	res.Produced = sent.delivered
	res.Records = arrived.Load()
	res.Bytes = bytes.Load()
	res.Failed = sent.failed + max(sent.delivered-res.Records, 0)
	res.finish(elapsed)
	res.Latency = lat.summary("produce to consume (from the time each record was due)")
	produce := pub.summary("due to acknowledged")
	res.ProduceLatency = &produce
	if sent.elapsed > 0 {
		res.ProducedPerSec = float64(sent.delivered) / sent.elapsed.Seconds()
	}
	switch {
	case readErr != nil:
		return res, fmt.Errorf("consuming: %w", readErr)
	case res.Failed > 0 && sent.err() == nil:
		return res, fmt.Errorf("%w: %d delivered records did not arrive within %s", ErrRecordsFailed, sent.delivered-res.Records, c.drainTimeout())
	}
	return res, sent.err()
}
