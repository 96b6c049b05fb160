package chaos

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/chaos/history"
)

// txnConfig shapes the clients of a transactional run.
type txnConfig struct {
	seeds      brokers
	topic      string // the input: transactions write here
	output     string // the copy stage writes here
	group      string // the copy stage's group
	partitions int32
	producers  int
	writes     int // records per transaction, on as many partitions as there are
	readers    int
	copiers    int // members of the copy stage's group
	// abortEvery: every abortEvery-th transaction of a producer is aborted on
	// purpose.
	abortEvery int
	timeout    time.Duration // transaction.timeout.ms of every transactional client
	// keyBytes pads every transactional record with a key this long (a tiered
	// topic must fill its segments within seconds); keys are not checked.
	keyBytes int
}

func (c txnConfig) withDefaults() txnConfig {
	if c.output == "" {
		c.output = c.topic + "-out"
	}
	if c.group == "" {
		c.group = c.topic + "-copy"
	}
	if c.producers == 0 {
		c.producers = 2
	}
	if c.writes == 0 {
		c.writes = 4
	}
	if c.readers == 0 {
		c.readers = 2
	}
	if c.copiers == 0 {
		c.copiers = 2
	}
	if c.abortEvery == 0 {
		c.abortEvery = 4
	}
	if c.timeout == 0 {
		c.timeout = 10 * time.Second
	}
	return c
}

// txnID is the transactional id of producer i; copyID that of copier i.
func txnID(i int) string  { return fmt.Sprintf("chaos-txn-%d", i) }
func copyID(i int) string { return fmt.Sprintf("chaos-copy-%d", i) }

// txnRecorder collects a transactional run's transactions and polls.
type txnRecorder struct {
	mu struct {
		sync.Mutex
		txns  []history.Txn
		polls []history.Poll
	}
}

func (r *txnRecorder) addTxn(t history.Txn) {
	r.mu.Lock()
	r.mu.txns = append(r.mu.txns, t)
	r.mu.Unlock()
}

func (r *txnRecorder) addPoll(p history.Poll) {
	r.mu.Lock()
	r.mu.polls = append(r.mu.polls, p)
	r.mu.Unlock()
}

func (r *txnRecorder) snapshot() ([]history.Txn, []history.Poll) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]history.Txn(nil), r.mu.txns...), append([]history.Poll(nil), r.mu.polls...)
}

// txnWorkload runs transactional producers writing transactions over several
// partitions of the input topic, committing most and aborting some;
// read_committed readers of the input; and a copy stage (franz-go's
// GroupTransactSession) copying the input to the output topic with the input
// offsets committed in the same transactions.
type txnWorkload struct {
	cfg  txnConfig
	rec  *txnRecorder
	logf func(format string, args ...any)
	key  []byte // every transactional record's

	stop    chan struct{} // closed: producers stop after their transaction
	sending sync.WaitGroup

	cancelRead context.CancelFunc
	reading    sync.WaitGroup
	readers    []*kgo.Client

	cancelCopy context.CancelFunc
	copying    sync.WaitGroup

	committed atomic.Int64 // committed transactions
}

func startTxnWorkload(cfg txnConfig, rec *txnRecorder, logf func(string, ...any)) (*txnWorkload, error) {
	cfg = cfg.withDefaults()
	w := &txnWorkload{cfg: cfg, rec: rec, logf: logf, stop: make(chan struct{}), key: bytes.Repeat([]byte("k"), cfg.keyBytes)}
	readCtx, cancelRead := context.WithCancel(context.Background())
	copyCtx, cancelCopy := context.WithCancel(context.Background())
	w.cancelRead, w.cancelCopy = cancelRead, cancelCopy
	for i := range cfg.producers {
		w.sending.Add(1)
		go w.produce(i)
	}
	for i := range cfg.readers {
		name := fmt.Sprintf("txn-reader-%d", i)
		cl, err := kgo.NewClient(append(clientOpts(cfg.seeds, "chaos-"+name),
			kgo.ConsumeTopics(cfg.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.FetchMaxWait(500*time.Millisecond),
		)...)
		if err != nil {
			w.close()
			return nil, err
		}
		w.readers = append(w.readers, cl)
		w.reading.Add(1)
		go w.read(readCtx, name, cl)
	}
	for i := range cfg.copiers {
		w.copying.Add(1)
		go w.copy(copyCtx, i)
	}
	return w, nil
}

// newProducer is transactional producer i's client; a new one fences the
// previous one's epoch.
func (w *txnWorkload) newProducer(i int) (*kgo.Client, error) {
	return kgo.NewClient(append(clientOpts(w.cfg.seeds, fmt.Sprintf("chaos-txn-producer-%d", i)),
		kgo.TransactionalID(txnID(i)),
		kgo.TransactionTimeout(w.cfg.timeout),
		kgo.DefaultProduceTopic(w.cfg.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(5*time.Second),
	)...)
}

// produce runs producer i's transactions until stop: each writes cfg.writes
// records, value t<i>-<seq>-<n>, to consecutive partitions from seq on, then
// commits, or aborts every abortEvery-th (and any whose writes failed).
func (w *txnWorkload) produce(i int) {
	defer w.sending.Done()
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		if cl == nil {
			var err error
			if cl, err = w.newProducer(i); err != nil {
				w.logf("transactional producer %d: %v", i, err)
				time.Sleep(time.Second) // nothing to poll: the client could not even be built
				continue
			}
		}
		if !w.transaction(i, seq, cl) {
			// Whatever went wrong, a new client (a new epoch) starts clean.
			cl.Close()
			cl = nil
		}
	}
}

// transaction runs one transaction and records it; false means the client
// should be replaced.
func (w *txnWorkload) transaction(i int, seq int64, cl *kgo.Client) bool {
	t := history.Txn{Producer: i, Seq: seq}
	defer func() {
		t.At = time.Now()
		w.rec.addTxn(t)
	}()
	if err := cl.BeginTransaction(); err != nil {
		t.Outcome, t.Err = history.TxnAborted, "begin: "+err.Error() // nothing written
		return false
	}
	t.Writes = make([]history.TxnWrite, w.cfg.writes)
	var (
		pending sync.WaitGroup
		mu      sync.Mutex
		failed  error
	)
	for n := range w.cfg.writes {
		p := int32((seq + int64(n)) % int64(w.cfg.partitions))
		t.Writes[n] = history.TxnWrite{Partition: p, Value: fmt.Sprintf("t%d-%07d-%d", i, seq, n)}
		pending.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Partition: p, Key: w.key, Value: []byte(t.Writes[n].Value)}, func(r *kgo.Record, err error) {
			defer pending.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			t.Writes[n].Acked, t.Writes[n].Offset = true, r.Offset
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	flushErr := cl.Flush(ctx)
	commit := seq%int64(w.cfg.abortEvery) != int64(w.cfg.abortEvery-1)
	if flushErr != nil {
		commit = false
		if err := cl.AbortBufferedRecords(ctx); err != nil {
			t.Outcome, t.Err = history.TxnAborted, "aborting buffered records: "+err.Error()
			cl.Close() // fails what is still buffered: every promise runs
			pending.Wait()
			return false
		}
	}
	pending.Wait()
	if failed != nil {
		commit = false
	}
	err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	switch {
	case err == nil && commit:
		t.Outcome = history.TxnCommitted
		w.committed.Add(1)
		return true
	case err == nil:
		t.Outcome, t.Err = history.TxnAborted, "aborted on purpose"
		if failed != nil {
			t.Err = "a write failed: " + failed.Error()
		}
		return true
	case commit:
		// The commit may or may not have happened; the documented recovery is a
		// retried abort, whose outcome does not tell either.
		t.Outcome, t.Err = history.TxnUnknown, "commit: "+err.Error()
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return false
		}
		return true
	default:
		// Never asked to commit: it cannot have.
		t.Outcome, t.Err = history.TxnAborted, "abort: "+err.Error()
		return false
	}
}

// read records every poll of a read_committed reader of the whole input.
func (w *txnWorkload) read(ctx context.Context, name string, cl *kgo.Client) {
	defer w.reading.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			pl := history.Poll{Reader: name, Partition: p.Partition, At: now, Records: make([]history.Record, len(p.Records))}
			for i, r := range p.Records {
				pl.Records[i] = history.Record{Offset: r.Offset, Value: string(r.Value)}
			}
			w.rec.addPoll(pl)
		})
	}
}

// newCopier is copier i's session; a new one fences the previous one's epoch.
func (w *txnWorkload) newCopier(i int) (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(append(clientOpts(w.cfg.seeds, fmt.Sprintf("chaos-copier-%d", i)),
		kgo.TransactionalID(copyID(i)),
		kgo.TransactionTimeout(w.cfg.timeout),
		kgo.ConsumerGroup(w.cfg.group),
		kgo.ConsumeTopics(w.cfg.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(w.cfg.output),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
}

// copy is one member of the copy stage: each poll's records are written to the
// output in a transaction that also commits the group's input offsets. After
// a failed end (franz-go: no error of End is retryable) the session is
// replaced.
func (w *txnWorkload) copy(ctx context.Context, i int) {
	defer w.copying.Done()
	var s *kgo.GroupTransactSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for ctx.Err() == nil {
		if s == nil {
			var err error
			if s, err = w.newCopier(i); err != nil {
				w.logf("copier %d: %v", i, err)
				return
			}
		}
		fs := s.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := s.Begin(); err != nil {
			w.logf("copier %d: begin: %v", i, err)
			s.Close()
			s = nil
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
		})
		// Background, not ctx: a cancelled EndTxn leaves the outcome unknowable.
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := s.End(ectx, kgo.TryCommit)
		cancel()
		if err != nil {
			w.logf("copier %d: end: %v (a new session takes over)", i, err)
			s.Close()
			s = nil
		}
	}
}

// stopProducers lets every producer finish its transaction and stop.
func (w *txnWorkload) stopProducers() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.sending.Wait()
}

// stopReaders stops the read_committed readers.
func (w *txnWorkload) stopReaders() {
	w.cancelRead()
	w.reading.Wait()
	for _, cl := range w.readers {
		cl.Close()
	}
	w.readers = nil
}

// stopCopiers stops the copy stage between transactions.
func (w *txnWorkload) stopCopiers() {
	w.cancelCopy()
	w.copying.Wait()
}

func (w *txnWorkload) close() {
	w.stopProducers()
	w.stopReaders()
	w.stopCopiers()
}

// committedOffsets returns the offsets group committed in topic.
func committedOffsets(adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// drainCommitted waits until group has committed every partition of topic up
// to end.
func drainCommitted(adm *kadm.Client, group, topic string, end map[int32]int64, timeout time.Duration) error {
	return waitFor(timeout, func() error {
		got, err := committedOffsets(adm, group, topic)
		if err != nil {
			return err
		}
		for p, want := range end {
			if got[p] < want {
				return fmt.Errorf("partition %d committed at %d, want %d", p, got[p], want)
			}
		}
		return nil
	})
}
