package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/strata-stream/strata/internal/remote"
)

// Producer-state snapshots in the object store (manifest layout 3). Each
// segment an upload puts gets the replica's producer-state snapshot as of the
// segment's next offset, P/<base>-<next>.snapshot, so that a follower that
// starts over at its leader's local log start (KIP-405) restores the producer
// and transaction state of the records it will never hold, as Kafka's follower
// does from the snapshot its RemoteLogManager uploads with each segment:
//
//  1. Upload asks TierConfig.ProducerSnapshot for the state as of the
//     segment's next offset, handing it the one uploaded with the segment
//     before (as of this segment's base), if there is one: the replica applies
//     the segment's batches to it. Without it (the first upload, or a manifest
//     whose last segment has none) the replica starts from its own snapshots
//     and log.
//  2. The snapshot object is put with the segment's, before the manifest that
//     names both (its size in the segment's entry).
//  3. RemoteAuxState finds, for a leader's local log start, the remote segment
//     holding the offset before it, and returns that segment's next offset
//     (where the follower starts) and its snapshot, if it has one.

// SnapshotFunc returns a replica's producer-state snapshot payload as of offset
// at (the state of every batch below it). prev, when not nil, is the snapshot
// as of prevAt (below at): the state to apply the batches from prevAt on to.
type SnapshotFunc func(prev []byte, prevAt, at int64) ([]byte, error)

// uploadedSnapshot is the snapshot the tier last put, and its offset.
type uploadedSnapshot struct {
	at      int64
	payload []byte
}

// snapshotFrom returns the snapshot as of base an upload of the segment that
// starts there builds on: the one this tier last put, or that of the manifest
// m's last segment, if it ends at base and has one. A missing or damaged one
// is none (the replica falls back on its own state); a store that fails is an
// error. passMu is held.
func (t *Tier) snapshotFrom(ctx context.Context, m manifest, base int64) ([]byte, error) {
	if t.lastSnapshot.payload != nil && t.lastSnapshot.at == base {
		return t.lastSnapshot.payload, nil
	}
	n := len(m.Segments)
	if n == 0 || m.Segments[n-1].Next != base || m.Segments[n-1].SnapshotSize == 0 {
		return nil, nil
	}
	payload, err := t.getSnapshot(ctx, m.Segments[n-1])
	if errors.Is(err, ErrSnapshotDamaged) {
		return nil, nil
	}
	return payload, err
}

// putSnapshot puts the producer-state snapshot as of seg.Next, built on the
// one as of seg.Base from m, and records its size in seg. Nothing without a
// TierConfig.ProducerSnapshot. passMu is held.
func (t *Tier) putSnapshot(ctx context.Context, m manifest, seg *remoteSegment) error {
	if t.cfg.ProducerSnapshot == nil {
		return nil
	}
	prev, err := t.snapshotFrom(ctx, m, seg.Base)
	if err != nil {
		return err
	}
	payload, err := t.cfg.ProducerSnapshot(prev, seg.Base, seg.Next)
	if err != nil {
		return err
	}
	b := frameSide(payload)
	if err := t.put()(ctx, seg.key(t.cfg.Prefix, snapshotSuffix), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	seg.SnapshotSize = int64(len(b))
	t.lastSnapshot = uploadedSnapshot{at: seg.Next, payload: payload}
	return nil
}

// getSnapshot reads and checks seg's producer-state snapshot: ErrSnapshotDamaged
// when it is missing or fails its checks.
func (t *Tier) getSnapshot(ctx context.Context, seg remoteSegment) ([]byte, error) {
	key := seg.key(t.cfg.Prefix, snapshotSuffix)
	b, err := t.cfg.Store.Get(ctx, key, 0, seg.SnapshotSize)
	switch {
	case errors.Is(err, remote.ErrNotFound) || errors.Is(err, remote.ErrRange):
		return nil, fmt.Errorf("%w: %s is missing", ErrSnapshotDamaged, key)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	payload, err := unframeSide(b)
	if err != nil || int64(len(b)) != seg.SnapshotSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, %v", ErrSnapshotDamaged, key, len(b), err)
	}
	return payload, nil
}

// RemoteAuxState is what a follower that starts over at its leader's local
// log start, leaderLocalStart, restores from the remote part, as Kafka's
// TierStateMachine does: the offset to start at, the next offset of the
// remote segment that holds the offset before leaderLocalStart (the local
// start itself when no remote segment holds it), and the producer-state
// snapshot uploaded with that segment (nil when it has none: uploaded before
// layout 3). It reads the manifest first (Load). A snapshot that is missing or
// fails its checks is ErrSnapshotDamaged, returned with the start: the
// caller may start there without it, as Kafka's follower does.
func (t *Tier) RemoteAuxState(ctx context.Context, leaderLocalStart int64) (start int64, snapshot []byte, err error) {
	if err := t.Load(ctx); err != nil {
		return 0, nil, err
	}
	m, _ := t.manifestCopy()
	i := m.segmentFor(leaderLocalStart - 1)
	if i == len(m.Segments) || m.Segments[i].Base > leaderLocalStart-1 {
		return leaderLocalStart, nil, nil
	}
	seg := m.Segments[i]
	if seg.SnapshotSize == 0 {
		return seg.Next, nil, nil
	}
	snapshot, err = t.getSnapshot(ctx, seg)
	return seg.Next, snapshot, err
}
