package share

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// blockingStore is a Store in memory whose saves after the first block free
// saves until their context ends (the state partition lost its leader).
type blockingStore struct {
	free    int
	blocked chan struct{} // closed when a save starts blocking

	mu   sync.Mutex
	snap *Snapshot
	once sync.Once
}

func (s *blockingStore) Initialize(_ context.Context, _ Key, stateEpoch int32, start int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		s.snap = &Snapshot{StateEpoch: stateEpoch, Start: start}
	}
	return nil
}

func (s *blockingStore) Load(context.Context, Key, int32) (Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return Snapshot{}, false, nil
	}
	return *s.snap, true, nil
}

func (s *blockingStore) Save(ctx context.Context, _ Key, snap Snapshot) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.snap = &snap
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	s.once.Do(func() { close(s.blocked) })
	<-ctx.Done()
	return ctx.Err()
}

// stuckDeadLetters is a DeadLetterWriter whose writes fail at once (fail) or
// block until their context ends (the dead-letter topic has no leader).
type stuckDeadLetters struct {
	fail    bool
	entered chan struct{}
	once    sync.Once
}

func (w *stuckDeadLetters) Produce(ctx context.Context, _ string, _ int32, _ []DeadLetterRecord) error {
	w.once.Do(func() { close(w.entered) })
	if w.fail {
		return errors.New("NOT_LEADER_OR_FOLLOWER")
	}
	<-ctx.Done()
	return ctx.Err()
}

func (w *stuckDeadLetters) CreateTopic(context.Context, string) error { return nil }

// newDeadLetterManager is a share Manager leading partition 0 of "t" with
// records one-record batches, for group "g" whose dead-letter topic is dlq.t
// (which exists), copying records if copyRecord.
func newDeadLetterManager(t *testing.T, store Store, dlq DeadLetterWriter, records int, copyRecord bool) (*Manager, *replica.Partition) {
	t.Helper()
	dlqID := metadata.UUID{8}
	parts, rp := newTestParts(t, 1,
		&metadata.TopicRecord{Name: "dlq.t", ID: dlqID},
		&metadata.PartitionRecord{TopicID: dlqID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "dlq.t", Key: metadata.TopicDeadLetterGroupEnable, Value: "true"})
	appendRecords(t, rp, records)
	cfg := testGroupConfig()
	cfg.DeadLetter.Topic, cfg.DeadLetter.CopyRecord = "dlq.t", copyRecord
	return NewManager(Config{Defaults: cfg, DeadLetters: dlq}, store, parts, nil), rp
}

// TestCloseWhileDeadLetterWriteBlocked: Close returns promptly while the
// background dead-letter work of a rejected record is stuck, whether in the
// dead-letter write itself (its topic has no leader) or in the state save after a
// failed write (the state partition has no leader). The save used to run under a
// context Close did not cancel, holding Close for the store's 15 s timeout.
func TestCloseWhileDeadLetterWriteBlocked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failWrite bool // the dead-letter write fails and the save after it blocks
	}{
		{"write blocked", false},
		{"save after a failed write blocked", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Two free saves: the acquisition and the rejection.
			store := &blockingStore{free: 2, blocked: make(chan struct{})}
			dlq := &stuckDeadLetters{fail: tc.failWrite, entered: make(chan struct{})}
			m, _ := newDeadLetterManager(t, store, dlq, 1, false)
			o := fetchOne(t, m, "m")
			if code := acknowledgeAs(m, "m", o, Reject); code != 0 {
				t.Fatalf("reject: code %d", code)
			}
			stuck := dlq.entered
			if tc.failWrite {
				stuck = store.blocked
			}
			select {
			case <-stuck:
			case <-time.After(30 * time.Second):
				t.Fatal("the background dead-letter work never got stuck")
			}
			done := make(chan struct{})
			start := time.Now()
			go func() { m.Close(); close(done) }()
			// Close cancels the work and waits for it to stop: well within its own
			// bound (closeTimeout, after which it gives up waiting), and the
			// store's 15 s timeout that used to hold it.
			select {
			case <-done:
			case <-time.After(storeTimeout + 5*time.Second):
				t.Fatalf("Close still waiting after %v", time.Since(start))
			}
			if took := time.Since(start); took >= closeTimeout {
				t.Fatalf("Close took %v: the background work did not stop when cancelled", took)
			}
		})
	}
}
