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
	if err := p.appendFromLeader(0, batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 8)}), 8); err != nil {
		t.Fatal(err)
	}

	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if got := p.HighWatermark(); got != 8 {
		t.Fatalf("new leader's HWM %d, want the inherited 8", got)
	}
	// Latest, and lookups that find nothing below the HWM, must wait; the log
	// start and records below the HWM are known.
	for _, tc := range []struct {
		ts      int64
		wantErr error
		want    int64
	}{
		{LatestTimestamp, ErrOffsetNotAvailable, 0},
		{MaxTimestamp, ErrOffsetNotAvailable, 0}, // offset 9, above the HWM
		{9, ErrOffsetNotAvailable, 0},            // offset 9
		{EarliestTimestamp, nil, 0},
		{3, nil, 3},
	} {
		off, _, _, err := p.ListOffset(tc.ts, ReadUncommitted)
		if !errors.Is(err, tc.wantErr) || (err == nil && off != tc.want) {
			t.Fatalf("ListOffset(%d) before the follower fetched: %d, %v; want %d, %v", tc.ts, off, err, tc.want, tc.wantErr)
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
	off, _, found, err := p.ListOffset(LatestTimestamp, ReadUncommitted)
	if err != nil || !found || off != 10 {
		t.Fatalf("ListOffset(latest) = %d, %v, %v; want 10, true, nil", off, found, err)
	}
}

// TestStaleFetchAnswerChangesNothing: a fetch answer that arrives after this
// replica became leader (or followed a newer leader) must not touch its log: a
// DivergingEpoch at the log end would drop the epoch it has just started there.
func TestStaleFetchAnswerChangesNothing(t *testing.T) {
	p := newTestPartition(t, 2)
	now := time.Now()
	p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}, now)
	if err := p.appendFromLeader(1, batchtest.Build(batchtest.Options{LeaderEpoch: 1, Records: batchtest.Values(4, 8)}), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 2}, now); err != nil {
		t.Fatal(err)
	}
	// Answers to requests sent at epoch 1.
	if err := p.truncateTo(1, 4); err != nil {
		t.Fatal(err)
	}
	if err := p.truncateTo(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.restartAt(1, 100); err != nil {
		t.Fatal(err)
	}
	if err := p.appendFromLeader(1, batchtest.Build(batchtest.Options{BaseOffset: 4, LeaderEpoch: 1}), 5); err != nil {
		t.Fatal(err)
	}
	if got := p.log.LatestEpoch(); got != 2 {
		t.Errorf("latest epoch %d after stale answers, want the leader's own 2", got)
	}
	if got := p.LogEndOffset(); got != 4 {
		t.Errorf("log end %d after stale answers, want 4", got)
	}
}

// TestReassignedReplicaSet: while leadership stays, a replica a reassignment
// adds is served as a follower, one it removes no longer; an AlterPartition
// answer without a replica set (from another node) keeps the followers.
func TestReassignedReplicaSet(t *testing.T) {
	p := newTestPartition(t, 1)
	now := time.Now()
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(4, 0, -1, 1<<20, now); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by broker 4 before it is added: %v, want ErrNotReplica", err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{4, 2, 3, 1}, Adding: []int32{4}, Removing: []int32{3},
		ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(4, 0, -1, 1<<20, now); err != nil {
		t.Fatalf("fetch by the adding broker 4: %v", err)
	}
	p.isrChangeDone(&metadata.Partition{ISR: []int32{1, 2, 3, 4}, Leader: 1, PartitionEpoch: 2}, time.Now())
	if _, err := p.ReadForFollower(3, 0, -1, 1<<20, now); err != nil {
		t.Fatalf("fetch by broker 3 after an answer without replicas: %v", err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{4, 2, 1}, ISR: []int32{1, 2, 4}, Leader: 1, PartitionEpoch: 3}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(3, 0, -1, 1<<20, now); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by the removed broker 3: %v, want ErrNotReplica", err)
	}
}
