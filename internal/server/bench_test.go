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

func startBenchNode(b *testing.B) *Node {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, nodeConfig(b.TempDir()), testLogger(), vfs.Default)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
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
