package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
)

// rawConn is a client connection that sends pre-encoded request frames and
// reads responses into one reused buffer: it allocates nothing per request,
// so allocations counted around a round trip are the broker's.
type rawConn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte
}

func dialRaw(tb testing.TB, addr string) *rawConn {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
}

// roundTrip sends frame (size prefix included) and returns the response body
// after its correlation id; the slice is valid until the next call.
func (c *rawConn) roundTrip(tb testing.TB, frame []byte) []byte {
	if _, err := c.nc.Write(frame); err != nil {
		tb.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		tb.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	if _, err := io.ReadFull(c.br, c.buf); err != nil {
		tb.Fatal(err)
	}
	return c.buf[4:]
}

// requestFrame encodes req as a frame with client id "bench".
func requestFrame(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
}

// produceFrame is a Produce v11 of one uncompressed batch of records values
// of size bytes to partition 0 of topic.
func produceFrame(tb testing.TB, topic string, acks int16, records, size int) []byte {
	tb.Helper()
	return requestFrame(produceRequestOf(topic, acks, benchBatch(tb, records, size)), 11)
}

// benchBatch is an uncompressed batch of records values of size bytes.
func benchBatch(tb testing.TB, records, size int) []byte {
	tb.Helper()
	recs := make([]batch.Record, records)
	for i := range recs {
		recs[i].Value = make([]byte, size)
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fetchFrame is a Fetch v12 (no session) of partition 0 of topic from offset.
func fetchFrame(topic string, offset int64, maxBytes int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 500, 1, maxBytes, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = offset, maxBytes, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return requestFrame(req, 12)
}

// checkProduced fails unless body is a Produce v11 response without errors.
func checkProduced(tb testing.TB, body []byte) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	if err := resp.ReadFrom(body[1:]); err != nil { // one tag byte: response header v1
		tb.Fatal(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				tb.Fatalf("produce to %s-%d: error %d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
}

// startRequestBench starts a node with a one-partition topic and a raw
// connection to it.
func startRequestBench(tb testing.TB, topic string) (*Node, *rawConn) {
	tb.Helper()
	n := startBenchNode(tb)
	createBenchTopic(tb, n, topic, 1)
	return n, dialRaw(tb, n.KafkaAddr())
}

// createBenchTopic creates topic with partitions partitions on n.
func createBenchTopic(tb testing.TB, n *Node, topic string, partitions int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkProduceRequest measures one Produce request at a time over a raw
// connection: a batch of 16 records of 1 KiB (a Java client's 16 KiB batch),
// 1,000 (a franz-go batch at high throughput) or 9,000 of 100 B (a franz-go
// batch of 100 B records at high throughput: about 1 MB), acks=1 and acks=all.
// The client allocates nothing per request, so allocs/op and B/op are the
// broker's cost of one request.
func BenchmarkProduceRequest(b *testing.B) {
	for _, acks := range []int16{1, -1} {
		for _, batch := range []struct{ records, size int }{{16, 1024}, {1000, 1024}, {9000, 100}} {
			b.Run(fmt.Sprintf("acks=%d/records=%d/size=%d", acks, batch.records, batch.size), func(b *testing.B) {
				_, c := startRequestBench(b, "bench")
				frame := produceFrame(b, "bench", acks, batch.records, batch.size)
				checkProduced(b, c.roundTrip(b, frame))
				b.SetBytes(int64(batch.records * batch.size))
				b.ReportAllocs()
				for b.Loop() {
					c.roundTrip(b, frame)
				}
			})
		}
	}
}

// BenchmarkProduceRequestByID is BenchmarkProduceRequest's 16-record batch as
// a Produce v13, which names the topic by id (KIP-516): the id is looked up in
// the metadata snapshot the name would be, so allocs/op are the same.
func BenchmarkProduceRequestByID(b *testing.B) {
	for _, acks := range []int16{1, -1} {
		b.Run(fmt.Sprintf("acks=%d/records=16/size=1024", acks), func(b *testing.B) {
			n, c := startRequestBench(b, "bench")
			frame := produceFrameByID(b, topicIDOf(b, n, "bench"), acks, 16, 1024)
			checkProducedV13(b, c.roundTrip(b, frame))
			b.SetBytes(16 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				c.roundTrip(b, frame)
			}
		})
	}
}

// topicIDOf is topic's id on n.
func topicIDOf(tb testing.TB, n *Node, topic string) [16]byte {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(context.Background(), topic)
	if err != nil || topics[topic].Err != nil {
		tb.Fatalf("listing %s: %v %v", topic, err, topics[topic].Err)
	}
	return topics[topic].ID
}

// produceFrameByID is produceFrame as a Produce v13 naming the topic by id.
func produceFrameByID(tb testing.TB, id [16]byte, acks int16, records, size int) []byte {
	tb.Helper()
	req := produceRequestOf("", acks, benchBatch(tb, records, size))
	req.Topics[0].TopicID = id
	return requestFrame(req, 13)
}

// checkProducedV13 fails unless body is a Produce v13 response without errors.
func checkProducedV13(tb testing.TB, body []byte) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 13
	if err := resp.ReadFrom(body[1:]); err != nil {
		tb.Fatal(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				tb.Fatalf("produce to %x-%d: error %d", t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	}
}

// BenchmarkFetchRequest measures one Fetch request at a time over a raw
// connection, reading 1 KiB records from the start of a partition: 16 KiB
// (a consumer at the tail of a Java client's batches) or 1 MiB per fetch.
// The records are sent with sendfile; allocs/op and B/op are the broker's.
func BenchmarkFetchRequest(b *testing.B) {
	for _, fetch := range []struct {
		maxBytes int32
		records  int // per batch: batches that fit the fetch (and max.message.bytes)
	}{{16 << 10, 15}, {1 << 20, 1000}} {
		maxBytes := fetch.maxBytes
		b.Run(fmt.Sprintf("max=%dKiB", maxBytes>>10), func(b *testing.B) {
			_, c := startRequestBench(b, "bench")
			produce := produceFrame(b, "bench", 1, fetch.records, 1024)
			for range 20 {
				checkProduced(b, c.roundTrip(b, produce))
			}
			frame := fetchFrame("bench", 0, maxBytes)
			b.SetBytes(int64(maxBytes))
			b.ReportAllocs()
			for b.Loop() {
				c.roundTrip(b, frame)
			}
		})
	}
}

// TestRequestAllocs pins the broker's allocations per request on the produce
// and fetch paths (a raw client that allocates nothing; see
// BenchmarkProduceRequest and docs/benchmarks.md). Before session 9 a Produce
// of one batch cost 16 allocations at acks=1 and 27 at acks=all (a goroutine,
// its channel and closures per acks=all wait, error-count closures), a Fetch 38.
func TestRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	n, c := startRequestBench(t, "allocs")
	for _, tc := range []struct {
		name  string
		frame []byte
		max   float64
	}{
		{"produce acks=1", produceFrame(t, "allocs", 1, 16, 1024), 15},
		{"produce acks=all", produceFrame(t, "allocs", -1, 16, 1024), 19},
		{"produce v13 (topic id) acks=1", produceFrameByID(t, topicIDOf(t, n, "allocs"), 1, 16, 1024), 15},
		{"fetch 16 KiB", fetchFrame("allocs", 0, 16<<10), 37},
	} {
		// The node's own background work (heartbeats, metadata) allocates too
		// and only ever adds: the least of a few runs is the request's cost.
		allocs := math.Inf(1)
		for range 5 {
			allocs = min(allocs, testing.AllocsPerRun(100, func() { c.roundTrip(t, tc.frame) }))
		}
		if allocs > tc.max {
			t.Errorf("%s: %v allocations per request, want at most %v", tc.name, allocs, tc.max)
		} else {
			t.Logf("%s: %v allocations per request", tc.name, allocs)
		}
	}
}
