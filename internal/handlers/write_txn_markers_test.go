package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestRefusedMarkerAnsweredOnceCommitted: a transaction coordinator counts a
// marker refused with INVALID_PRODUCER_EPOCH as written (a coordinator that
// lost its wait for the marker it wrote, and writes it again after the
// producer opened its next transaction on the partition, gets that), and
// then makes the transaction's next state durable. So the refusal is answered
// only once the high-water mark passes the log end: while the fsync that
// makes the first marker durable is held back, the retried marker's answer
// waits too. Answered at once, a power cut could lose the marker of a
// transaction whose completion had been made durable (FuzzTransactions found
// it).
func TestRefusedMarkerAnsweredOnceCommitted(t *testing.T) {
	gate := make(chan struct{})
	var gated atomic.Bool
	m, h := pipeHandlers(t, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && filepath.Ext(op.Path) == ".log" && gated.Load() {
			<-gate
		}
		return nil
	}))
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the manager's close, which waits for the fsync
	p, err := m.Partition("pipe", 0)
	if err != nil {
		t.Fatal(err)
	}
	const pid = 4
	data := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, Attributes: 0x10, FirstTimestamp: time.Now().UnixMilli()}) // transactional
	res, err := p.Append(data, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.WaitHighWatermark(ctx, res.LastOffset+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	gated.Store(true)
	marker := func() *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.TransactionVersion = pid, 1, true, 2
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = "pipe", []int32{0}
		rm.Topics = append(rm.Topics, rt)
		req.Markers = append(req.Markers, rm)
		return req
	}
	answer := func(ctx context.Context) int16 {
		return h.WriteTxnMarkersHere(ctx, marker()).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	// The first marker is appended; its wait ends before the fsync does, as a
	// coordinator's does when its partition is reloaded.
	first, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if code := answer(first); code == 0 {
		t.Fatal("the marker was acknowledged while its fsync was held back")
	}
	wait.For(t, "the first marker in the log", func() bool { return p.LogEndOffset() == res.LastOffset+2 })
	// The producer's next transaction opens at the marker's epoch.
	next := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, ProducerEpoch: 1, Attributes: 0x10, FirstTimestamp: time.Now().UnixMilli()})
	if _, err := p.Append(next, 1); err != nil {
		t.Fatal(err)
	}

	retried, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if code := answer(retried); code == kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the retried marker was refused at once, with the first one not durable (high-water mark %d, log end %d)", p.HighWatermark(), p.LogEndOffset())
	}

	release()
	if code := answer(ctx); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the retried marker: %v, want INVALID_PRODUCER_EPOCH once the first is durable", kerr.ErrorForCode(code))
	}
	if hwm := p.HighWatermark(); hwm != res.LastOffset+3 {
		t.Fatalf("high-water mark %d when the refusal was answered, want %d (past the first marker and the next batch)", hwm, res.LastOffset+3)
	}
}

// completions records the group coordinator's CompleteTxnOffsets calls.
type completions struct {
	Groups
	mu    sync.Mutex
	calls []string
}

func (c *completions) CompleteTxnOffsets(partition int32, pid int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf("partition %d producer %d commit %v", partition, pid, commit))
}

func (c *completions) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// offsetsHandlers is broker 1 leading __consumer_offsets partition 0 alone,
// on a disk whose operations go through inj, with groups as its group
// coordinator.
func offsetsHandlers(t *testing.T, inj vfs.Injector, groups Groups) (*replica.Manager, *Handlers) {
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
		&metadata.TopicRecord{Name: group.OffsetsTopic, ID: id},
		&metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	return m, New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, fakeCluster{img: img}, m, groups, nil, logger)
}

// TestRetriedOffsetsMarkerCompletesOffsets: a commit marker on a
// __consumer_offsets partition makes the group coordinator apply the
// transaction's offsets (CompleteTxnOffsets) once it is committed, also when
// the wait of the first marker failed (REQUEST_TIMED_OUT, or the coordinator's
// context ended) and the coordinator retries it (written again, as Kafka 4.4
// writes a repeated marker of transaction version 2). The handler used to skip
// the call for a refused retry, and with the leader unchanged no replay
// applied them: the group's offsets stayed behind and OffsetFetch with
// RequireStable answered UNSTABLE_OFFSET_COMMIT for good.
func TestRetriedOffsetsMarkerCompletesOffsets(t *testing.T) {
	gate := make(chan struct{})
	var gated atomic.Bool
	groups := &completions{}
	m, h := offsetsHandlers(t, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && filepath.Ext(op.Path) == ".log" && gated.Load() {
			<-gate
		}
		return nil
	}), groups)
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	const pid = 4
	// The transaction's offset commit (a transactional batch of the producer).
	data := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, Attributes: 0x10, FirstTimestamp: time.Now().UnixMilli()})
	res, err := p.Append(data, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.WaitHighWatermark(ctx, res.LastOffset+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	marker := func() *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.TransactionVersion = pid, 1, true, 2
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = group.OffsetsTopic, []int32{0}
		rm.Topics = append(rm.Topics, rt)
		req.Markers = append(req.Markers, rm)
		return req
	}
	answer := func(ctx context.Context) int16 {
		return h.WriteTxnMarkersHere(ctx, marker()).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	// The first marker is appended; its wait ends before it is committed.
	gated.Store(true)
	first, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if code := answer(first); code == 0 {
		t.Fatal("the marker was acknowledged while its fsync was held back")
	}
	wait.For(t, "the first marker in the log", func() bool { return p.LogEndOffset() == res.LastOffset+2 })
	release()
	// The coordinator's retry.
	code := answer(ctx)
	if code != 0 {
		t.Fatalf("the retried marker: %v", kerr.ErrorForCode(code))
	}
	want := fmt.Sprintf("partition 0 producer %d commit true", pid)
	if calls := groups.all(); !slices.Equal(calls, []string{want}) {
		t.Fatalf("CompleteTxnOffsets calls %q after the retried marker (%v), want [%s]", calls, kerr.ErrorForCode(code), want)
	}
}
