package share

import (
	"context"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/wait"
)

// recordingDeadLetters is a DeadLetterWriter that keeps what it is asked to
// write.
type recordingDeadLetters struct {
	mu   sync.Mutex
	recs []DeadLetterRecord
}

func (w *recordingDeadLetters) Produce(_ context.Context, _ string, _ int32, recs []DeadLetterRecord) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, recs...)
	return nil
}

func (w *recordingDeadLetters) CreateTopic(context.Context, string) error { return nil }

func (w *recordingDeadLetters) written() []DeadLetterRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]DeadLetterRecord(nil), w.recs...)
}

// TestDeadLetterCopyWaitsForHighWatermark: a new share-partition leader that
// loads a record left Archiving by its predecessor copies it into the
// dead-letter topic with its value, although its high watermark is still
// below the record when it loads (a new leader learns it from its followers'
// fetches). It used to write the dead letter at once with an empty value (the
// read stops at the high watermark): campaign seed 5's two dead letters with
// an empty value although copy.record.enable was on.
func TestDeadLetterCopyWaitsForHighWatermark(t *testing.T) {
	store := &blockingStore{free: 100, blocked: make(chan struct{}),
		snap: &Snapshot{Start: 0, Batches: []StateBatch{{First: 0, Last: 0, State: Archiving, DeliveryCount: 1}}}}
	dlq := &recordingDeadLetters{}
	m, rp := newDeadLetterManager(t, store, dlq, 0, true)
	defer m.Close()
	if rp.HighWatermark() != 0 {
		t.Fatalf("high watermark %d, want 0", rp.HighWatermark())
	}
	// A fetch loads the state: offset 0 is Archiving, and is written again.
	if resp := m.ShareFetch(context.Background(), openFetch("m")); resp.ErrorCode != 0 {
		t.Fatalf("share fetch: code %d", resp.ErrorCode)
	}
	appendRecords(t, rp, 1) // the high watermark passes offset 0
	wait.For(t, "the dead letter", func() bool { return len(dlq.written()) > 0 })
	got := dlq.written()
	if len(got) != 1 || string(got[0].Value) != "v" {
		t.Fatalf("dead letters %+v, want one holding the record's value %q", got, "v")
	}
	wait.For(t, "offset 0 archived", func() bool {
		sp := sharePart(m, "g")
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return sp.p != nil && sp.p.Start() == 1
	})
}
