package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestTxnStateScript drives the pure transaction state through interleaved
// producers and checks the last stable offset and the aborted ranges after each step.
func TestTxnStateScript(t *testing.T) {
	type step struct {
		pid     int64
		base    int64
		last    int64
		txn     bool
		marker  batch.ControlType // -1: data batch
		wantLSO int64             // with the HWM at last+1
	}
	steps := []step{
		{pid: 1, base: 0, last: 1, marker: -1, wantLSO: 2},                 // plain idempotent
		{pid: 2, base: 2, last: 4, txn: true, marker: -1, wantLSO: 2},      // 2 opens at 2
		{pid: 3, base: 5, last: 5, txn: true, marker: -1, wantLSO: 2},      // 3 opens at 5
		{pid: 2, base: 6, last: 6, txn: true, marker: -1, wantLSO: 2},      // 2 still open from 2
		{pid: 2, base: 7, last: 7, marker: batch.ControlAbort, wantLSO: 5}, // 2 aborted [2,7]
		{pid: 9, base: 8, last: 8, marker: batch.ControlCommit, wantLSO: 5},
		{pid: 3, base: 9, last: 9, marker: batch.ControlCommit, wantLSO: 10},
		{pid: 2, base: 10, last: 10, txn: true, marker: -1, wantLSO: 10},
		{pid: 2, base: 11, last: 11, marker: batch.ControlAbort, wantLSO: 12}, // aborted [10,11]
	}
	s := newTxnState()
	var aborts []storage.AbortEntry
	for i, st := range steps {
		h := batch.Header{BaseOffset: st.base, LastOffsetDelta: int32(st.last - st.base), ProducerID: st.pid}
		if st.txn || st.marker >= 0 {
			h.Attributes |= 0x10
		}
		if st.marker >= 0 {
			h.Attributes |= 0x20
		}
		if e, aborted := s.aborts(h, st.marker); aborted {
			aborts = append(aborts, e)
		}
		s.observe(h, st.marker)
		if got := s.lastStable(st.last + 1); got != st.wantLSO {
			t.Fatalf("step %d: LSO %d, want %d", i, got, st.wantLSO)
		}
	}
	// Each abort's index entry: the last stable offset is that of the oldest
	// transaction still open (3's at 5), else just past the marker.
	want := []storage.AbortEntry{
		{AbortedTxn: AbortedTxn{ProducerID: 2, FirstOffset: 2, LastOffset: 7}, LastStableOffset: 5},
		{AbortedTxn: AbortedTxn{ProducerID: 2, FirstOffset: 10, LastOffset: 11}, LastStableOffset: 12},
	}
	if !slices.Equal(aborts, want) {
		t.Errorf("aborts %v, want %v", aborts, want)
	}
}

// TestTxnStateHoldsUnreplicatedMarkers: an ended transaction holds the last
// stable offset at its first offset until the high-water mark passes its
// marker (Kafka's unreplicated transactions), whatever its outcome.
func TestTxnStateHoldsUnreplicatedMarkers(t *testing.T) {
	s := newTxnState()
	observe := func(pid, offset int64, marker batch.ControlType) {
		h := batch.Header{BaseOffset: offset, ProducerID: pid, Attributes: 0x10}
		if marker >= 0 {
			h.Attributes |= 0x20
		}
		s.observe(h, marker)
	}
	observe(1, 0, -1)                  // 1 opens at 0
	observe(2, 1, -1)                  // 2 opens at 1
	observe(1, 2, batch.ControlCommit) // 1 ends at 2
	observe(2, 3, batch.ControlAbort)  // 2 ends at 3
	observe(3, 4, -1)                  // 3 opens at 4
	for _, tc := range []struct{ hwm, want int64 }{
		{0, 0},
		{2, 0}, // 1's marker at 2 not below the HWM
		{3, 1}, // 1's marker replicated; 2's at 3 is not
		{4, 4}, // both markers replicated, 3 open at 4
		{5, 4},
	} {
		if got := s.lastStable(tc.hwm); got != tc.want {
			t.Fatalf("HWM %d: LSO %d, want %d", tc.hwm, got, tc.want)
		}
	}
	if len(s.unreplicated) != 0 {
		t.Fatalf("ended transactions the HWM passed are kept: %v", s.unreplicated)
	}
	observe(3, 5, batch.ControlCommit)
	if got := s.lastStable(5); got != 4 {
		t.Fatalf("LSO %d with 3's marker at the HWM, want 4", got)
	}
	if got := s.lastStable(6); got != 6 {
		t.Fatalf("LSO %d with every marker replicated, want the HWM 6", got)
	}
}

// TestMarkerHoldsLSOUntilReplicated: on a leader with a follower, a
// transaction's records stay above the last stable offset until the follower
// holds its marker, so a read_committed reader cannot read them while the
// marker could still be lost with the leader; the follower, which would be
// the next leader, reports the same LSO (it does not step back).
func TestMarkerHoldsLSOUntilReplicated(t *testing.T) {
	p := newTestPartition(t, 1)
	p.setConfig(new(metadata.DefaultTopicConfig()))
	now := time.Now()
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}, now); err != nil {
		t.Fatal(err)
	}
	follower := newTestPartition(t, 2)
	follower.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}, now)
	// replicate has the follower fetch from its log end, appending what it
	// gets, and then fetch once more at the new end (which moves the leader's
	// HWM there).
	replicate := func() {
		t.Helper()
		ff, err := p.ReadForFollower(followerFetch(2, follower.LogEndOffset(), 0), now)
		if err != nil {
			t.Fatal(err)
		}
		if ff.Chunk.Size > 0 {
			data, err := ff.Chunk.Bytes()
			ff.Chunk.Release()
			if err != nil {
				t.Fatal(err)
			}
			if err := follower.appendFromLeader(0, follower.LogEndOffset(), data, ff.HighWatermark); err != nil {
				t.Fatal(err)
			}
		}
		ff, err = p.ReadForFollower(followerFetch(2, follower.LogEndOffset(), 0), now)
		if err != nil {
			t.Fatal(err)
		}
		ff.Chunk.Release()
		follower.followHighWatermark(ff.HighWatermark)
	}

	mustAppend(t, p, txnBatch(t, 7, 0, 2, true)) // 0-1
	replicate()
	if hwm, lso := p.HighWatermark(), p.LastStableOffset(); hwm != 2 || lso != 0 {
		t.Fatalf("open transaction: HWM %d LSO %d, want 2 and 0", hwm, lso)
	}
	mustMarker(t, p, 7, true) // 2, not yet on the follower
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d with the commit marker above the HWM, want 0", lso)
	}
	if bases, _, lso := readAll(t, p, 0, ReadCommitted); bases != nil || lso != 0 {
		t.Fatalf("read_committed read %v (LSO %d) before the marker was replicated", bases, lso)
	}
	if lso := follower.LastStableOffset(); lso != 0 {
		t.Fatalf("follower LSO %d, want 0", lso)
	}
	replicate()
	if hwm, lso := p.HighWatermark(), p.LastStableOffset(); hwm != 3 || lso != 3 {
		t.Fatalf("marker replicated: HWM %d LSO %d, want 3 and 3", hwm, lso)
	}
	if bases, _, _ := readAll(t, p, 0, ReadCommitted); !slices.Equal(bases, []int64{0, 2}) {
		t.Fatalf("read_committed after the marker was replicated: %v", bases)
	}
	if lso := follower.LastStableOffset(); lso != 3 {
		t.Fatalf("follower LSO %d, want 3", lso)
	}
}

// newLeaderPartition opens a single-replica partition led by this broker on dir.
func newLeaderPartition(t *testing.T, dir string) *Partition {
	t.Helper()
	l, err := storage.Open(vfs.Default, dir, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{}, 0, l, false, 1, producerExpiry{})
	if err != nil {
		t.Fatal(err)
	}
	p.setConfig(new(metadata.DefaultTopicConfig()))
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return p
}

// txnBatch builds a batch of n records of producer pid at sequence seq.
func txnBatch(t *testing.T, pid int64, seq int32, n int, transactional bool) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Value: fmt.Appendf(nil, "p%d-%d", pid, int(seq)+i)}
	}
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, BaseSequence: seq, Transactional: transactional}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAppend(t *testing.T, p *Partition, b []byte) AppendResult {
	t.Helper()
	res, err := p.Append(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustMarker(t *testing.T, p *Partition, pid int64, commit bool) {
	t.Helper()
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, Commit: commit}, 0); err != nil {
		t.Fatal(err)
	}
}

// readAll reads from offset up to the isolation level's limit and returns the
// batches' base offsets and the aborted transactions reported.
func readAll(t *testing.T, p *Partition, from int64, iso Isolation) (bases []int64, aborted []AbortedTxn, lso int64) {
	t.Helper()
	res, err := p.Read(from, 1<<20, iso)
	if err != nil {
		t.Fatal(err)
	}
	lso = res.LastStableOffset
	aborted = res.Aborted
	if res.Chunk.Size == 0 {
		return nil, aborted, lso
	}
	b, err := res.Chunk.Bytes()
	res.Chunk.Release()
	if err != nil {
		t.Fatal(err)
	}
	for it := batch.NewStoredIter(b); it.Next(); {
		bases = append(bases, it.Header().BaseOffset)
	}
	return bases, aborted, lso
}

// TestPartitionReadCommitted: read_committed reads stop at the first open
// transaction, carry the aborted transactions of the range, and ListOffsets
// "latest" follows; a reopened log (recovery) rebuilds the same state.
func TestPartitionReadCommitted(t *testing.T) {
	dir := t.TempDir()
	p := newLeaderPartition(t, dir)

	mustAppend(t, p, txnBatch(t, 1, 0, 2, false)) // 0-1 plain idempotent
	mustAppend(t, p, txnBatch(t, 2, 0, 2, true))  // 2-3 txn of 2
	mustAppend(t, p, txnBatch(t, 1, 2, 1, false)) // 4 plain
	mustAppend(t, p, txnBatch(t, 3, 0, 1, true))  // 5 txn of 3

	if got := p.LastStableOffset(); got != 2 {
		t.Fatalf("LSO %d, want 2 (producer 2's open transaction)", got)
	}
	if got := p.OpenTransactions(); got != 2 {
		t.Fatalf("%d open transactions, want 2", got)
	}
	if bases, _, _ := readAll(t, p, 0, ReadUncommitted); !slices.Equal(bases, []int64{0, 2, 4, 5}) {
		t.Fatalf("read_uncommitted bases %v", bases)
	}
	bases, aborted, _ := readAll(t, p, 0, ReadCommitted)
	if !slices.Equal(bases, []int64{0}) || len(aborted) != 0 || aborted == nil {
		t.Fatalf("read_committed: bases %v aborted %v, want [0] and an empty (not null) list", bases, aborted)
	}
	if bases, _, _ := readAll(t, p, 3, ReadCommitted); bases != nil {
		t.Fatalf("read_committed above the LSO returned %v", bases)
	}
	if off, _, _, _, err := p.ListOffset(context.Background(), LatestTimestamp, ReadCommitted); err != nil || off != 2 {
		t.Fatalf("ListOffset(latest, read_committed) = %d, %v", off, err)
	}
	if off, _, _, _, err := p.ListOffset(context.Background(), LatestTimestamp, ReadUncommitted); err != nil || off != 6 {
		t.Fatalf("ListOffset(latest, read_uncommitted) = %d, %v", off, err)
	}

	mustMarker(t, p, 2, false) // 6: abort 2
	if got := p.LastStableOffset(); got != 5 {
		t.Fatalf("LSO %d after aborting 2, want 5 (producer 3 still open)", got)
	}
	mustMarker(t, p, 3, true) // 7: commit 3
	if got := p.LastStableOffset(); got != 8 {
		t.Fatalf("LSO %d after committing 3, want the HWM 8", got)
	}
	bases, aborted, lso := readAll(t, p, 0, ReadCommitted)
	if !slices.Equal(bases, []int64{0, 2, 4, 5, 6, 7}) || !slices.Equal(aborted, []AbortedTxn{{ProducerID: 2, FirstOffset: 2, LastOffset: 6}}) || lso != 8 {
		t.Fatalf("read_committed: bases %v aborted %v lso %d", bases, aborted, lso)
	}
	if _, aborted, _ := readAll(t, p, 7, ReadCommitted); len(aborted) != 0 {
		t.Fatalf("read from 7 reported %v, past the abort marker", aborted)
	}

	// Reopen (recovery path): the state comes back from the log alone.
	mustAppend(t, p, txnBatch(t, 2, 2, 1, true)) // 8: 2 opens again
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	p = newLeaderPartition(t, dir)
	t.Cleanup(func() { p.close() })
	bases, aborted, lso = readAll(t, p, 0, ReadCommitted)
	if !slices.Equal(bases, []int64{0, 2, 4, 5, 6, 7}) || !slices.Equal(aborted, []AbortedTxn{{ProducerID: 2, FirstOffset: 2, LastOffset: 6}}) || lso != 8 {
		t.Fatalf("after reopening: bases %v aborted %v lso %d", bases, aborted, lso)
	}
}

// TestLastStableOffsetNotBelowLogStart: records deleted below an open
// transaction's first offset (DeleteRecords) hold the last stable offset at the
// new log start, as Kafka's log clamps its first unstable offset. Found by
// FuzzReplication: the old LSO stayed at the deleted first offset, below the
// log start, so ListOffsets "latest" for read_committed answered an offset
// that a fetch then found out of range.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	mustAppend(t, p, txnBatch(t, 2, 0, 2, true))  // 0-1: producer 2's transaction
	mustAppend(t, p, txnBatch(t, 1, 0, 2, false)) // 2-3: plain
	mustAppend(t, p, txnBatch(t, 2, 2, 1, true))  // 4: the same transaction
	if _, err := p.DeleteRecords(3); err != nil {
		t.Fatal(err)
	}
	if got := p.LastStableOffset(); got != 3 {
		t.Fatalf("LSO %d with the open transaction's first records deleted below 3, want the log start 3", got)
	}
	if off, _, _, _, err := p.ListOffset(context.Background(), LatestTimestamp, ReadCommitted); err != nil || off != 3 {
		t.Fatalf("ListOffset(latest, read_committed) = %d, %v; want 3", off, err)
	}
	if bases, _, lso := readAll(t, p, 3, ReadCommitted); bases != nil || lso != 3 {
		t.Fatalf("read_committed from the log start: bases %v, LSO %d; want none, 3", bases, lso)
	}
	mustMarker(t, p, 2, true) // 5: commit
	if got := p.LastStableOffset(); got != 6 {
		t.Fatalf("LSO %d after the commit, want the HWM 6", got)
	}
}

// TestPartitionTxnBadInput: the orders Kafka refuses get their errors.
func TestPartitionTxnBadInput(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	mustAppend(t, p, txnBatch(t, 1, 0, 1, true))
	if _, err := p.Append(txnBatch(t, 1, 1, 1, false), 1); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v, want ErrInvalidTxnState", err)
	}
	noPID, err := batch.Build(batch.BuildOptions{Transactional: true}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(noPID, 1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without a producer id: %v, want ErrInvalidRecord", err)
	}
	if _, err := p.Append(batch.BuildControl(batch.Marker{ProducerID: 1, Commit: true}), 1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v, want ErrInvalidRecord", err)
	}
	// A newer epoch from the producer fences markers of the older one.
	b, _ := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: 4, ProducerEpoch: 2, Transactional: true}, []batch.Record{{Value: []byte("x")}})
	mustAppend(t, p, b)
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: 4, ProducerEpoch: 1, Commit: true}, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale marker: %v, want ErrInvalidProducerEpoch", err)
	}
	if got := p.LastStableOffset(); got != 0 {
		t.Fatalf("LSO %d, want 0", got)
	}
}

// TestMarkerEpochTransactionVersion2 (KIP-1228): a marker of transaction
// version 2 must carry an epoch above the producer's on the partition (its
// coordinator bumped the epoch before writing it); one at the producer's epoch
// is a late or repeated marker and is refused, leaving the log and the open
// transaction as they were. Older versions accept the equal epoch.
func TestMarkerEpochTransactionVersion2(t *testing.T) {
	const pid = 9
	open := func(t *testing.T, p *Partition, epoch int16, seq int32) {
		t.Helper()
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: true}, []batch.Record{{Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, p, b)
	}
	for _, tc := range []struct {
		name        string
		epoch       int16 // the marker's; the open transaction is at epoch 2
		tv          int8
		wantErr     error
		wantOpenTxn bool
	}{
		{name: "tv2 at the open epoch", epoch: 2, tv: 2, wantErr: ErrInvalidProducerEpoch, wantOpenTxn: true},
		{name: "tv2 above it", epoch: 3, tv: 2},
		{name: "tv1 at the open epoch", epoch: 2, tv: 1},
		{name: "tv0 at the open epoch", epoch: 2, tv: 0},
		{name: "tv2 below it", epoch: 1, tv: 2, wantErr: ErrInvalidProducerEpoch, wantOpenTxn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			t.Cleanup(func() { p.close() })
			open(t, p, 2, 0)
			leo := p.LogEndOffset()
			_, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: tc.epoch, Commit: true}, tc.tv)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("marker: %v, want %v", err, tc.wantErr)
			}
			if got := p.inTxn(pid); got != tc.wantOpenTxn {
				t.Fatalf("transaction open %v, want %v", got, tc.wantOpenTxn)
			}
			if tc.wantErr != nil && p.LogEndOffset() != leo {
				t.Fatalf("log end %d after a refused marker, want %d", p.LogEndOffset(), leo)
			}
		})
	}
	// A marker repeated after the first ended the transaction: refused at
	// version 2, so it cannot end the transaction opened next at its epoch.
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	open(t, p, 2, 0)
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: 3, Commit: true}, 2); err != nil {
		t.Fatal(err)
	}
	open(t, p, 3, 0)
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: 3, Commit: false}, 2); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("repeated marker: %v, want ErrInvalidProducerEpoch", err)
	}
	if !p.inTxn(pid) {
		t.Fatal("the repeated marker ended the next transaction")
	}
}

// TestFollowerTruncationReopensTransaction: a follower that loses a commit marker
// to truncation has that transaction open again.
func TestFollowerTruncationReopensTransaction(t *testing.T) {
	leader := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { leader.close() })
	mustAppend(t, leader, txnBatch(t, 1, 0, 2, true)) // 0-1
	mustMarker(t, leader, 1, true)                    // 2

	f := newTestPartition(t, 2)
	f.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}, time.Now())
	res, err := leader.Read(0, 1<<20, ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	data, err := res.Chunk.Bytes()
	res.Chunk.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.appendFromLeader(0, f.LogEndOffset(), data, 3); err != nil {
		t.Fatal(err)
	}
	if got := f.LastStableOffset(); got != 3 {
		t.Fatalf("follower LSO %d, want 3", got)
	}
	if err := f.truncateTo(0, f.LogEndOffset(), 2); err != nil {
		t.Fatal(err)
	}
	f.followHighWatermark(2)
	if !f.inTxn(1) {
		t.Fatal("producer 1's transaction should be open again after its marker was truncated")
	}
}

// TestCoordinatorEpochFencesMarkers: a marker from an older coordinator epoch
// than the producer's last marker on the partition (a deposed transaction
// coordinator's late marker) is refused with ErrCoordinatorFenced and leaves the
// log and the open transaction as they were; the coordinator epoch is rebuilt
// from the log when the partition reopens. Markers without a coordinator epoch
// (written before coordinators set one: 0) are still accepted at any epoch.
func TestCoordinatorEpochFencesMarkers(t *testing.T) {
	dir := t.TempDir()
	p := newLeaderPartition(t, dir)
	marker := func(coordinatorEpoch int32, commit bool) error {
		_, err := p.WriteTxnMarker(batch.Marker{ProducerID: 5, CoordinatorEpoch: coordinatorEpoch, Commit: commit}, 0)
		return err
	}
	mustAppend(t, p, txnBatch(t, 5, 0, 1, true)) // 0
	if err := marker(0, true); err != nil {      // 1: an old coordinator's marker
		t.Fatal(err)
	}
	mustAppend(t, p, txnBatch(t, 5, 1, 1, true)) // 2
	if err := marker(3, true); err != nil {      // 3: coordinator epoch 3
		t.Fatal(err)
	}
	mustAppend(t, p, txnBatch(t, 5, 2, 1, true)) // 4: open
	end := p.LogEndOffset()
	if err := marker(2, false); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from coordinator epoch 2 after 3: %v, want ErrCoordinatorFenced", err)
	}
	if p.LogEndOffset() != end || p.LastStableOffset() != 4 || !p.InTxnAt(5, 0) {
		t.Fatalf("a refused marker changed the partition: log end %d (was %d), LSO %d", p.LogEndOffset(), end, p.LastStableOffset())
	}
	infos, err := p.Producers()
	if err != nil || len(infos) != 1 || infos[0].CoordinatorEpoch != 3 {
		t.Fatalf("producers %+v (%v), want producer 5 at coordinator epoch 3", infos, err)
	}

	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	p = newLeaderPartition(t, dir)
	t.Cleanup(func() { p.close() })
	if err := marker(2, false); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("after reopening, marker from coordinator epoch 2: %v, want ErrCoordinatorFenced", err)
	}
	if err := marker(4, false); err != nil { // a newer coordinator aborts it
		t.Fatalf("marker from coordinator epoch 4: %v", err)
	}
	if _, aborted, lso := readAll(t, p, 0, ReadCommitted); !slices.Equal(aborted, []AbortedTxn{{ProducerID: 5, FirstOffset: 4, LastOffset: 5}}) || lso != 6 {
		t.Fatalf("aborted %v LSO %d, want [{5 4 5}] and 6", aborted, lso)
	}
}

// TestNextTxnWaitsForMarker: a transactional batch of a producer at a newer
// epoch than its transaction open on the partition (the producer's next
// transaction, begun while the coordinator writes the previous one's markers)
// is appended only after the previous transaction's marker: else it would
// join that transaction, and the marker, no longer above the producer's
// epoch, would be refused (KIP-1228), leaving both open. Without the marker
// within markerWait it is refused with ErrTxnMarkerPending, the log
// untouched, also by the partition reopened (a restart between the steps);
// a coordinator's transactional batch (an offset commit) waits the same way.
// After marker and batch, a reopened partition has the previous transaction
// committed and the next one open, and the marker written again is refused.
func TestNextTxnWaitsForMarker(t *testing.T) {
	const pid = 9
	build := func(t *testing.T, epoch int16, seq int32, v string) []byte {
		t.Helper()
		opts := batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: true}
		b, err := batch.Build(opts, []batch.Record{{Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	marker := batch.Marker{ProducerID: pid, ProducerEpoch: 3, Commit: true}
	for _, tc := range []struct {
		name   string
		append func(p *Partition, b []byte) (AppendResult, error)
	}{
		{"producer", func(p *Partition, b []byte) (AppendResult, error) { return p.Append(b, 1) }},
		{"coordinator", func(p *Partition, b []byte) (AppendResult, error) { return p.AppendAsCoordinator(b, AppendOpts{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := newLeaderPartition(t, dir)
			t.Cleanup(func() { p.close() }) // the last one opened
			mustAppend(t, p, build(t, 2, 0, "previous"))
			next := build(t, 3, 0, "next")
			if tc.name == "coordinator" {
				next = build(t, 3, -1, "next")
			}

			// No marker: refused after markerWait, nothing appended.
			leo := p.LogEndOffset()
			if _, err := tc.append(p, next); !errors.Is(err, ErrTxnMarkerPending) {
				t.Fatalf("next transaction's batch without the marker: %v, want ErrTxnMarkerPending", err)
			}
			if p.LogEndOffset() != leo {
				t.Fatalf("log end %d after a refused batch, want %d", p.LogEndOffset(), leo)
			}
			// A restart changes nothing: the state comes from the log.
			p.close()
			p = newLeaderPartition(t, dir)
			if _, err := tc.append(p, next); !errors.Is(err, ErrTxnMarkerPending) {
				t.Fatalf("after a restart: %v, want ErrTxnMarkerPending", err)
			}

			// The marker comes while the batch waits: the batch follows it.
			type result struct {
				res AppendResult
				err error
			}
			done := make(chan result, 1)
			go func() { res, err := tc.append(p, next); done <- result{res, err} }()
			var got *result
			wait.For(t, "the batch to wait for the marker or be appended", func() bool {
				select {
				case r := <-done:
					got = &r
					return true
				default:
				}
				p.watchMu.Lock()
				defer p.watchMu.Unlock()
				return len(p.leoWatchers) > 0
			})
			mres, merr := p.WriteTxnMarker(marker, 2)
			if got == nil {
				r := <-done
				got = &r
			}
			if merr != nil || got.err != nil {
				t.Fatalf("marker: %v; batch: %v", merr, got.err)
			}
			if got.res.BaseOffset != mres.LastOffset+1 {
				t.Fatalf("batch at %d, marker at %d: want the batch right after the marker", got.res.BaseOffset, mres.LastOffset)
			}

			// A restart after both: the previous transaction committed, the
			// next one open from its batch, the marker refused again.
			p.close()
			p = newLeaderPartition(t, dir)
			p.txnMu.Lock()
			first, open := p.txns.open[pid]
			p.txnMu.Unlock()
			aborted, err := p.log.AbortedTxns(0, p.LogEndOffset())
			if !open || first != got.res.BaseOffset || len(aborted) != 0 || err != nil {
				t.Fatalf("reopened: open %v at %d (want %d), aborted %v, %v", open, first, got.res.BaseOffset, aborted, err)
			}
			if _, err := p.WriteTxnMarker(marker, 2); !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("the marker written again: %v, want ErrInvalidProducerEpoch", err)
			}
			if !p.inTxn(pid) {
				t.Fatal("the marker written again ended the next transaction")
			}
		})
	}
}

// TestMarkerSharesTheNextFsync: a transaction marker wakes no fsync of its
// own; the fsync of the producer's next transactional batch, appended behind
// it, makes both durable (the bound of the marker's wait is set out of reach
// here, so neither check depends on timing).
func TestMarkerSharesTheNextFsync(t *testing.T) {
	l, err := storage.Open(vfs.Default, t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{}, 0, l, true, 1, producerExpiry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	p.setConfig(new(metadata.DefaultTopicConfig()))
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	p.markerFlushWithin = time.Hour
	const pid = 4
	build := func(epoch int16, v string) []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, Transactional: true, ProducerID: pid, ProducerEpoch: epoch}, []batch.Record{{Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()
	first, err := p.Append(build(2, "first"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitHighWatermark(ctx, first.LastOffset+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	syncs := l.Stats().Syncs
	marker, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: 3, Commit: true}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The marker alone is not made durable: the wait runs out (no fsync
	// within 50 ms; its own would come after an hour here).
	if err := p.WaitHighWatermark(ctx, marker.LastOffset+1, 50*time.Millisecond); err == nil {
		t.Fatal("the marker alone was fsynced")
	}
	next, err := p.Append(build(3, "next"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if next.BaseOffset != marker.LastOffset+1 {
		t.Fatalf("next batch at %d, marker at %d", next.BaseOffset, marker.LastOffset)
	}
	if err := p.WaitHighWatermark(ctx, next.LastOffset+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := l.Stats().Syncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for the marker and the next batch, want 1", got)
	}
}

// copyFrom has follower f fetch from leader l at f's log end (last fetched
// epoch lastEpoch, following at epoch epoch), append what it gets, and fetch
// once more at the new end, which moves the leader's HWM there; f then takes
// the leader's HWM.
func copyFrom(t *testing.T, l, f *Partition, id, epoch, lastEpoch int32) {
	t.Helper()
	now := time.Now()
	ff, err := l.ReadForFollower(followerFetch(id, f.LogEndOffset(), lastEpoch), now)
	if err != nil {
		t.Fatal(err)
	}
	if ff.Chunk.Size > 0 {
		data, err := ff.Chunk.Bytes()
		ff.Chunk.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.appendFromLeader(epoch, f.LogEndOffset(), data, ff.HighWatermark); err != nil {
			t.Fatal(err)
		}
	} else {
		ff.Chunk.Release()
	}
	ff, err = l.ReadForFollower(followerFetch(id, f.LogEndOffset(), epoch), now)
	if err != nil {
		t.Fatal(err)
	}
	ff.Chunk.Release()
	f.followHighWatermark(ff.HighWatermark)
}

// TestWaitCommittedAfterLeadershipLost: an append's wait (acks=all, a
// marker's WriteTxnMarkers, which waits for one partition after the other)
// that starts after leadership moved to a replica without the records, and
// this replica truncated them and caught up, finds the high-water mark past
// their offsets although they are gone. It used to answer success, so a
// coordinator counted the marker written and the transaction hung on the
// partition (and an acks=all produce was acknowledged, lost); it answers
// ErrNotLeader, as Kafka answers NOT_LEADER_OR_FOLLOWER once the replica no
// longer leads. An append that stays in the log across a new leader epoch
// of the same leader is still committed.
func TestWaitCommittedAfterLeadershipLost(t *testing.T) {
	now := time.Now()
	p := newTestPartition(t, 1)
	p.setConfig(new(metadata.DefaultTopicConfig()))
	f := newTestPartition(t, 2)
	f.setConfig(new(metadata.DefaultTopicConfig()))
	epoch0 := &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}
	if _, err := p.applyState(epoch0, now); err != nil {
		t.Fatal(err)
	}
	f.applyState(epoch0, now)

	mustAppend(t, p, txnBatch(t, 7, 0, 2, true)) // 0-1, replicated
	copyFrom(t, p, f, 2, 0, 0)
	if hwm := p.HighWatermark(); hwm != 2 {
		t.Fatalf("HWM %d, want 2", hwm)
	}
	mk, err := p.WriteTxnMarker(batch.Marker{ProducerID: 7, Commit: true, CoordinatorEpoch: 1}, 1) // 2, not replicated
	if err != nil {
		t.Fatal(err)
	}

	// Leadership moves to broker 2, which never got the marker.
	epoch1 := &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1}
	if _, err := f.applyState(epoch1, now); err != nil {
		t.Fatal(err)
	}
	p.applyState(epoch1, now)
	for range 2 { // 2, 3
		if _, err := f.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Broker 1 truncates its divergent tail (the marker) and catches up.
	if err := p.truncateTo(1, p.LogEndOffset(), 2); err != nil {
		t.Fatal(err)
	}
	copyFrom(t, f, p, 1, 1, 1)
	if hwm := p.HighWatermark(); hwm != 4 {
		t.Fatalf("broker 1's HWM %d after catching up, want 4", hwm)
	}
	if !f.inTxn(7) || !p.inTxn(7) {
		t.Fatal("producer 7's transaction should be open on both replicas: its marker is gone")
	}

	// The handler's wait for the marker (for a later partition of the
	// request, or after the request's other work) runs now.
	err = p.WaitCommitted(context.Background(), mk, time.Second)
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("waiting for the truncated marker at %d on a replica that no longer leads: %v, want ErrNotLeader (the marker would be counted as written; LSO on the new leader stays %d)", mk.LastOffset, err, f.LastStableOffset())
	}
}

// TestWaitCommittedAcrossLeaderEpochs: records appended at one leader epoch
// and kept when the same broker leads at the next (a reassignment that
// removes a replica moves the epoch) are committed once the high-water mark
// passes them.
func TestWaitCommittedAcrossLeaderEpochs(t *testing.T) {
	now := time.Now()
	p := newTestPartition(t, 1)
	p.setConfig(new(metadata.DefaultTopicConfig()))
	lead := func(epoch int32) {
		t.Helper()
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch}, now); err != nil {
			t.Fatal(err)
		}
	}
	lead(0)
	res := mustAppend(t, p, batchtest.Build(batchtest.Options{}))
	lead(1)
	mustAppend(t, p, batchtest.Build(batchtest.Options{}))
	if err := p.WaitCommitted(context.Background(), res, 10*time.Second); err != nil {
		t.Fatalf("records of leader epoch 0, kept at epoch 1: %v", err)
	}
}

// TestCoordinatorBatchesKeepSequenceMinusOne: a client's idempotent batch
// with a negative base sequence is refused (ErrInvalidRecord, Kafka's
// validateBatch for the client origin), while a coordinator's transactional
// batch with sequence -1 (a TxnOffsetCommit on __consumer_offsets) and the
// marker that ends it are appended as before.
func TestCoordinatorBatchesKeepSequenceMinusOne(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 9
	commit := func() []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, BaseSequence: -1, Transactional: true}, []batch.Record{{Key: []byte("k"), Value: []byte("offset")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := p.Append(commit(), 1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client batch with sequence -1: %v, want ErrInvalidRecord", err)
	}
	if _, err := p.AppendAsCoordinator(commit(), AppendOpts{}); err != nil {
		t.Fatalf("coordinator batch with sequence -1: %v", err)
	}
	mustMarker(t, p, pid, true)
	if end := p.LogEndOffset(); end != 2 {
		t.Fatalf("log end %d, want 2 (the commit and its marker)", end)
	}
}

// TestCoordinatorAppendFencesOlderEpoch: a coordinator's transactional batch
// (a TxnOffsetCommit on __consumer_offsets) is checked against its producer's
// epoch as a client's is, Kafka's checkProducerEpoch for the coordinator
// origin: after a marker at a bumped epoch (transaction version 2 ends every
// transaction so) or a commit at a newer epoch (a new instance's
// InitProducerId), a commit of an older epoch is a zombie's and is refused
// with ErrInvalidProducerEpoch, the log unchanged; else it would open a
// transaction that the new epoch's marker commits. The accepted commit's
// epoch becomes the producer's here.
func TestCoordinatorAppendFencesOlderEpoch(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 9
	commit := func(epoch int16) []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, Transactional: true}, []batch.Record{{Key: []byte("k"), Value: []byte("offset")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := p.AppendAsCoordinator(commit(0), AppendOpts{}); err != nil {
		t.Fatalf("commit at epoch 0: %v", err)
	}
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: 1, Commit: true}, 2); err != nil {
		t.Fatalf("marker at the bumped epoch 1: %v", err)
	}
	for _, step := range []struct {
		epoch int16
		want  error
	}{
		{0, ErrInvalidProducerEpoch}, // the ended transaction's epoch
		{3, nil},                     // a new instance's epoch
		{2, ErrInvalidProducerEpoch}, // older than the last commit's
		{3, nil},
	} {
		end := p.LogEndOffset()
		_, err := p.AppendAsCoordinator(commit(step.epoch), AppendOpts{})
		if !errors.Is(err, step.want) {
			t.Fatalf("commit at epoch %d: %v, want %v", step.epoch, err, step.want)
		}
		if err != nil && p.LogEndOffset() != end {
			t.Fatalf("a refused commit at epoch %d changed the log", step.epoch)
		}
	}
	infos, err := p.Producers()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ProducerEpoch != 3 {
		t.Fatalf("producers %+v, want producer %d at epoch 3", infos, pid)
	}
}

// TestCoordinatorBatchHasNoLastSequence: a coordinator's batch carries no
// sequence (-1), so its producer's last sequence stays -1 whatever its number
// of records, as Kafka's RecordBatch.lastSequence answers for it
// (DescribeProducers shows it). Strata counted from -1: a commit of three
// offsets made the last sequence 1.
func TestCoordinatorBatchHasNoLastSequence(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: 9, BaseSequence: -1, Transactional: true},
		[]batch.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsCoordinator(b, AppendOpts{}); err != nil {
		t.Fatal(err)
	}
	ps, err := p.Producers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].LastSequence != -1 {
		t.Fatalf("producers %+v, want producer 9 with last sequence -1", ps)
	}
}

// TestRepeatedMarkerTransactionVersion2: a marker of transaction version 2 at
// the producer's epoch on the partition is a repeat of the one that moved the
// producer there; Kafka 4.4 (ProducerAppendInfo.checkProducerEpoch) writes it
// again and answers it when the producer has no transaction open here (or is
// at the last epoch, 32767, which no end can bump), and refuses it only when
// a transaction is open at that epoch (the next one). The coordinator epoch
// is checked after. Strata refused every repeat with INVALID_PRODUCER_EPOCH.
func TestRepeatedMarkerTransactionVersion2(t *testing.T) {
	const pid = 9
	type step struct {
		marker           bool // else a transactional batch at epoch, sequence 0
		epoch            int16
		coordinatorEpoch int32
	}
	for _, tc := range []struct {
		name        string
		history     []step
		next        step // a marker of transaction version 2
		wantErr     error
		wantOpenTxn bool
	}{
		{name: "repeat after the end", history: []step{{epoch: 2}, {marker: true, epoch: 3}}, next: step{epoch: 3}},
		{name: "repeat from an older coordinator", history: []step{{epoch: 2}, {marker: true, epoch: 3, coordinatorEpoch: 5}},
			next: step{epoch: 3, coordinatorEpoch: 4}, wantErr: ErrCoordinatorFenced},
		{name: "repeat with the next transaction open", history: []step{{epoch: 2}, {marker: true, epoch: 3}, {epoch: 3}},
			next: step{epoch: 3}, wantErr: ErrInvalidProducerEpoch, wantOpenTxn: true},
		{name: "last epoch with its transaction open", history: []step{{epoch: math.MaxInt16}}, next: step{epoch: math.MaxInt16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			t.Cleanup(func() { p.close() })
			for _, s := range tc.history {
				if s.marker {
					if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: s.epoch, CoordinatorEpoch: s.coordinatorEpoch, Commit: true}, 2); err != nil {
						t.Fatal(err)
					}
					continue
				}
				b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: s.epoch, Transactional: true}, []batch.Record{{Value: []byte("x")}})
				if err != nil {
					t.Fatal(err)
				}
				mustAppend(t, p, b)
			}
			leo := p.LogEndOffset()
			_, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: tc.next.epoch, CoordinatorEpoch: tc.next.coordinatorEpoch, Commit: true}, 2)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("marker: %v, want %v", err, tc.wantErr)
			}
			if got := p.inTxn(pid); got != tc.wantOpenTxn {
				t.Fatalf("transaction open %v, want %v", got, tc.wantOpenTxn)
			}
			want := leo + 1 // the marker written again
			if tc.wantErr != nil {
				want = leo
			}
			if p.LogEndOffset() != want {
				t.Fatalf("log end %d, want %d", p.LogEndOffset(), want)
			}
		})
	}
}
