package share

// The share coordinator (KIP-932's ShareCoordinator): the leader of a partition of
// StateTopic owns the state of the share partitions whose keys live there, and
// every write of that state goes through it (InitializeShareGroupState,
// ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState, served by
// package handlers). It keeps the latest value of each key in memory, rebuilt
// from the partition when this node becomes its leader (offsets.Store drives
// LoadPartitionAt and UnloadPartition, as for the group and transaction
// coordinators; writes carry the leader epoch of the load), and serializes the
// writes of one key, checking each against the value it would replace:
//
//   - a write whose state epoch is older than the stored one is refused with
//     FENCED_STATE_EPOCH (the state was re-initialized meanwhile: an offset
//     reset), and so is an initialization that does not start a newer epoch;
//   - a write or read whose data-partition leader epoch is older than the stored
//     one is refused with FENCED_LEADER_EPOCH (a newer share-partition leader
//     has read the state: the writer lost its leadership);
//   - a read with a newer leader epoch first writes the state again under that
//     epoch, so once a new share-partition leader has its state no write of the
//     old one lands;
//   - a write of a key without state is refused with INVALID_REQUEST, as Kafka
//     refuses it: state is initialized first, and a leader still holding state
//     that was deleted meanwhile (DeleteShareGroupOffsets, a deleted group)
//     would otherwise bring it back.
//
// A value is in memory only once it is committed (acks=all on the state
// partition); the share-partition leader reloads its state on either fenced
// error.

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/group"
)

// StateLog appends records to a partition of StateTopic as its leader at
// leaderEpoch, the epoch the partition was loaded at, and returns once they are
// committed; offsets.Store on StateTopic is one. An error wrapping
// group.ErrNotCoordinator means this node does not lead the partition, or no
// longer at leaderEpoch (a write begun before a reload must not land after the
// reload read the log).
type StateLog interface {
	Append(ctx context.Context, partition, leaderEpoch int32, records []group.Record) (first int64, err error)
}

// Coordinator is the share coordinator of one node: the partitions of StateTopic
// it leads, loaded. Its methods return Kafka error codes.
type Coordinator struct {
	log        StateLog
	partitions int32 // of StateTopic

	mu     sync.Mutex
	loaded map[int32]*stateShard
}

// stateShard is one loaded partition of StateTopic, loaded at leader epoch
// epoch.
type stateShard struct {
	epoch int32
	mu    sync.Mutex
	keys  map[Key]*stateEntry
}

// stateEntry is one key's latest committed value; mu serializes its writes,
// which carry the leader epoch its partition was loaded at.
type stateEntry struct {
	epoch int32
	mu    sync.Mutex
	snap  Snapshot
	found bool
}

// NewCoordinator returns a coordinator appending through log to a StateTopic of
// partitions partitions (DefaultStateTopicPartitions when 0).
func NewCoordinator(log StateLog, partitions int32) *Coordinator {
	if partitions <= 0 {
		partitions = DefaultStateTopicPartitions
	}
	return &Coordinator{log: log, partitions: partitions, loaded: map[int32]*stateShard{}}
}

// LoadPartitionAt rebuilds partition p's keys from its records as this node
// leads p at leader epoch epoch, which its writes then carry
// (offsets.Coordinator).
func (c *Coordinator) LoadPartitionAt(ctx context.Context, p, epoch int32, records iter.Seq2[group.Record, error]) error {
	sh := &stateShard{epoch: epoch, keys: map[Key]*stateEntry{}}
	for r, err := range records {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if v, ok := keyVersionOf(r.Key); ok && v != keyVersion {
			return fmt.Errorf("%w: key version %d, this build reads %d", ErrCorruptState, v, keyVersion)
		}
		k, ok := decodeKey(r.Key)
		if !ok {
			continue
		}
		if r.Value == nil {
			delete(sh.keys, k)
			continue
		}
		s, err := decodeSnapshot(r.Value)
		if err != nil {
			return err
		}
		// Every value the coordinator wrote supersedes the one before it; a
		// value an older Strata (without a coordinator) wrote late may not.
		if e := sh.keys[k]; e == nil || s.newerThan(e.snap) {
			sh.keys[k] = &stateEntry{epoch: epoch, snap: s, found: true}
		}
	}
	c.withLock(func() { c.loaded[p] = sh })
	return nil
}

// UnloadPartition forgets partition p (offsets.Coordinator).
func (c *Coordinator) UnloadPartition(p int32) {
	c.withLock(func() { delete(c.loaded, p) })
}

// withLock runs f with c.mu held, released by defer (package doc).
func (c *Coordinator) withLock(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// shard returns the loaded partition holding k's state, nil when this node
// does not hold it.
func (c *Coordinator) shard(k Key) *stateShard {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded[statePartition(k, c.partitions)]
}

// entry returns k's entry, locked (the caller releases e.mu with defer), or
// NOT_COORDINATOR when this node does not hold k's partition.
func (c *Coordinator) entry(k Key) (*stateEntry, int16) {
	sh := c.shard(k)
	if sh == nil {
		return nil, kerr.NotCoordinator.Code
	}
	e := sh.entry(k, true)
	e.mu.Lock()
	return e, 0
}

// entry returns k's entry; nil when k has none and create is false.
func (sh *stateShard) entry(k Key, create bool) *stateEntry {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.keys[k]
	if e == nil && create {
		e = &stateEntry{epoch: sh.epoch}
		sh.keys[k] = e
	}
	return e
}

// append writes k's value (nil: a tombstone) and returns its code: Kafka 4.4's
// share coordinator maps a failed write as the group coordinator does.
func (c *Coordinator) append(ctx context.Context, e *stateEntry, k Key, value []byte) int16 {
	_, err := c.log.Append(ctx, statePartition(k, c.partitions), e.epoch, []group.Record{{Key: encodeKey(k), Value: value}})
	return group.AppendErrorCode(err)
}

// Read returns k's state for a share-partition leader of leaderEpoch (-1: a
// reader that is not one, fencing nothing); found is false when k has no state.
func (c *Coordinator) Read(ctx context.Context, k Key, leaderEpoch int32) (Snapshot, bool, int16) {
	e, code := c.entry(k)
	if code != 0 {
		return Snapshot{}, false, code
	}
	defer e.mu.Unlock()
	if !e.found {
		return Snapshot{}, false, 0
	}
	switch {
	case leaderEpoch < 0 || leaderEpoch == e.snap.LeaderEpoch:
	case leaderEpoch < e.snap.LeaderEpoch:
		return Snapshot{}, false, kerr.FencedLeaderEpoch.Code
	default:
		next := e.snap
		next.LeaderEpoch = leaderEpoch
		if code := c.append(ctx, e, k, encodeSnapshot(next)); code != 0 {
			return Snapshot{}, false, code
		}
		e.snap = next
	}
	return e.snap, true, 0
}

// Summary returns k's committed state without fencing anyone or keeping a trace
// of k (ReadShareGroupStateSummary: the group coordinator's view of any group,
// existing or not); found is false when k has no state.
func (c *Coordinator) Summary(k Key) (s Snapshot, found bool, code int16) {
	sh := c.shard(k)
	if sh == nil {
		return Snapshot{}, false, kerr.NotCoordinator.Code
	}
	e := sh.entry(k, false)
	if e == nil {
		return Snapshot{}, false, 0
	}
	e.mu.Lock() // waits for a write of k in flight
	defer e.mu.Unlock()
	return e.snap, e.found, 0
}

// Write makes s k's state, unless it is fenced (see the file comment).
func (c *Coordinator) Write(ctx context.Context, k Key, s Snapshot) int16 {
	e, code := c.entry(k)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	switch {
	case !e.found:
		return kerr.InvalidRequest.Code
	case s.StateEpoch < e.snap.StateEpoch:
		return kerr.FencedStateEpoch.Code
	case s.LeaderEpoch >= 0 && s.LeaderEpoch < e.snap.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case s.LeaderEpoch < 0:
		s.LeaderEpoch = e.snap.LeaderEpoch
	}
	if code := c.append(ctx, e, k, encodeSnapshot(s)); code != 0 {
		return code
	}
	e.snap, e.found = s, true
	return 0
}

// Initialize starts state epoch stateEpoch of k at start, nothing in flight; an
// initialization that does not start a newer epoch than k's is refused with
// FENCED_STATE_EPOCH. The stored leader epoch is kept (-1 over no state).
func (c *Coordinator) Initialize(ctx context.Context, k Key, stateEpoch int32, start int64) int16 {
	e, code := c.entry(k)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	s := Snapshot{StateEpoch: stateEpoch, LeaderEpoch: -1, Start: start}
	if e.found {
		if stateEpoch <= e.snap.StateEpoch {
			return kerr.FencedStateEpoch.Code
		}
		s.LeaderEpoch = e.snap.LeaderEpoch
	}
	if code := c.append(ctx, e, k, encodeSnapshot(s)); code != 0 {
		return code
	}
	e.snap, e.found = s, true
	return 0
}

// Delete removes k's state (a tombstone).
func (c *Coordinator) Delete(ctx context.Context, k Key) int16 {
	e, code := c.entry(k)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	if code := c.append(ctx, e, k, nil); code != 0 {
		return code
	}
	e.snap, e.found = Snapshot{}, false
	return 0
}
