package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// newTestPartition opens a partition replica of broker localID on a fresh log.
func newTestPartition(t *testing.T, localID int32) *Partition {
	t.Helper()
	l, err := storage.Open(vfs.Default, t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{}, 0, l, false, localID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// TestListOffsetWaitsForNewLeaderHighWatermark: a follower that becomes leader
// knows only the HWM its old leader last sent it, which may lag what that leader
// served. Until its followers fetch and its HWM reaches the start of its epoch,
// ListOffsets must answer OFFSET_NOT_AVAILABLE rather than a "latest" offset
// lower than one a client may already have seen.
func TestListOffsetWaitsForNewLeaderHighWatermark(t *testing.T) {
	p := newTestPartition(t, 2)
	now := time.Now()
	p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}, now)
	// Ten records from leader 1, which had committed only eight when it answered.
	if err := p.appendFromLeader(batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 8)}), 8); err != nil {
		t.Fatal(err)
	}

	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if got := p.HighWatermark(); got != 8 {
		t.Fatalf("new leader's HWM %d, want the inherited 8", got)
	}
	for _, ts := range []int64{LatestTimestamp, EarliestTimestamp, MaxTimestamp, 0} {
		if _, _, _, err := p.ListOffset(ts); !errors.Is(err, ErrOffsetNotAvailable) {
			t.Fatalf("ListOffset(%d) before the follower fetched: %v, want ErrOffsetNotAvailable", ts, err)
		}
	}

	// Follower 1 fetches at the new leader's log end: the HWM reaches it.
	ff, err := p.ReadForFollower(1, 10, 0, 1<<20, now)
	if err != nil {
		t.Fatal(err)
	}
	if ff.HighWatermark != 10 {
		t.Fatalf("HWM after the follower caught up: %d, want 10", ff.HighWatermark)
	}
	off, _, found, err := p.ListOffset(LatestTimestamp)
	if err != nil || !found || off != 10 {
		t.Fatalf("ListOffset(latest) = %d, %v, %v; want 10, true, nil", off, found, err)
	}
}
