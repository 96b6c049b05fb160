package share

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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

// TestAcquisitionAtLimitLostIsDeadLettered is the path of the scripted share
// chaos run's CI finding (session 14, record 72 of partition 2): a record
// released at counts 1 and 2 is acquired a third time (the limit), and that
// acquisition's save reaches the share coordinator while the node making it
// loses power, so its fetch hands nothing out. The state loaded again has the
// record at the limit: it is written to the dead-letter topic with delivery
// count 3 and its value, then archived, and never handed out again.
func TestAcquisitionAtLimitLostIsDeadLettered(t *testing.T) {
	store := &failingStore{}
	dlq := &recordingDeadLetters{}
	m, _ := newDeadLetterManager(t, store, dlq, 1, true)
	defer m.Close()
	m.cfg.Defaults.DeliveryLimit = 3
	for i := range int16(2) {
		member := fmt.Sprintf("m%d", i)
		if got := deliver(t, m, member); got != i+1 {
			t.Fatalf("delivery %d: count %d", i+1, got)
		}
		if code := acknowledgeAs(m, member, 0, Release); code != 0 {
			t.Fatalf("release %d: code %d", i+1, code)
		}
	}
	store.fail.Store(true)
	store.landed.Store(true)
	resp := m.ShareFetch(context.Background(), openFetch("m2"))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode == 0 || len(p.AcquiredRecords) != 0 {
		t.Fatalf("an acquisition whose save failed: code %d, acquired %+v; want an error and nothing", p.ErrorCode, p.AcquiredRecords)
	}
	if snap, _, _ := store.Load(context.Background(), Key{Group: "g", TopicID: gcTopicID}, 0); len(snap.Batches) != 1 || snap.Batches[0].DeliveryCount != 3 {
		t.Fatalf("saved state %+v, want offset 0 at count 3 (the save landed)", snap)
	}
	store.fail.Store(false)
	if got := deliver(t, m, "m3"); got != 0 {
		t.Fatalf("after the reload: delivered at count %d, want not at all", got)
	}
	wait.For(t, "the dead letter", func() bool { return len(dlq.written()) > 0 })
	got := dlq.written()
	if len(got) != 1 || string(got[0].Value) != "v" || header(got[0], HeaderDeliveryCount) != "3" {
		t.Fatalf("dead letters %+v, want one of offset 0's value %q at delivery count 3", got, "v")
	}
	wait.For(t, "offset 0 archived and saved", func() bool {
		snap, _, _ := store.Load(context.Background(), Key{Group: "g", TopicID: gcTopicID}, 0)
		return snap.Start == 1
	})
	if got := deliver(t, m, "m4"); got != 0 {
		t.Fatalf("after its dead letter: delivered at count %d, want not at all", got)
	}
}

// gatedDeadLetters is a DeadLetterWriter whose writes succeed once release is
// closed; entered is closed when the first one starts.
type gatedDeadLetters struct {
	entered, release chan struct{}
	once             sync.Once
}

func (w *gatedDeadLetters) Produce(ctx context.Context, _ string, _ int32, _ []DeadLetterRecord) error {
	w.once.Do(func() { close(w.entered) })
	select {
	case <-w.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *gatedDeadLetters) CreateTopic(context.Context, string) error { return nil }

// TestDeadLetterCountedAcrossUnload: a dead-letter write that succeeds after
// its share partition was unloaded (its offsets deleted or reset meanwhile)
// is counted as written. It used to be counted only when the state it was
// written from was still loaded: a rejected record in the dead-letter topic
// that the group's counts never showed.
func TestDeadLetterCountedAcrossUnload(t *testing.T) {
	dlq := &gatedDeadLetters{entered: make(chan struct{}), release: make(chan struct{})}
	m, _ := newDeadLetterManager(t, &memStore{}, dlq, 1, false)
	defer m.Close()
	if o := fetchOne(t, m, "m"); o != 0 {
		t.Fatalf("acquired offset %d, want 0", o)
	}
	if code := acknowledgeAs(m, "m", 0, Reject); code != 0 {
		t.Fatalf("reject: code %d", code)
	}
	<-dlq.entered
	m.Unload(Key{Group: "g", TopicID: gcTopicID, Partition: 0})
	close(dlq.release)
	wait.Within(t, 5*time.Second, "the write to be counted", func() bool { return m.DeadLetterStats()["g"].Written == 1 })
}

// header is the value of a dead-letter record's header key ("" if none).
func header(r DeadLetterRecord, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
