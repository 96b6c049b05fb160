package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Connect opens connections one after another from each of Config.Connectors
// workers, for Config.Count connections or Config.Duration, and measures how
// many a second are set up. Each is a new client's first connection to a seed
// broker: TCP, the TLS handshake and SASL authentication when Config.ClientOpts
// ask for them (a TLS dialer, kgo.SASL), kgo's ApiVersions, then one
// ApiVersions round trip (kgo's Ping) to see the connection serve; the client is
// then closed. Latency: from the dial to Ping's answer.
func Connect(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate("connect"); err != nil {
		return Result{}, err
	}
	res := Result{Mode: "connect", Connectors: c.Connectors}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, c.Duration)
		defer cancel()
	}
	var (
		claimed, done, failed atomic.Int64
		firstErr              error
		errOnce               sync.Once
		wg                    sync.WaitGroup
	)
	rec := newRecorder()
	began := time.Now()
	for range c.Connectors {
		wg.Go(func() {
			for runCtx.Err() == nil && (c.Count == 0 || claimed.Add(1) <= c.Count) {
				start := time.Now()
				err := c.connectOnce(runCtx)
				switch {
				case err != nil && runOver(runCtx):
					return // cut short by the end of the run: not a failure
				case err != nil:
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
				default:
					rec.record(time.Since(start))
					done.Add(1)
					c.progress(1)
				}
			}
		})
	}
	wg.Wait()
	res.Records, res.Failed = done.Load(), failed.Load()
	res.finish(time.Since(began))
	res.Latency = rec.summary("connection set up: dial, TLS, SASL, ApiVersions round trip")
	if res.Failed > 0 {
		return res, fmt.Errorf("%w: %d connections failed, the first with: %w", ErrRecordsFailed, res.Failed, firstErr)
	}
	return res, nil
}

// connectOnce sets up one connection with a fresh client and closes it.
func (c *Config) connectOnce(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Ping(ctx)
}

// runOver reports whether the run has ended: its context is done, or its
// deadline has passed. A dial bounded by the run's deadline fails with "i/o
// timeout" as soon as the clock passes the deadline, a moment before the
// context's own timer marks it done; checking Err alone counted those dials
// as failed connections (a few at the end of a run, from every worker).
func runOver(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
