package handlers

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// slowLogSyncs makes every fsync of a segment file take d, as a slow disk does,
// and counts them.
type slowLogSyncs struct {
	d     time.Duration
	syncs atomic.Int64
}

func (s *slowLogSyncs) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpSync && filepath.Ext(op.Path) == ".log" {
		s.syncs.Add(1)
		time.Sleep(s.d)
	}
	return nil
}

// TestPipelinedProduceSharesFsyncs: the Java client's acks=all pattern, five
// Produce requests of one batch each in flight on one connection. Each is
// appended as it arrives, while the ones before it still wait for their fsync,
// so one fsync acknowledges all the requests that arrived while the previous
// one ran: two fsyncs for the five (the first begins after the first append),
// not one each. Responses keep request order.
func TestPipelinedProduceSharesFsyncs(t *testing.T) {
	const inFlight, recordsPerBatch = 5, 10
	slow := &slowLogSyncs{d: 200 * time.Millisecond}
	m, h := pipeHandlers(t, slow)
	nc := serveConn(t, h)

	// All five frames in one write, as a client with five batches ready sends them.
	var frames []byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	for corr := int32(1); corr <= inFlight; corr++ {
		frames = append(frames, f.AppendRequest(nil, pipeProduce(recordsPerBatch), corr)...)
	}
	before := slow.syncs.Load()
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("pipe", 0)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for want := int32(1); want <= inFlight; want++ {
		corr, err := readCorrelation(br)
		if err != nil {
			t.Fatalf("response %d: %v (log end offset %d, high-water mark %d, %d fsyncs)", want, err, p.LogEndOffset(), p.HighWatermark(), slow.syncs.Load()-before)
		}
		if corr != want {
			t.Fatalf("response %d has correlation id %d: out of request order", want, corr)
		}
	}
	if hwm := p.HighWatermark(); hwm != inFlight*recordsPerBatch {
		t.Fatalf("high-water mark %d after five acknowledged requests, want %d", hwm, inFlight*recordsPerBatch)
	}
	syncs := slow.syncs.Load() - before
	t.Logf("%d pipelined acks=all requests acknowledged after %d fsyncs", inFlight, syncs)
	if syncs > 2 {
		t.Fatalf("%d fsyncs for %d pipelined requests, want at most 2: requests of one connection did not share a group commit", syncs, inFlight)
	}
}

// pipeHandlers serves topic "pipe" (one partition, led here) from a log whose
// file operations go through inj.
func pipeHandlers(t *testing.T, inj vfs.Injector) (*replica.Manager, *Handlers) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.NewErrorFS(vfs.NewMem(), inj), "/logs", 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	id := metadata.UUID{7}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "pipe", ID: id},
		&metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	return m, New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, fakeCluster{img: img}, m, nil, nil, logger)
}

// pipeProduce is an acks=all Produce v9 of one batch of records records to
// "pipe" partition 0.
func pipeProduce(records int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "pipe"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Build(batchtest.Options{Records: batchtest.Values(records, 8)})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestProduceReadyOnceAcknowledged: an acks=all Produce's Response.Ready is
// false while its batch waits for the fsync and true once the high-water mark
// passed it, and its Wait then answers at once: the connection's writer puts
// the answers of the requests one fsync acknowledged into one socket write
// (protocol's TestReadyResponsesShareAWrite) without ever delaying one behind a
// wait that blocks.
func TestProduceReadyOnceAcknowledged(t *testing.T) {
	// Every fsync of the segment waits for the gate.
	gate := make(chan struct{})
	var blocked atomic.Bool
	m, h := pipeHandlers(t, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && filepath.Ext(op.Path) == ".log" {
			blocked.Store(true)
			<-gate
		}
		return nil
	}))
	p, err := m.Partition("pipe", 0)
	if err != nil {
		t.Fatal(err)
	}
	req := pipeProduce(10)
	resp := h.Handle(context.Background(), &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.Version, Msg: req})
	if resp.Wait == nil || !resp.WaitOnWriter || resp.Ready == nil {
		t.Fatalf("acks=all Produce answered %+v, want a WaitOnWriter Wait with Ready", resp)
	}
	wait.For(t, "the fsync under way", blocked.Load)
	if resp.Ready() {
		t.Fatalf("Ready before the batch's fsync ended (high-water mark %d)", p.HighWatermark())
	}
	close(gate)
	wait.For(t, "Ready after the fsync", resp.Ready)
	if hwm := p.HighWatermark(); hwm < 10 {
		t.Fatalf("Ready with the high-water mark at %d, below the batch's end 10", hwm)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a Wait that had to wait would answer with the context's error
	out := resp.Wait(ctx).Msg.(*kmsg.ProduceResponse)
	if code := out.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("Wait after Ready answered error code %d", code)
	}
}
