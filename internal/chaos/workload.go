package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/chaos/history"
)

// workloadConfig shapes the clients of a run.
type workloadConfig struct {
	seeds     brokers
	topic     string
	group     string
	producers int
	keys      int
	interval  time.Duration // between one producer's sends
	sends     int           // each producer stops after this many sends (0: at stop only)
	readers   int           // direct-partition readers
	members   int           // members of the committing group
	// batchMaxBytes bounds the producers' batches (a tiered topic's segments
	// are small); 0: kgo's default.
	batchMaxBytes int32
}

func (c workloadConfig) withDefaults() workloadConfig {
	if c.group == "" {
		c.group = c.topic + "-group"
	}
	if c.producers == 0 {
		c.producers = 2
	}
	if c.keys == 0 {
		c.keys = 16
	}
	if c.interval == 0 {
		c.interval = 5 * time.Millisecond
	}
	if c.readers == 0 {
		c.readers = 2
	}
	if c.members == 0 {
		c.members = 2
	}
	return c
}

// clientOpts are every workload client's settings: quick metadata refreshes and
// retries, request timeouts short enough that a request stalled by a cut link
// is given up in seconds rather than the default 20s or more, and on a
// secured cluster the TLS and SASL options of seeds.
func clientOpts(seeds brokers, id string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(seeds.addrs...),
		kgo.ClientID(id),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.DialTimeout(3 * time.Second),
		kgo.RequestTimeoutOverhead(4 * time.Second),
	}, seeds.auth...)
}

// workload runs idempotent acks=all producers of keyed records, readers of
// every partition that record each poll, and a consumer group that commits what
// it processed, all recording into one history.
type workload struct {
	cfg  workloadConfig
	rec  *history.Recorder
	logf func(format string, args ...any)

	stop      chan struct{} // closed: producers stop sending
	sending   sync.WaitGroup
	producers []*kgo.Client

	cancel    context.CancelFunc // stops readers and members
	consuming sync.WaitGroup
	consumers []*kgo.Client

	acked atomic.Int64
}

func startWorkload(cfg workloadConfig, rec *history.Recorder, logf func(string, ...any)) (*workload, error) {
	cfg = cfg.withDefaults()
	w := &workload{cfg: cfg, rec: rec, logf: logf, stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	fail := func(err error) (*workload, error) {
		w.close()
		return nil, err
	}
	for id := range cfg.producers {
		opts := append(clientOpts(cfg.seeds, fmt.Sprintf("chaos-producer-%d", id)),
			kgo.DefaultProduceTopic(cfg.topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProduceRequestTimeout(5*time.Second),
			kgo.MaxBufferedRecords(20_000),
		)
		if cfg.batchMaxBytes > 0 {
			opts = append(opts, kgo.ProducerBatchMaxBytes(cfg.batchMaxBytes))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fail(err)
		}
		w.producers = append(w.producers, cl)
		w.sending.Add(1)
		go w.produce(id, cl)
	}
	for i := range cfg.readers {
		name := fmt.Sprintf("reader-%d", i)
		cl, err := kgo.NewClient(append(clientOpts(cfg.seeds, "chaos-"+name),
			kgo.ConsumeTopics(cfg.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond),
		)...)
		if err != nil {
			return fail(err)
		}
		w.consumers = append(w.consumers, cl)
		w.consuming.Add(1)
		go w.read(ctx, name, cl)
	}
	for i := range cfg.members {
		name := fmt.Sprintf("member-%d", i)
		cl, err := kgo.NewClient(append(clientOpts(cfg.seeds, "chaos-"+name),
			kgo.ConsumerGroup(cfg.group),
			kgo.ConsumeTopics(cfg.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.FetchMaxWait(500*time.Millisecond),
		)...)
		if err != nil {
			return fail(err)
		}
		w.consumers = append(w.consumers, cl)
		w.consuming.Add(1)
		go w.process(ctx, name, cl)
	}
	return w, nil
}

// produce sends a record every interval until stop (or cfg.sends records):
// key k<seq mod keys>, value p<id>-<seq>, and records each outcome as it
// arrives.
func (w *workload) produce(id int, cl *kgo.Client) {
	defer w.sending.Done()
	tick := time.NewTicker(w.cfg.interval)
	defer tick.Stop()
	for seq := int64(0); w.cfg.sends == 0 || seq < int64(w.cfg.sends); seq++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		s := history.Send{Producer: id, Seq: seq, Key: fmt.Sprintf("k%02d", seq%int64(w.cfg.keys)), Value: fmt.Sprintf("p%d-%07d", id, seq)}
		// Background, not a cancellable context: kgo fails a buffered record
		// whose context ends, which would only make more outcomes unknown.
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(s.Key), Value: []byte(s.Value)}, func(r *kgo.Record, err error) {
			s.At = time.Now()
			if err == nil {
				s.Outcome, s.Partition, s.Offset = history.OK, r.Partition, r.Offset
				w.acked.Add(1)
			} else {
				s.Outcome, s.Err = outcomeOf(err), err.Error()
			}
			w.rec.AddSend(s)
		})
	}
}

// rejected are the produce errors a broker returns before appending anything:
// a send failing with one of them definitely did not happen.
var rejected = []error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.InvalidTopicException, kerr.TopicAuthorizationFailed, kerr.InvalidRequiredAcks,
}

// outcomeOf classifies a failed send. Everything but a rejection is Unknown:
// a timed-out or aborted batch may have been written.
func outcomeOf(err error) history.Outcome {
	for _, r := range rejected {
		if errors.Is(err, r) {
			return history.Failed
		}
	}
	return history.Unknown
}

// read records every poll of a reader assigned all partitions from the start.
func (w *workload) read(ctx context.Context, name string, cl *kgo.Client) {
	defer w.consuming.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		w.record(fs, name, false)
	}
}

// process is one member of the committing group: it records what it processed,
// then commits it, then lets a rebalance happen.
func (w *workload) process(ctx context.Context, name string, cl *kgo.Client) {
	defer w.consuming.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if w.record(fs, name, true) > 0 {
			// A failed commit is retried with the next one; what it covered may be
			// processed again after a rebalance (at least once).
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cl.CommitUncommittedOffsets(cctx)
			cancel()
		}
		cl.AllowRebalance()
	}
}

// record adds a poll's records to the history, one entry per partition, and
// returns how many there were.
func (w *workload) record(fs kgo.Fetches, name string, group bool) int {
	now, n := time.Now(), 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		pl := history.Poll{Reader: name, Group: group, Partition: p.Partition, At: now, Records: make([]history.Record, len(p.Records))}
		for i, r := range p.Records {
			pl.Records[i] = history.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
		}
		n += len(p.Records)
		w.rec.AddPoll(pl)
	})
	return n
}

// stopProducers stops sending and waits up to timeout for every outstanding
// send to get its outcome; what is still unanswered then stays unknown.
func (w *workload) stopProducers(timeout time.Duration) {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, cl := range w.producers {
		if err := cl.Flush(ctx); err != nil {
			w.logf("flushing a producer: %v (its unanswered sends stay unknown)", err)
			break
		}
	}
	for _, cl := range w.producers {
		cl.Close() // fails whatever is still buffered; its promises record it
	}
	w.sending.Wait()
}

// drainGroup waits until the group has committed every partition up to end.
func (w *workload) drainGroup(adm *kadm.Client, end map[int32]int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.FetchOffsets(ctx, w.cfg.group)
		cancel()
		last = err
		if err == nil {
			last = nil
			for p, want := range end {
				if o, ok := offs.Lookup(w.cfg.topic, p); !ok || o.At < want {
					last = fmt.Errorf("partition %d committed at %d, end %d", p, o.At, want)
					break
				}
			}
			if last == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("group %s not drained in %v: %w", w.cfg.group, timeout, last)
}

// close stops every client; sends not answered yet stay unknown.
func (w *workload) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	for _, cl := range w.producers {
		cl.Close()
	}
	w.sending.Wait()
	w.cancel()
	w.consuming.Wait()
	for _, cl := range w.consumers {
		cl.Close()
	}
}
