package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/interop/report"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// ack is one acknowledged send and when the acknowledgement arrived.
type ack struct {
	report.Produced
	at time.Time
}

// producer sends unique values (<name>-000000, <name>-000001, ...) under five
// keys (<name>-k0..k4) to a topic in the background, one every 2ms, and records
// every acknowledgement in order.
type producer struct {
	name     string
	cl       *kgo.Client
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	mu       struct {
		sync.Mutex
		acks   []ack
		failed []error
	}
}

// startProducer starts a producer on a client of c; opts override the
// defaults (acks=all, idempotent, unlimited retries). It stops at the latest
// when the test ends.
func startProducer(t testing.TB, c *testcluster.Cluster, name, topic string, opts ...kgo.Opt) *producer {
	p := &producer{
		name: name,
		cl:   c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

// halt tells the sending loop to stop (idempotent). A send blocked on a full
// buffer returns once the client is closed, so the cleanup does not wait.
func (p *producer) halt() {
	p.stopOnce.Do(func() { close(p.stop) })
}

func (p *producer) run() {
	defer close(p.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		r := &kgo.Record{Key: fmt.Appendf(nil, "%s-k%d", p.name, i%5), Value: fmt.Appendf(nil, "%s-%06d", p.name, i)}
		// Background, not a cancellable context: kgo fails a buffered
		// record whose context ends, which would make its outcome unknown.
		p.cl.Produce(context.Background(), r, p.promise)
	}
}

func (p *producer) promise(r *kgo.Record, err error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.mu.failed = append(p.mu.failed, fmt.Errorf("%s: %w", r.Value, err))
		return
	}
	p.mu.acks = append(p.mu.acks, ack{report.Produced{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}, now})
}

// finish stops sending, waits until every send has an answer, and fails the test
// if any send failed: with idempotence and unlimited retries none may.
func (p *producer) finish(t testing.TB) {
	t.Helper()
	p.halt()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		t.Fatalf("producer %s: flushing: %v", p.name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, err := range p.mu.failed {
		if i == 5 {
			t.Errorf("producer %s: ... %d failed sends in all", p.name, len(p.mu.failed))
			break
		}
		t.Errorf("producer %s: send failed: %v", p.name, err)
	}
}

// acks returns a copy of the acknowledgements so far, in arrival order.
func (p *producer) acks() []ack {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ack(nil), p.mu.acks...)
}

// acksSince counts acknowledgements that arrived after since.
func (p *producer) acksSince(since time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := len(p.mu.acks) - 1; i >= 0 && p.mu.acks[i].at.After(since); i-- {
		n++
	}
	return n
}

// waitAcks waits until every producer has had n acknowledgements after since.
func waitAcks(t testing.TB, since time.Time, n int, ps ...*producer) {
	t.Helper()
	testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("%d acknowledged writes per producer", n), func() error {
		for _, p := range ps {
			if got := p.acksSince(since); got < n {
				return fmt.Errorf("producer %s has %d", p.name, got)
			}
		}
		return nil
	})
}

// produced merges the producers' acknowledgements for report.Check: each
// producer's keep their order, which is all Check needs (keys differ).
func produced(ps ...*producer) []report.Produced {
	var all []report.Produced
	for _, p := range ps {
		for _, a := range p.acks() {
			all = append(all, a.Produced)
		}
	}
	return all
}

// read is what a consumer read: the records in read order, and the leader epoch
// of the batch each value was read from.
type read struct {
	records []report.Consumed
	epochs  map[string]int32
}

func (r *read) add(rec *kgo.Record) {
	if r.epochs == nil {
		r.epochs = map[string]int32{}
	}
	c := report.Consumed{Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		c.Headers = append(c.Headers, report.Header{Key: h.Key, Value: h.Value})
	}
	r.records = append(r.records, c)
	r.epochs[string(rec.Value)] = rec.LeaderEpoch
}

// readAll reads every partition of topic from its start up to its current
// end (the high-water mark), with a new direct-partition consumer.
func readAll(t *testing.T, c *testcluster.Cluster, topic string) *read {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	end := map[int32]int64{}
	testcluster.Eventually(t, 30*time.Second, "the end offsets of "+topic, func() error {
		ends, err := c.Admin().ListEndOffsets(context.Background(), topic)
		if err != nil {
			return err
		}
		if err := ends.Error(); err != nil {
			return err
		}
		ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
		return nil
	})
	from := map[int32]kgo.Offset{}
	for p := range end {
		from[p] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	r := &read{}
	next := map[int32]int64{}
	behind := func() bool {
		for p, e := range end {
			if next[p] < e {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: read up to %v of %v in 60s", topic, next, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("reading %s: %v", topic, err) })
		fs.EachRecord(func(rec *kgo.Record) {
			r.add(rec)
			next[rec.Partition] = rec.Offset + 1
		})
	}
	return r
}

// check fails the test on every anomaly between what was acknowledged and what
// was read from the single partition of a topic.
func check(t *testing.T, acked []report.Produced, got []report.Consumed) {
	t.Helper()
	checkPartitions(t, 1, acked, got)
}

// checkPartitions is check for a topic of n partitions.
func checkPartitions(t *testing.T, n int32, acked []report.Produced, got []report.Consumed) {
	t.Helper()
	errs := report.Check(n, acked, got)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	t.Logf("history checked: %d acknowledged writes, %d records read, no anomaly", len(acked), len(got))
}

// waitEveryBroker waits until the Metadata answer of every running, unpaused
// broker, each from its own image, shows topic-partition as cond wants it:
// a client may ask any of them, and a broker's image may lag the active
// controller's for a moment.
func waitEveryBroker(t *testing.T, c *testcluster.Cluster, topic string, partition int32, what string, cond func(testcluster.PartitionState) error) {
	t.Helper()
	for _, n := range c.Nodes() {
		if !n.Running() || n.Paused() || !n.IsBroker() {
			continue
		}
		testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("node %d to see %s-%d: %s", n.ID, topic, partition, what), func() error {
			st, err := n.Partition(context.Background(), topic, partition)
			if err != nil {
				return err
			}
			if err := cond(st); err != nil {
				return fmt.Errorf("%w; now %v", err, st)
			}
			return nil
		})
	}
}

// partitionBytes reads a stopped node's copy of topic's partition 0 from its
// data dir: the log's end offset and every byte of its batches.
func partitionBytes(t *testing.T, n *testcluster.Node, topic string) (int64, []byte) {
	t.Helper()
	if n.Running() {
		t.Fatalf("node %d is running: stop it before reading its data dir", n.ID)
	}
	l, err := storage.Open(vfs.Default, filepath.Join(n.DataDir, "logs", topic+"-0"), storage.Config{})
	if err != nil {
		t.Fatalf("node %d: opening its log: %v", n.ID, err)
	}
	defer l.Close()
	end := l.LogEndOffset()
	var all []byte
	for off := l.LogStartOffset(); off < end; {
		chunk, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("node %d: reading at %d: %v", n.ID, off, err)
		}
		b, err := chunk.Bytes()
		chunk.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("node %d: reading at %d: %d bytes, %v", n.ID, off, len(b), err)
		}
		all = append(all, b...)
		off = nextOffset(t, b)
	}
	return end, all
}

// nextOffset returns the offset after the last batch in b, checking every
// batch on the way (stored batches: CRC and framing).
func nextOffset(t *testing.T, b []byte) int64 {
	t.Helper()
	var next int64
	it := batch.NewStoredIter(b)
	for it.Next() {
		next = it.Header().NextOffset()
	}
	if err := it.Err(); err != nil {
		t.Fatalf("a stored batch does not parse: %v", err)
	}
	return next
}

// checkReplicasAgree compares the stopped nodes' copies of topic's partition 0
// byte for byte.
func checkReplicasAgree(t *testing.T, topic string, nodes ...*testcluster.Node) {
	t.Helper()
	var wantEnd int64
	var want []byte
	for i, n := range nodes {
		end, b := partitionBytes(t, n, topic)
		if i == 0 {
			wantEnd, want = end, b
			continue
		}
		if end != wantEnd || !bytes.Equal(b, want) {
			t.Fatalf("replicas disagree: node %d ends at %d with %d bytes, node %d at %d with %d bytes",
				nodes[0].ID, wantEnd, len(want), n.ID, end, len(b))
		}
	}
	t.Logf("replicas of %s-0 on nodes %s agree: %d records, %d bytes", topic, ids(nodes), wantEnd, len(want))
}

func ids(nodes []*testcluster.Node) string {
	var b []byte
	for i, n := range nodes {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n.ID), 10)
	}
	return string(b)
}

// metricsOf is node n's /metrics page.
func metricsOf(t testing.TB, n *testcluster.Node) []byte {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return body
}
