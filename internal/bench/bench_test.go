package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func validConfig() Config {
	return Config{
		Brokers: []string{"127.0.0.1:0"}, Topic: "t", Partitions: 1, ReplicationFactor: 1,
		RecordSize: 100, Count: 10, Acks: AcksAll, Compression: "none", Producers: 1, Consumers: 1,
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		change func(*Config)
		bad    string // a fragment of the complaint; empty: valid
	}{
		{name: "produce", mode: "produce"},
		{name: "consume to the end", mode: "consume", change: func(c *Config) { c.Count = 0 }},
		{name: "e2e", mode: "e2e"},
		{name: "unknown mode", mode: "read", bad: "mode"},
		{name: "no brokers", mode: "produce", change: func(c *Config) { c.Brokers = nil }, bad: "brokers"},
		{name: "no topic", mode: "produce", change: func(c *Config) { c.Topic = "" }, bad: "topic"},
		{name: "no partitions", mode: "produce", change: func(c *Config) { c.Partitions = 0 }, bad: "partitions"},
		{name: "no replicas", mode: "produce", change: func(c *Config) { c.ReplicationFactor = 0 }, bad: "replication"},
		{name: "negative count", mode: "produce", change: func(c *Config) { c.Count = -1 }, bad: "count"},
		{name: "no bound", mode: "produce", change: func(c *Config) { c.Count = 0 }, bad: "count or a duration"},
		{name: "negative rate", mode: "produce", change: func(c *Config) { c.Rate = -5 }, bad: "rate"},
		{name: "bad acks", mode: "produce", change: func(c *Config) { c.Acks = "2" }, bad: "acks"},
		{name: "bad codec", mode: "produce", change: func(c *Config) { c.Compression = "brotli" }, bad: "compression"},
		{name: "text payload", mode: "produce", change: func(c *Config) { c.Payload = PayloadText }},
		{name: "bad payload", mode: "produce", change: func(c *Config) { c.Payload = "random" }, bad: "payload"},
		{name: "no producers", mode: "produce", change: func(c *Config) { c.Producers = 0 }, bad: "producers"},
		{name: "huge records", mode: "produce", change: func(c *Config) { c.RecordSize = 2 << 20 }, bad: "record size"},
		{name: "no consumers", mode: "consume", change: func(c *Config) { c.Consumers = 0 }, bad: "consumers"},
		{name: "e2e tiny records", mode: "e2e", change: func(c *Config) { c.RecordSize = 4 }, bad: "timestamp"},
		{name: "e2e acks 0", mode: "e2e", change: func(c *Config) { c.Acks = AcksNone }, bad: "acks 1 or all"},
		{name: "negative linger", mode: "produce", change: func(c *Config) { c.Linger = -time.Millisecond }, bad: "linger"},
		{name: "small batches", mode: "produce", change: func(c *Config) { c.BatchMaxBytes = 16 << 10 }},
		{name: "negative batch bound", mode: "produce", change: func(c *Config) { c.BatchMaxBytes = -1 }, bad: "batch max bytes"},
		{name: "tiny batch bound", mode: "produce", change: func(c *Config) { c.BatchMaxBytes = 100 }, bad: "batch max bytes"},
		{name: "negative drain", mode: "e2e", change: func(c *Config) { c.DrainTimeout = -time.Second }, bad: "drain"},
		{name: "transactions", mode: "produce", change: func(c *Config) { c.TransactionRecords = 100 }},
		{name: "fan-out", mode: "produce", change: func(c *Config) { c.Fanout = 5 }},
		{name: "negative fan-out", mode: "produce", change: func(c *Config) { c.Fanout = -1 }, bad: "fan-out"},
		{name: "raw readers without fan-out", mode: "produce", change: func(c *Config) { c.FanoutRaw = true }, bad: "raw fan-out"},
		{name: "e2e fan-out", mode: "e2e", change: func(c *Config) { c.Fanout = 2 }, bad: "produce runs only"},
		{name: "negative transactions", mode: "produce", change: func(c *Config) { c.TransactionRecords = -1 }, bad: "transaction records"},
		{name: "e2e transactions", mode: "e2e", change: func(c *Config) { c.TransactionRecords = 10 }, bad: "produce runs only"},
		{name: "transactions acks 1", mode: "produce", change: func(c *Config) { c.TransactionRecords = 10; c.Acks = AcksLeader }, bad: "acks must be all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			if tc.change != nil {
				tc.change(&c)
			}
			err := c.Validate(tc.mode)
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("got %v, want an ErrInvalidConfig about %q", err, tc.bad)
			}
		})
	}
}

func TestPacer(t *testing.T) {
	start := time.Unix(100, 0)
	p := pacer{start: start, rate: 4}
	for k, want := range []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second} {
		if got := p.next().Sub(start); got != want {
			t.Fatalf("send %d due at +%s, want +%s", k, got, want)
		}
	}
	unpaced := pacer{start: start}
	if !unpaced.next().IsZero() || !unpaced.next().IsZero() {
		t.Fatal("an unpaced send has a due time")
	}
}

func TestPacerWait(t *testing.T) {
	p := pacer{}
	defer p.close()
	for _, ahead := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, fineSpan + 3*time.Millisecond} {
		due := time.Now().Add(ahead)
		if !p.wait(context.Background(), due) {
			t.Fatalf("wait %s ahead reported a cancelled context", ahead)
		}
		if early := time.Until(due); early > 0 {
			t.Fatalf("wait %s ahead returned %s early", ahead, early)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.wait(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("wait on a cancelled context reported success")
	}
}

// BenchmarkPacerLateness reports how late paced sends start, 200 us apart, with a
// Go timer per wait (what the pacer used before) and with pacer.wait, in one run.
func BenchmarkPacerLateness(b *testing.B) {
	for _, tc := range []struct {
		name string
		wait func(p *pacer, due time.Time)
	}{
		{"go-timer", func(_ *pacer, due time.Time) { sleepUntil(context.Background(), due) }},
		{"pacer", func(p *pacer, due time.Time) { p.wait(context.Background(), due) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := pacer{start: time.Now(), rate: 5000}
			defer p.close()
			late := make([]time.Duration, 0, b.N)
			for b.Loop() {
				due := p.next()
				tc.wait(&p, due)
				late = append(late, time.Since(due))
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2].Microseconds()), "p50-late-us")
			b.ReportMetric(float64(late[len(late)*99/100].Microseconds()), "p99-late-us")
		})
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
		want  string
	}{
		{10, 3, "[4 3 3]"}, {2, 3, "[1 1 0]"}, {0, 2, "[0 0]"}, {9, 1, "[9]"},
	} {
		if got := fmt.Sprint(split(tc.total, tc.n)); got != tc.want {
			t.Errorf("split(%d, %d) = %s, want %s", tc.total, tc.n, got, tc.want)
		}
	}
}

func TestRecorderSummary(t *testing.T) {
	r := newRecorder()
	if l := r.summary("x"); l.Count != 0 || l.Max != 0 {
		t.Fatalf("empty summary %+v", l)
	}
	for i := 1; i <= 1000; i++ {
		r.record(time.Duration(i) * time.Millisecond)
	}
	r.record(-time.Second)   // clamped to the lowest value
	r.record(time.Hour * 24) // clamped to the highest value
	l := r.summary("x")
	if l.Count != 1002 || l.Of != "x" {
		t.Fatalf("summary %+v", l)
	}
	within := func(got, want float64) bool { return got >= want*0.99 && got <= want*1.01 }
	if !within(l.P50, 500) || !within(l.P99, 990) || !within(l.P999, 1000) || !within(l.Max, 600_000) || l.Min > 0.002 {
		t.Fatalf("percentiles %+v", l)
	}
	checkOrdered(t, l)
}

// checkOrdered fails unless min <= p50 <= p99 <= p99.9 <= max.
func checkOrdered(t *testing.T, l Latency) {
	t.Helper()
	if l.Count == 0 || l.Min < 0 || l.Min > l.P50 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Fatalf("latency not ordered: %+v", l)
	}
}

// fakeCluster is an in-memory Kafka (franz-go's kfake).
func fakeCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func runConfig(brokers []string, topic string) Config {
	return Config{
		Brokers: brokers, Topic: topic, Partitions: 3, ReplicationFactor: 1,
		RecordSize: 100, Acks: AcksAll, Compression: "none", Producers: 2, Consumers: 2,
		DrainTimeout: 20 * time.Second,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestProduceThenConsume(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	for _, acks := range []string{AcksAll, AcksLeader, AcksNone} {
		c := runConfig(brokers, "produce-"+acks)
		c.Count = 1000
		c.Acks = acks
		c.Compression = "lz4"
		var progress atomic.Int64
		c.Progress = func(n int64) { progress.Add(n) }
		res, err := Produce(ctx, c)
		if err != nil {
			t.Fatalf("acks=%s: %v", acks, err)
		}
		if res.Records != 1000 || res.Bytes != 100_000 || res.Failed != 0 || res.Partitions != 3 || progress.Load() != 1000 {
			t.Fatalf("acks=%s: %+v, progress %d", acks, res, progress.Load())
		}
		if res.RecordsPerSec <= 0 || res.MBPerSec <= 0 || res.Latency.Count != 1000 {
			t.Fatalf("acks=%s: rates %+v", acks, res)
		}
		checkOrdered(t, res.Latency)

		c.Count = 0 // read everything there is
		got, err := Consume(ctx, c)
		if err != nil {
			t.Fatalf("consume after acks=%s: %v", acks, err)
		}
		if got.Records != 1000 || got.Bytes != 100_000 || got.Prefilled != 0 {
			t.Fatalf("consume after acks=%s: %+v", acks, got)
		}
		checkOrdered(t, got.Latency)
	}
}

// TestProduceTimestamps: the load generator stamps each record itself (one
// clock read fewer than the client's own stamp); the stamps are the times the
// records were handed to the client.
func TestProduceTimestamps(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "stamped")
	c.Count, c.Partitions = 200, 1
	before := time.Now().Truncate(time.Millisecond) // the client keeps milliseconds
	if res, err := Produce(ctx, c); err != nil || res.Records != 200 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	after := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("stamped"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for n := 0; n < 200; {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fetches.Records() {
			if r.Timestamp.Before(before) || r.Timestamp.After(after) {
				t.Fatalf("record %d stamped %v, outside the run's %v .. %v", r.Offset, r.Timestamp, before, after)
			}
			n++
		}
	}
}

// batchSizes records the size of every batch a producer had written.
type batchSizes struct {
	mu      sync.Mutex
	largest int
	count   int
}

func (b *batchSizes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.largest = max(b.largest, m.UncompressedBytes)
	b.count++
}

// TestProduceBatchMaxBytes: BatchMaxBytes bounds every batch the producers
// send, so a run's records go out in many small batches instead of a few.
func TestProduceBatchMaxBytes(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "small-batches")
	c.Count, c.Producers, c.Partitions, c.Linger = 400, 1, 1, time.Second // batches leave when full
	c.BatchMaxBytes = 2048
	sizes := &batchSizes{}
	c.ClientOpts = []kgo.Opt{kgo.WithHooks(sizes)}
	res, err := Produce(ctx, c)
	if err != nil || res.Records != 400 || res.BatchMaxBytes != 2048 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	// 400 records of 100 B are at least 40 KB: about 20 full 2 KiB batches.
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	if sizes.largest > 2048 || sizes.count < 20 {
		t.Fatalf("%d batches, the largest %d bytes: want at least 20 of at most 2048", sizes.count, sizes.largest)
	}
}

// TestProduceTransactions checks that a transactional run commits every
// TransactionRecords records per producer, times each commit, and that a
// consume run reads every record and stops at the final commit marker.
func TestProduceTransactions(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "txn")
	c.Count = 500 // 250 per producer: transactions of 100, 100 and 50
	c.TransactionRecords = 100
	res, err := Produce(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 500 || res.Failed != 0 || res.TransactionRecords != 100 || res.CommitLatency == nil || res.CommitLatency.Count != 6 {
		t.Fatalf("transactional run: %+v, commits %+v", res, res.CommitLatency)
	}
	checkOrdered(t, *res.CommitLatency)
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil || !strings.Contains(table.String(), "6 of 100 records") {
		t.Fatalf("table (%v):\n%s", err, table.String())
	}
	c.Count, c.TransactionRecords = 0, 0
	// The topic ends with a commit marker: a read to its end must stop there,
	// with either isolation level, counting only the records.
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		c.ClientOpts = []kgo.Opt{kgo.FetchIsolationLevel(iso)}
		got, err := Consume(ctx, c)
		if err != nil || got.Records != 500 || got.Bytes != 500*int64(c.RecordSize) {
			t.Fatalf("consume (%v): %+v, %v", iso, got, err)
		}
	}
}

// TestProduceFanout: every fan-out reader, decoding or raw, reads every
// delivered record of the run, and none from before it; the readers' Fetch
// responses are counted.
func TestProduceFanout(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			brokers := fakeCluster(t)
			ctx := testCtx(t)
			c := runConfig(brokers, "fanout")
			c.Count = 300
			if _, err := Produce(ctx, c); err != nil { // records the readers must not see
				t.Fatal(err)
			}
			c.Fanout, c.FanoutRaw = 3, raw
			res, err := Produce(ctx, c)
			if err != nil || res.Records != 300 || res.Fanout != 3 || res.FanoutRaw != raw || res.FanoutFewestRead != 300 {
				t.Fatalf("fan-out run: %+v, %v", res, err)
			}
			// 3 readers received at least every record's value once each.
			if res.FanoutFetches < 3 || res.FanoutFetchBytes < 3*300*100 {
				t.Errorf("fan-out fetches: %d responses, %d bytes", res.FanoutFetches, res.FanoutFetchBytes)
			}
		})
	}
}

// TestCountBatches: a raw reader counts records from whole batches' headers,
// skips batches before its offset and control batches, and leaves a partial
// last batch for the next fetch.
func TestCountBatches(t *testing.T) {
	build := func(base int64, n int) []byte {
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte("v")}
		}
		b, err := batch.Build(batch.BuildOptions{BaseOffset: base, ProducerID: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := build(10, 3), build(13, 2)
	marker := batch.BuildControl(batch.Marker{ProducerID: 1})
	batch.SetBaseOffset(marker, 15)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name          string
		data          []byte
		offset        int64
		records, next int64
	}{
		{"empty", nil, 10, 0, 10},
		{"one batch", a, 10, 3, 13},
		{"two batches", join(a, b), 10, 5, 15},
		{"first already read", join(a, b), 13, 2, 15},
		{"control batch", join(a, b, marker), 10, 5, 16},
		{"partial last batch", join(a, b[:len(b)-1]), 10, 3, 13},
		{"partial header", join(a, b[:20]), 10, 3, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records, next, err := countBatches(tc.data, tc.offset)
			if err != nil || records != tc.records || next != tc.next {
				t.Errorf("countBatches = %d records, next %d, %v; want %d, %d", records, next, err, tc.records, tc.next)
			}
		})
	}
	if _, _, err := countBatches(bytes.Repeat([]byte{0xff}, batch.HeaderSize), 0); err == nil {
		t.Error("a garbage length was accepted")
	}
}

func TestProduceForDurationAtRate(t *testing.T) {
	c := runConfig(fakeCluster(t), "paced")
	c.Duration = 500 * time.Millisecond
	c.Rate = 400
	res, err := Produce(testCtx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	// 400/s for 0.5 s is 200 sends (201 counting the one due at the start);
	// a slow machine may fall behind, never ahead.
	if res.Records < 20 || res.Records > 201 {
		t.Fatalf("paced produce delivered %d records, want about 200", res.Records)
	}
}

func TestConsumePrefillsAndStopsAtCount(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "prefill")
	c.Count = 600
	res, err := Consume(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prefilled != 600 || res.Records != 600 || res.Bytes != 60_000 {
		t.Fatalf("%+v", res)
	}
	c.Count = 250 // fewer than the topic holds now
	res, err = Consume(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prefilled != 0 || res.Records != 250 || res.Bytes != 25_000 {
		t.Fatalf("%+v", res)
	}
}

// TestPrefillApart: Prefill produces what a consume run lacks, once; the
// Consume after it finds the topic full and produces nothing.
func TestPrefillApart(t *testing.T) {
	ctx := testCtx(t)
	c := runConfig(fakeCluster(t), "prefill-apart")
	c.Count = 400
	for i, want := range []int64{400, 0} {
		n, err := Prefill(ctx, c)
		if err != nil || n != want {
			t.Fatalf("Prefill %d: %d, %v; want %d", i, n, err, want)
		}
	}
	res, err := Consume(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prefilled != 0 || res.Records != 400 {
		t.Fatalf("%+v", res)
	}
}

func TestConsumeEmptyTopic(t *testing.T) {
	c := runConfig(fakeCluster(t), "empty")
	_, err := Consume(testCtx(t), c)
	if !errors.Is(err, ErrNoRecords) {
		t.Fatalf("got %v, want ErrNoRecords", err)
	}
}

func TestE2E(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "e2e")
	// Records already in the topic are not part of the run.
	c.Count = 50
	if _, err := Produce(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Count = 300
	c.Rate = 1000
	res, err := E2E(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Produced != 300 || res.Records != 300 || res.Failed != 0 || res.Bytes != 30_000 || res.Latency.Count != 300 {
		t.Fatalf("%+v", res)
	}
	checkOrdered(t, res.Latency)

	var out bytes.Buffer
	if err := res.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode", "e2e", "produced", "300 records", "p50 / p99 / p99.9", "1000 records/s"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUnreachableBrokersFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c := runConfig([]string{dead}, "t")
	c.Count = 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := Produce(ctx, c); err == nil {
		t.Fatal("produce to no broker succeeded")
	}
}

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	t.Setenv("GOGC", "150") // restored after the test, as is its absence
	TuneGC()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("with GOGC=150 set: target %d after TuneGC, want it left at 150", got)
	}
	os.Unsetenv("GOGC")
	TuneGC()
	if got := debug.SetGCPercent(150); got != LoadGeneratorGCPercent {
		t.Fatalf("without GOGC: target %d after TuneGC, want %d", got, LoadGeneratorGCPercent)
	}
}
