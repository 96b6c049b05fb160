package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce runs producers against the topic (created if missing) and measures each
// record from due (or handed to the client) to acknowledged.
func Produce(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate("produce"); err != nil {
		return Result{}, err
	}
	res := c.result("produce")
	partitions, err := ensureTopic(ctx, &c)
	if err != nil {
		return res, err
	}
	res.Partitions = int32(len(partitions))
	var readers *fanout
	if c.Fanout > 0 {
		if readers, err = c.startFanout(ctx, partitions); err != nil {
			return res, err
		}
	}
	rec := newRecorder()
	spec := sendSpec{count: c.Count, duration: c.Duration, rate: c.Rate, latency: rec, progress: true}
	if c.TransactionRecords > 0 {
		spec.commits = newRecorder()
	}
	if c.Timeline > 0 {
		spec.timeline = newTimeline(c.Timeline)
	}
	sent := c.sendAll(ctx, spec)
	var fanoutErr error
	if readers != nil {
		res.Fanout, res.FanoutRaw = c.Fanout, c.FanoutRaw
		res.FanoutFewestRead, fanoutErr = readers.finish(sent.delivered, c.drainTimeout())
		res.FanoutFetches, res.FanoutFetchBytes = readers.fetches.Load(), readers.bytes.Load()
	}
	res.Records, res.Failed = sent.delivered, sent.failed
	res.Bytes = sent.delivered * int64(c.RecordSize)
	res.finish(sent.elapsed)
	res.Latency = rec.summary("send to acknowledgement")
	if spec.timeline != nil {
		res.Timeline = spec.timeline.windows()
	}
	if spec.commits != nil {
		res.TransactionRecords = c.TransactionRecords
		commits := spec.commits.summary("commit: flush and EndTxn")
		res.CommitLatency = &commits
	}
	if err := sent.err(); err != nil {
		return res, err
	}
	return res, fanoutErr
}

// result starts a Result with the run's settings.
func (c *Config) result(mode string) Result {
	r := Result{Mode: mode, Topic: c.Topic, Partitions: c.Partitions, RecordSize: c.RecordSize}
	if mode == "produce" || mode == "e2e" {
		r.Acks, r.Compression, r.Producers, r.TargetRate = c.Acks, c.Compression, c.Producers, c.Rate
		r.LingerMS, r.BatchMaxBytes = float64(c.Linger)/float64(time.Millisecond), c.BatchMaxBytes
		r.Payload = c.Payload
		if r.Payload == "" {
			r.Payload = PayloadLetters
		}
	}
	if mode != "produce" {
		r.Consumers = c.Consumers
	}
	return r
}

// sendSpec is one batch of producing work over all of Config.Producers.
type sendSpec struct {
	count    int64         // records in all; 0: until duration
	duration time.Duration // 0: until count
	rate     int           // records/s in all; 0: unthrottled
	stamp    bool          // start every value with its due time (E2E)
	latency  *recorder     // nil: not timed
	commits  *recorder     // transactional runs: each commit, flush included
	timeline *timeline     // nil: no latency per window (needs latency)
	progress bool          // tell Config.Progress of every delivery
}

// sendTotals is what a sendAll delivered.
type sendTotals struct {
	delivered, failed int64
	elapsed           time.Duration // first send to last acknowledgement
	firstErr          error         // the first delivery or client error
}

func (s sendTotals) err() error {
	if s.failed == 0 && s.firstErr == nil {
		return nil
	}
	if s.firstErr == nil {
		return fmt.Errorf("%w: %d of %d", ErrRecordsFailed, s.failed, s.delivered+s.failed)
	}
	return fmt.Errorf("%w: %d of %d, the first: %w", ErrRecordsFailed, s.failed, s.delivered+s.failed, s.firstErr)
}

// sendAll runs Config.Producers clients until the spec's count or duration is
// done or ctx ends, then waits (at most DrainTimeout) for every acknowledgement.
func (c *Config) sendAll(ctx context.Context, spec sendSpec) sendTotals {
	var wg sync.WaitGroup
	counts := split(spec.count, c.Producers)
	letters := randomLetters(c.RecordSize)
	start := time.Now()
	clock := monoClock{start: start}
	acks := &acknowledgements{c: c, spec: &spec}
	if spec.timeline != nil {
		spec.timeline.start = start
	}
	var deadline time.Time
	if spec.duration > 0 {
		deadline = start.Add(spec.duration)
	}
	for i := range c.Producers {
		wg.Go(func() {
			cl, err := kgo.NewClient(c.producerOpts(i)...)
			if err != nil {
				acks.setErr(err)
				return
			}
			defer cl.Close()
			payload := newPayloadSource(c.Payload, c.RecordSize, i, c.Producers, letters)
			// Records handed to the client are delivered even if ctx ends: the
			// context only stops the sending.
			sendCtx := context.WithoutCancel(ctx)
			p := pacer{start: start, rate: float64(spec.rate) / float64(c.Producers)}
			defer p.close()
			txn := transactor{cl: cl, size: c.TransactionRecords, commits: spec.commits}
			defer func() {
				if err := txn.end(sendCtx, c.drainTimeout()); err != nil {
					acks.setErr(err)
				}
			}()
			for n := int64(0); spec.count == 0 || n < counts[i]; n++ {
				due := p.next()
				if spec.rate > 0 && !p.wait(ctx, due) {
					break
				}
				now := clock.now()
				if ctx.Err() != nil || (!deadline.IsZero() && now.After(deadline)) {
					break
				}
				if spec.rate == 0 {
					due = now
				}
				if err := txn.next(sendCtx, c.drainTimeout()); err != nil {
					acks.setErr(err)
					break
				}
				value := payload.value()
				if spec.stamp {
					value = append([]byte(nil), value...)
					binary.BigEndian.PutUint64(value, uint64(due.UnixNano()))
				}
				// Stamped with the now read above, as the client would
				// stamp it: one clock read fewer a record.
				r := acks.record(due)
				r.rec.Value, r.rec.Timestamp = value, now
				cl.Produce(sendCtx, &r.rec, r.done)
			}
			if txn.size > 0 {
				return // the deferred end flushes and commits
			}
			flushCtx, cancel := context.WithTimeout(sendCtx, c.drainTimeout())
			defer cancel()
			if err := cl.Flush(flushCtx); err != nil {
				acks.setErr(fmt.Errorf("flushing: %w", err))
			}
		})
	}
	wg.Wait()
	return sendTotals{delivered: acks.delivered.Load(), failed: acks.failed.Load(), elapsed: time.Since(start), firstErr: acks.firstErr}
}

// monoClock reads the time with one clock read, the monotonic clock's, where
// time.Now makes two (the wall clock's too): the wall time is the start's
// moved on by the monotonic time since, so a change of the wall clock during
// a run does not show. A run reads the time for every record it sends: 33
// against 47 ns a read on a 2-core virtual machine (BenchmarkClock), where
// each clock read was about 3.5% of the load generator's CPU in a profile.
type monoClock struct{ start time.Time }

func (c monoClock) now() time.Time { return c.start.Add(time.Since(c.start)) }

// acknowledgements counts and times the records of one sendAll as the clients
// acknowledge them.
type acknowledgements struct {
	c                 *Config
	spec              *sendSpec
	delivered, failed atomic.Int64
	errOnce           sync.Once
	firstErr          error
	free              sync.Pool // of *sentRecord
}

// sentRecord is a record handed to a client with its due time and its
// callback. They are recycled once acknowledged: a record and a callback
// closure allocated for every send were, with the collection they caused,
// about 8% of the load generator's CPU in a profile.
type sentRecord struct {
	rec  kgo.Record
	due  time.Time
	acks *acknowledgements
	done func(*kgo.Record, error) // acknowledged, bound once
}

// record returns a free sentRecord due at due, its kgo.Record zero.
func (a *acknowledgements) record(due time.Time) *sentRecord {
	r, ok := a.free.Get().(*sentRecord)
	if !ok {
		r = &sentRecord{acks: a}
		r.done = r.acknowledged
	}
	r.due = due
	return r
}

// acknowledged is a sentRecord's callback: it counts and times the record,
// then frees it (the client is done with a record once it calls back).
func (r *sentRecord) acknowledged(_ *kgo.Record, err error) {
	a := r.acks
	if err != nil {
		a.failed.Add(1)
		a.setErr(err)
	} else {
		if a.spec.latency != nil {
			took := time.Since(r.due)
			a.spec.latency.record(took)
			if a.spec.timeline != nil {
				a.spec.timeline.record(r.due, took)
			}
		}
		a.delivered.Add(1)
		if a.spec.progress {
			a.c.progress(1)
		}
	}
	r.rec, r.due = kgo.Record{}, time.Time{}
	a.free.Put(r)
}

// setErr keeps the first error of the run.
func (a *acknowledgements) setErr(err error) {
	a.errOnce.Do(func() { a.firstErr = err })
}

// transactor groups one producer's records into transactions of size records
// and times each commit; with size 0 it does nothing.
type transactor struct {
	cl      *kgo.Client
	size    int
	commits *recorder
	inTxn   int // records in the open transaction
}

// next is called before each record: it commits a full transaction and begins
// the next one.
func (t *transactor) next(ctx context.Context, timeout time.Duration) error {
	if t.size == 0 {
		return nil
	}
	if t.inTxn == t.size {
		if err := t.end(ctx, timeout); err != nil {
			return err
		}
	}
	if t.inTxn == 0 {
		if err := t.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("beginning a transaction: %w", err)
		}
	}
	t.inTxn++
	return nil
}

// end flushes and commits the open transaction, if any.
func (t *transactor) end(ctx context.Context, timeout time.Duration) error {
	if t.size == 0 || t.inTxn == 0 {
		return nil
	}
	t.inTxn = 0
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := t.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing a transaction: %w", err)
	}
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing a transaction: %w", err)
	}
	t.commits.record(time.Since(start))
	return nil
}

// randomLetters is a value of n random upper-case letters, like the payloads of
// Kafka's perf tools: compressible, but not trivially.
func randomLetters(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'A' + byte(rand.IntN(26))
	}
	return b
}
