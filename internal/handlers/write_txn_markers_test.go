package handlers

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestRefusedMarkerAnsweredOnceCommitted: a transaction coordinator counts a
// marker refused with INVALID_PRODUCER_EPOCH as written (a coordinator that
// lost its wait for the marker it wrote, and writes it again, gets that), and
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

	retried, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if code := answer(retried); code == kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the retried marker was refused at once, with the first one not durable (high-water mark %d, log end %d)", p.HighWatermark(), p.LogEndOffset())
	}

	release()
	if code := answer(ctx); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the retried marker: %v, want INVALID_PRODUCER_EPOCH once the first is durable", kerr.ErrorForCode(code))
	}
	if hwm := p.HighWatermark(); hwm != res.LastOffset+2 {
		t.Fatalf("high-water mark %d when the refusal was answered, want %d (past the first marker)", hwm, res.LastOffset+2)
	}
}
