package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkProduce measures produce throughput of one node on loopback with the
// franz-go client: b.N records of the given size, batched by the client (linger
// 5ms, 16 KiB batches), acks=1 and acks=all. With the default group-commit flush
// policy acks=all waits for fsync.
func BenchmarkProduce(b *testing.B) {
	for _, acks := range []struct {
		name string
		acks kgo.Acks
	}{{"acks=1", kgo.LeaderAck()}, {"acks=all", kgo.AllISRAcks()}} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", acks.name, size), func(b *testing.B) {
				n := startBenchNode(b)
				opts := []kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.RequiredAcks(acks.acks),
					kgo.ProducerLinger(5 * time.Millisecond), kgo.ProducerBatchMaxBytes(16 << 10), kgo.DefaultProduceTopic("bench")}
				if acks.acks != kgo.AllISRAcks() {
					opts = append(opts, kgo.DisableIdempotentWrite())
				}
				cl := benchClient(b, opts...)
				produceN(b, cl, 1000, size) // warm up: topic created, connections open
				b.SetBytes(int64(size))
				b.ResetTimer()
				produceN(b, cl, b.N, size)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkConsume measures reading b.N records of 1 KiB from the start of a
// partition with the franz-go client (served with sendfile from the segment files).
func BenchmarkConsume(b *testing.B) {
	const size = 1024
	n := startBenchNode(b)
	pcl := benchClient(b, kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10))
	produceN(b, pcl, b.N, size)
	b.SetBytes(size)
	b.ResetTimer()
	ccl := benchClient(b, kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for got := 0; got < b.N; {
		fs := ccl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func startBenchNode(tb testing.TB) *Node {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, nodeConfig(tb.TempDir()), testLogger(), vfs.Default)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n
}

func benchClient(b *testing.B, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.AllowAutoTopicCreation())...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// produceN sends n records of size bytes asynchronously and waits for every ack.
func produceN(b *testing.B, cl *kgo.Client, n, size int) {
	value := make([]byte, size)
	errs := make(chan error, 1)
	for i := 0; i < n; i++ {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkTransaction measures one transactional producer on one node: each
// op is a transaction of 100 records of 1 KiB, produced, flushed and committed
// (franz-go, transaction version 2, so the first produce of each transaction
// adds its partition implicitly and waits for the previous one to complete).
// Reported beside ns/op: the mean time from the first produce to its ack
// (first-ack-ms), the flush (flush-ms) and EndTxn (end-ms).
func BenchmarkTransaction(b *testing.B) {
	const records, size = 100, 1024
	n := startBenchNode(b)
	cl := benchClient(b, kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"),
		kgo.TransactionalID("bench-txn"), kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10))
	ctx := context.Background()
	value := make([]byte, size)
	var firstAck, flush, end time.Duration
	txn := func() {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		acked := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) { acked <- err })
		for i := 1; i < records; i++ {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := <-acked; err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		firstAck, flush, end = firstAck+t1.Sub(start), flush+t2.Sub(t1), end+time.Since(t2)
	}
	txn() // warm up: topic created, coordinator loaded
	firstAck, flush, end = 0, 0, 0
	b.SetBytes(records * size)
	b.ResetTimer()
	for range b.N {
		txn()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.ReportMetric(ms(firstAck), "first-ack-ms")
	b.ReportMetric(ms(flush), "flush-ms")
	b.ReportMetric(ms(end), "end-ms")
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}
