package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// newTestPartition opens a partition replica of broker localID on a fresh log.
func newTestPartition(t *testing.T, localID int32) *Partition {
	t.Helper()
	l, err := storage.Open(vfs.Default, t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{}, 0, l, false, localID, producerExpiry{})
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
	if err := p.appendFromLeader(0, p.LogEndOffset(), batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 8)}), 8); err != nil {
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
		off, _, _, _, err := p.ListOffset(context.Background(), tc.ts, ReadUncommitted)
		if !errors.Is(err, tc.wantErr) || (err == nil && off != tc.want) {
			t.Fatalf("ListOffset(%d) before the follower fetched: %d, %v; want %d, %v", tc.ts, off, err, tc.want, tc.wantErr)
		}
	}

	// Follower 1 fetches at the new leader's log end: the HWM reaches it.
	ff, err := p.ReadForFollower(followerFetch(1, 10, 0), now)
	if err != nil {
		t.Fatal(err)
	}
	if ff.HighWatermark != 10 {
		t.Fatalf("HWM after the follower caught up: %d, want 10", ff.HighWatermark)
	}
	off, _, _, found, err := p.ListOffset(context.Background(), LatestTimestamp, ReadUncommitted)
	if err != nil || !found || off != 10 {
		t.Fatalf("ListOffset(latest) = %d, %v, %v; want 10, true, nil", off, found, err)
	}
}

// TestAnswerFromAnotherLogEndChangesNothing: an answer to a fetch sent from a
// log end that is no longer this replica's (an answer of the previous leader
// epoch truncated the log while the fetch was in flight) must not touch the
// log. FuzzReplication found the old code appending such an answer's batch at
// offset 4 to a log truncated to 0: the log kept a hole where offsets 0-3 had
// been, the follower's next fetch reported offset 5, and the leader took it
// into the ISR as holding records it never had.
func TestAnswerFromAnotherLogEndChangesNothing(t *testing.T) {
	p := newTestPartition(t, 2)
	now := time.Now()
	p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1}, now)
	if err := p.appendFromLeader(1, 0, batchtest.Build(batchtest.Options{LeaderEpoch: 1, Records: batchtest.Values(4, 8)}), 0); err != nil {
		t.Fatal(err)
	}
	// A fetch from offset 4 goes to the next leader; meanwhile the log is cut
	// back to 0, at the same epoch.
	p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 2}, now)
	if err := p.truncateTo(2, 4, 0); err != nil {
		t.Fatal(err)
	}
	// The answers to that fetch: records, a divergence, out of range.
	if err := p.appendFromLeader(2, 4, batchtest.Build(batchtest.Options{BaseOffset: 4, LeaderEpoch: 2}), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := p.applyDiverging(2, 4, Diverging{Epoch: 2, EndOffset: 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.applyOutOfRange(2, 4, 100, 100); err != nil {
		t.Fatal(err)
	}
	if start, end, hwm := p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(); start != 0 || end != 0 || hwm != 0 {
		t.Fatalf("log [%d, %d), HWM %d after answers to a fetch from offset 4; want [0, 0), 0", start, end, hwm)
	}
	// The next fetch, from the log end, is applied.
	if off, _ := p.fetchPosition(); off != 0 {
		t.Fatalf("fetch position %d, want 0", off)
	}
	if err := p.appendFromLeader(2, 0, batchtest.Build(batchtest.Options{LeaderEpoch: 1, Records: batchtest.Values(5, 8)}), 5); err != nil {
		t.Fatal(err)
	}
	if end, hwm := p.LogEndOffset(), p.HighWatermark(); end != 5 || hwm != 5 {
		t.Fatalf("log end %d, HWM %d after the answer from the log end; want 5, 5", end, hwm)
	}
}

// TestStaleFetchAnswerChangesNothing: a fetch answer that arrives after this
// replica became leader (or followed a newer leader) must not touch its log: a
// DivergingEpoch at the log end would drop the epoch it has just started there.
func TestStaleFetchAnswerChangesNothing(t *testing.T) {
	p := newTestPartition(t, 2)
	now := time.Now()
	p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}, now)
	if err := p.appendFromLeader(1, p.LogEndOffset(), batchtest.Build(batchtest.Options{LeaderEpoch: 1, Records: batchtest.Values(4, 8)}), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 2}, now); err != nil {
		t.Fatal(err)
	}
	// Answers to requests sent at epoch 1.
	if err := p.truncateTo(1, p.LogEndOffset(), 4); err != nil {
		t.Fatal(err)
	}
	if err := p.truncateTo(1, p.LogEndOffset(), 2); err != nil {
		t.Fatal(err)
	}
	if err := p.restartAt(1, p.LogEndOffset(), restartState{start: 100}); err != nil {
		t.Fatal(err)
	}
	if err := p.appendFromLeader(1, p.LogEndOffset(), batchtest.Build(batchtest.Options{BaseOffset: 4, LeaderEpoch: 1}), 5); err != nil {
		t.Fatal(err)
	}
	if got := p.log.LatestEpoch(); got != 2 {
		t.Errorf("latest epoch %d after stale answers, want the leader's own 2", got)
	}
	if got := p.LogEndOffset(); got != 4 {
		t.Errorf("log end %d after stale answers, want 4", got)
	}
}

// followerFetch is broker id's fetch at offset, the epoch of its last batch
// lastFetchedEpoch, checking no leader epoch.
func followerFetch(id int32, offset int64, lastFetchedEpoch int32) FollowerFetchRequest {
	return FollowerFetchRequest{ReplicaID: id, BrokerEpoch: -1, LeaderEpoch: -1, FetchOffset: offset, LastFetchedEpoch: lastFetchedEpoch, MaxBytes: 1 << 20}
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
	if _, err := p.ReadForFollower(followerFetch(4, 0, -1), now); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by broker 4 before it is added: %v, want ErrNotReplica", err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{4, 2, 3, 1}, Adding: []int32{4}, Removing: []int32{3},
		ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(followerFetch(4, 0, -1), now); err != nil {
		t.Fatalf("fetch by the adding broker 4: %v", err)
	}
	p.isrChangeDone(isrChange{p: p, isr: []int32{1, 2, 3, 4}, partitionEpoch: 1}, &metadata.Partition{ISR: []int32{1, 2, 3, 4}, Leader: 1, PartitionEpoch: 2}, false, time.Now())
	if _, err := p.ReadForFollower(followerFetch(3, 0, -1), now); err != nil {
		t.Fatalf("fetch by broker 3 after an answer without replicas: %v", err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{4, 2, 1}, ISR: []int32{1, 2, 4}, Leader: 1, PartitionEpoch: 3}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(followerFetch(3, 0, -1), now); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by the removed broker 3: %v, want ErrNotReplica", err)
	}
}

// TestExpansionOutcomeHoldsHighWatermark: the follower an expansion adds holds
// the leader's high-water mark until the controller's answer resolves the
// proposal. A failure without a refusal leaves it counted (the change may have
// been committed) and the ISR maintenance proposes it again; a refusal
// (INELIGIBLE_REPLICA, from the local controller or over the link) lets the
// high-water mark move on without it.
func TestExpansionOutcomeHoldsHighWatermark(t *testing.T) {
	p := newTestPartition(t, 1)
	p.setConfig(new(metadata.DefaultTopicConfig()))
	now := time.Now()
	var proposed []isrChange
	p.isrProposer = func(c isrChange) { proposed = append(proposed, c) }
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}, now); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(id int32, offset int64) {
		t.Helper()
		ff, err := p.ReadForFollower(followerFetch(id, offset, -1), now)
		if err != nil {
			t.Fatal(err)
		}
		ff.Chunk.Release()
	}
	fetch(2, 5)
	fetch(3, 5) // caught up with the HWM: proposed
	if len(proposed) != 1 || !slices.Equal(proposed[0].isr, []int32{1, 2, 3}) {
		t.Fatalf("proposals %v, want one adding 3", proposed)
	}
	fetch(2, 10)
	if hwm := p.HighWatermark(); hwm != 5 {
		t.Fatalf("HWM %d while 3's expansion is in flight, want 5 (what 3 holds)", hwm)
	}

	p.isrChangeDone(proposed[0], nil, refusedUnapplied(errors.New("i/o timeout")), now)
	if hwm := p.HighWatermark(); hwm != 5 {
		t.Fatalf("HWM %d after an expansion of unknown outcome, want 5", hwm)
	}
	p.retryExpansion()
	if len(proposed) != 2 || !slices.Equal(proposed[1].isr, []int32{1, 2, 3}) {
		t.Fatalf("proposals %v, want the expansion proposed again", proposed)
	}

	for _, err := range []error{
		fmt.Errorf("%w: broker 3 is fenced", metadata.ErrIneligibleReplica),
		kerr.IneligibleReplica,
		kerr.OperationNotAttempted,
	} {
		if !refusedUnapplied(err) {
			t.Errorf("refusedUnapplied(%v) = false", err)
		}
	}
	for _, err := range []error{metadata.ErrStalePartitionEpoch, metadata.ErrFencedLeaderEpoch, kerr.NotController, context.DeadlineExceeded} {
		if refusedUnapplied(err) {
			t.Errorf("refusedUnapplied(%v) = true: the change may have been applied", err)
		}
	}
	p.isrChangeDone(proposed[1], nil, refusedUnapplied(kerr.IneligibleReplica), now)
	if hwm := p.HighWatermark(); hwm != 10 {
		t.Fatalf("HWM %d after the controller refused 3, want 10", hwm)
	}
	p.retryExpansion()
	if len(proposed) != 2 {
		t.Fatalf("a refused expansion was proposed again: %v", proposed[2:])
	}
}

// TestStaleISRAnswerLeavesNewerProposalPending: the answer to an ISR change
// proposed under an earlier leader epoch arrives after this broker led again at
// the next one and proposed there; it neither applies nor ends the newer
// proposal's wait, so no second proposal goes out while that one is in flight.
func TestStaleISRAnswerLeavesNewerProposalPending(t *testing.T) {
	p := newTestPartition(t, 1)
	p.setConfig(new(metadata.DefaultTopicConfig()))
	now := time.Now()
	var proposed []isrChange
	p.isrProposer = func(c isrChange) { proposed = append(proposed, c) }
	lead := func(epoch int32) {
		t.Helper()
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch}, now); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(id int32, epoch int32) {
		t.Helper()
		req := followerFetch(id, 10, epoch)
		req.LeaderEpoch = epoch
		ff, err := p.ReadForFollower(req, now)
		if err != nil {
			t.Fatal(err)
		}
		ff.Chunk.Release()
	}
	lead(0)
	for range 10 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
			t.Fatal(err)
		}
	}
	fetch(2, 0)
	fetch(3, 0)
	lead(1)
	fetch(2, 1)
	fetch(3, 1)
	if len(proposed) != 2 || proposed[0].leaderEpoch != 0 || proposed[1].leaderEpoch != 1 {
		t.Fatalf("proposals %+v, want one adding 3 at each leader epoch", proposed)
	}
	p.isrChangeDone(proposed[0], &metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1}, false, now)
	if isr := p.ISR(); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after the stale answer, want [1 2]", isr)
	}
	p.retryExpansion()
	fetch(3, 1)
	if len(proposed) != 2 {
		t.Fatalf("proposed again while the epoch-1 change was in flight: %+v", proposed[2:])
	}
	p.isrChangeDone(proposed[1], &metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2}, false, now)
	if isr := p.ISR(); !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("ISR %v after the current answer, want [1 2 3]", isr)
	}
}

// TestLeaderRefusals: the error paths of a leader's writes and lookups, each
// with the sentinel its Kafka error code comes from: a keyless record on a
// compacted topic, a batch over max.message.bytes (a client's and a
// coordinator's), several idempotent batches in one request, no batch at all,
// DeleteRecords past the high-water mark or below zero; and, once the replica
// follows, every leader-only call refused with ErrNotLeader.
func TestLeaderRefusals(t *testing.T) {
	p := newTestPartition(t, 1)
	now := time.Now()
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, now); err != nil {
		t.Fatal(err)
	}
	cfg := metadata.DefaultTopicConfig()
	cfg.CleanupPolicy = metadata.CleanupCompact
	cfg.MaxMessageBytes = 1000
	cfg.MaxDecompressedMessageBytes = 800
	p.setConfig(&cfg)
	keyed := batchtest.Build(batchtest.Options{Records: []batchtest.Record{{Key: []byte("k"), Value: []byte("v")}}})
	if _, err := p.Append(keyed, 1); err != nil {
		t.Fatal(err)
	}
	idem := func(seq int32) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, BaseSequence: seq, Records: []batchtest.Record{{Key: []byte("k")}}})
	}
	big := batchtest.Build(batchtest.Options{Records: []batchtest.Record{{Key: []byte("k"), Value: make([]byte, 2000)}}})
	// 900 zero bytes compress far below max.message.bytes; the record is
	// above max.decompressed.message.bytes once decompressed.
	decompressedBig := batchtest.Build(batchtest.Options{Codec: 1, Records: []batchtest.Record{{Key: []byte("k"), Value: make([]byte, 900)}}})
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"keyless record, compacted topic", func() error { _, err := p.Append(batchtest.Build(batchtest.Options{}), 1); return err }, ErrInvalidRecord},
		{"over max.message.bytes", func() error { _, err := p.Append(big, 1); return err }, ErrRecordTooLarge},
		{"coordinator batch over max.message.bytes", func() error { _, err := p.AppendAsCoordinator(big, AppendOpts{}); return err }, ErrRecordTooLarge},
		{"record over max.decompressed.message.bytes", func() error { _, err := p.Append(decompressedBig, 1); return err }, batch.ErrInvalid},
		{"two idempotent batches", func() error { _, err := p.Append(append(idem(0), idem(1)...), 1); return err }, ErrInvalidRecord},
		{"no batch", func() error { _, err := p.Append(nil, 1); return err }, batch.ErrInvalid},
		{"DeleteRecords past the HWM", func() error { _, err := p.DeleteRecords(p.HighWatermark() + 1); return err }, storage.ErrOffsetOutOfRange},
		{"DeleteRecords below zero", func() error { _, err := p.DeleteRecords(-2); return err }, storage.ErrOffsetOutOfRange},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := p.LogEndOffset(); got != 1 {
		t.Fatalf("log end %d after the refusals, want 1 (nothing written)", got)
	}
	if start, err := p.DeleteRecords(-1); err != nil || start != 1 {
		t.Fatalf("DeleteRecords(-1) = %d, %v; want the HWM 1", start, err)
	}

	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Append", func() error { _, err := p.Append(keyed, 1); return err }},
		{"DeleteRecords", func() error { _, err := p.DeleteRecords(-1); return err }},
		{"ListOffset", func() error {
			_, _, _, _, err := p.ListOffset(context.Background(), LatestTimestamp, ReadUncommitted)
			return err
		}},
		{"EndOffsetForEpoch", func() error { _, _, err := p.EndOffsetForEpoch(0); return err }},
		{"ReadForFollower", func() error {
			_, err := p.ReadForFollower(followerFetch(2, 0, -1), now)
			return err
		}},
	} {
		if err := tc.call(); !errors.Is(err, ErrNotLeader) {
			t.Errorf("%s on a follower: %v, want ErrNotLeader", tc.name, err)
		}
	}
}

// TestListOffsetRecordLimit: a lookup by timestamp, or for the max timestamp,
// that reaches a record of a compressed batch above the topic's
// max.decompressed.message.bytes is INVALID_RECORD (batch.ErrInvalid), as
// Kafka's ReplicaManager.fetchOffset answers the InvalidRecordException of its
// streaming record iterator; the record is found once the limit is raised.
// Every cleaning pass is given the same limit.
func TestListOffsetRecordLimit(t *testing.T) {
	p := newTestPartition(t, 1)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := metadata.DefaultTopicConfig()
	p.setConfig(&cfg)
	large := batchtest.Build(batchtest.Options{Codec: 1, FirstTimestamp: 1000, Records: []batchtest.Record{{Value: make([]byte, 900)}}})
	if _, err := p.Append(large, 1); err != nil {
		t.Fatal(err)
	}
	limited := cfg
	limited.MaxDecompressedMessageBytes = 800
	for _, tc := range []struct {
		cfg     *metadata.TopicConfig
		wantErr error
	}{
		{&limited, batch.ErrInvalid},
		{&cfg, nil},
	} {
		p.setConfig(tc.cfg)
		for _, ts := range []int64{1000, MaxTimestamp} {
			off, _, _, found, err := p.ListOffset(context.Background(), ts, ReadUncommitted)
			if !errors.Is(err, tc.wantErr) || (err == nil && (!found || off != 0)) {
				t.Errorf("max.decompressed.message.bytes %d: ListOffset(%d) = %d, %v, %v; want offset 0 or %v", tc.cfg.MaxDecompressedMessageBytes, ts, off, found, err, tc.wantErr)
			}
		}
	}
	if got := compactOptions(limited).MaxRecordBytes; got != 800 {
		t.Errorf("a pass is given MaxRecordBytes %d, want the topic's 800", got)
	}
}

// TestAppendRacingBecomeFollower: an append that found this broker leading
// must land under that leadership's epoch even when the broker becomes a
// follower while it is under way. Stamped with the new leader's epoch instead,
// the batch hides from the follower's divergence check (its last epoch is the
// leader's own), is never truncated, and the replica keeps bytes the leader
// never wrote below the high-water mark (a replica-divergence anomaly of the
// fault-injection suite, docs/reliability.md).
func TestAppendRacingBecomeFollower(t *testing.T) {
	rec := batchtest.Build(batchtest.Options{Records: []batchtest.Record{{Key: []byte("k"), Value: []byte("v")}}})
	for round := range 30 {
		p := newTestPartition(t, 1)
		cfg := metadata.DefaultTopicConfig()
		p.setConfig(&cfg)
		now := time.Now()
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1}, now); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					if _, err := p.Append(slices.Clone(rec), 1); err != nil {
						return
					}
				}
			})
		}
		wait.For(t, "appends under way", func() bool { return p.LogEndOffset() >= 20 })
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 2}, now); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		bs, err := logBatches(p, p.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if h, _ := batch.ParseHeader(b); h.PartitionLeaderEpoch != 1 {
				t.Fatalf("round %d: batch at %d stamped with leader epoch %d; this broker led only at 1 and has fetched nothing",
					round, h.BaseOffset, h.PartitionLeaderEpoch)
			}
		}
	}
}
