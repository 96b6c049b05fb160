package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
)

// Tiered storage (KIP-405) on this broker. A partition of a topic with
// remote.storage.enable=true, on a broker started with --remote-storage, gets a
// storage.Tier:
//
//   - RunTiering uploads, on the leader, every closed segment below the
//     last stable offset once remote.copy.lag.ms / .bytes let it go, retrying with backoff while the store fails (appends and
//     local reads go on meanwhile; the upload lag grows); nothing
//     with remote.log.copy.disable=true.
//   - The cleaner applies local retention (local.retention.*) only to uploaded
//     segments, and, on the leader, whole-log retention (retention.*) to the
//     remote part. Followers reload the manifest to learn what is uploaded.
//   - Fetches below the local log start are served from the object store;
//     ListOffsets earliest is the remote start, earliest-local (-4) the local
//     one and earliest-pending-upload (-5) the end of the uploaded part;
//     OffsetForLeaderEpoch answers by the remote part's epochs below the local
//     start (Tier.EndOffsetForEpoch).
//   - Followers replicate only the local part: a follower fetching below the
//     leader's local start, in the remote part, is answered
//     OFFSET_MOVED_TO_TIERED_STORAGE (with the partition's start), asks the
//     leader for its local start (ListOffsets earliest-local) and starts over
//     there, as Kafka's followers do (KIP-405), with the producer state
//     uploaded with the remote segment that ends there (remoteAuxState).
//   - Each upload takes the producer state as of the segment's end along
//     (producerSnapshotAt).

// remoteReadTimeout caps one remote read of a fetch or a timestamp lookup; past it
// the client gets a retriable KAFKA_STORAGE_ERROR.
const defaultRemoteReadTimeout = 5 * time.Second

// Tier returns the partition's tier, or nil when the partition is not tiered.
func (p *Partition) Tier() *storage.Tier { return p.tier.Load() }

// tierPrefix is a partition's key prefix in the object store: the topic ID keeps
// a deleted and recreated topic's objects apart.
func tierPrefix(topic string, id metadata.UUID, index int32) string {
	return fmt.Sprintf("%s-%s/%d", topic, id, index)
}

// tierRetention maps a topic's retention keys onto a tier's.
func tierRetention(tc metadata.TopicConfig) storage.TierRetention {
	localMs, localBytes := tc.LocalRetention()
	return storage.TierRetention{
		Age: millis(tc.RetentionMs), Bytes: tc.RetentionBytes,
		LocalAge: millis(localMs), LocalBytes: localBytes,
	}
}

// tierCopyLag maps a topic's remote.copy.lag.ms and .bytes onto a tier's.
func tierCopyLag(tc metadata.TopicConfig) storage.CopyLag {
	ms, bytes := tc.RemoteCopyLag()
	return storage.CopyLag{Age: millis(ms), Bytes: bytes}
}

// applyTier gives p a tier when its topic enables remote storage and this broker
// has a store, updates its retention, copy lag and whether it uploads
// (remote.log.copy.disable), or drops it when the topic no longer enables
// remote storage. A leader that drops it for remote.storage.enable=false with
// remote.log.delete.on.disable=true deletes the remote part (KIP-950, as
// Kafka's TopicConfigHandler: the log then starts at the local log start);
// otherwise (a compacted topic, a broker without a store) the remote data
// stays where it is, unused. A tier turned back on while that deletion runs
// is created when it ends: created earlier, it would read the old manifest
// and upload under the prefix being deleted (Kafka deletes on the thread that
// applies config changes, so the next change waits for it too).
func (m *Manager) applyTier(p *Partition, tc metadata.TopicConfig) {
	p.tierMu.Lock()
	defer p.tierMu.Unlock()
	tier := p.tier.Load()
	switch {
	case m.opts.Remote == nil || !tc.RemoteStorageEnable || tc.CleanupPolicy&metadata.CleanupCompact != 0:
		if tier != nil {
			p.tier.Store(nil)
			if !tc.RemoteStorageEnable && tc.RemoteLogDeleteOnDisable && p.IsLeader() {
				p.remoteDeleting = true
				m.deleteRemoteOf(p, tier, func() { m.remoteDeleted(p) })
			}
		}
	case p.remoteDeleting:
		// remoteDeleted applies the config then.
	case tier == nil:
		tier = storage.NewTier(p.log, storage.TierConfig{
			Store:     m.opts.Remote,
			Prefix:    tierPrefix(p.Topic, p.TopicID, p.Index),
			Cache:     m.opts.RemoteCache,
			Retention: tierRetention(tc),
			CopyLag:   tierCopyLag(tc),
			Now:       m.now,
			// The producer state uploaded with each segment, which a
			// follower that starts over at the leader's local start restores.
			ProducerSnapshot: p.producerSnapshotAt,
		})
		tier.SetCopyDisabled(tc.RemoteLogCopyDisable)
		p.tier.Store(tier)
	default:
		tier.SetRetention(tierRetention(tc))
		tier.SetCopyLag(tierCopyLag(tc))
		tier.SetCopyDisabled(tc.RemoteLogCopyDisable)
	}
}

// remoteDeleted ends the deletion of p's remote part that applyTier started
// and applies p's current config, which may have turned remote storage back
// on meanwhile.
func (m *Manager) remoteDeleted(p *Partition) {
	p.tierMu.Lock()
	p.remoteDeleting = false
	p.tierMu.Unlock()
	if tc := p.Config(); tc != nil && !p.closed.Load() {
		m.applyTier(p, *tc)
	}
}

// cleanTiered is the cleaner's pass over a tiered partition.
func (m *Manager) cleanTiered(p *Partition, tier *storage.Tier) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hwm := p.HighWatermark()
	var local, remote int
	var err error
	if p.IsLeader() {
		local, remote, err = tier.EnforceRetention(ctx, hwm, p.LeaderEpoch())
	} else if err = tier.Load(ctx); err == nil {
		local, err = tier.EnforceLocalRetention(hwm)
	}
	switch {
	case err != nil && !errors.Is(err, storage.ErrClosed):
		st := tier.Stats()
		m.log.Warn("tiered retention: local segments wait until they are uploaded", "topic", p.Topic, "partition", p.Index,
			"uploaded_end", st.RemoteEnd, "upload_lag_bytes", st.UploadLagBytes, "err", err)
	case local > 0 || remote > 0:
		m.log.Info("tiered retention deleted segments", "topic", p.Topic, "partition", p.Index,
			"local_segments", local, "remote_segments", remote, "log_start_offset", tier.LogStartOffset(), "local_log_start_offset", p.LogStartOffset())
	}
}

// tierUploadState is RunTiering's per-partition bookkeeping.
type tierUploadState struct {
	tier     *storage.Tier
	epoch    int32 // leader epoch the manifest was loaded under; -1: not loaded
	backoff  time.Duration
	nextTry  time.Time
	failures int
}

// maxUploadBackoff caps the wait between failed upload attempts;
// uploadPassTimeout bounds one partition's upload pass.
const (
	maxUploadBackoff  = time.Minute
	uploadPassTimeout = 2 * time.Minute
)

// RunTiering uploads the closed segments of every tiered partition this broker
// leads, every interval until ctx ends. A new leader first loads the manifest and
// carries on from its end. Failures back off exponentially per partition (up to
// a minute) and are logged when they start and when they end.
func (m *Manager) RunTiering(ctx context.Context, interval time.Duration) {
	states := map[*Partition]*tierUploadState{}
	everyTick(ctx, interval, func() {
		live := map[*Partition]bool{}
		for _, p := range m.Partitions() {
			tier := p.Tier()
			if tier == nil || !p.IsLeader() {
				continue
			}
			live[p] = true
			st := states[p]
			if st == nil || st.tier != tier {
				st = &tierUploadState{tier: tier, epoch: -1}
				states[p] = st
			}
			m.uploadOnce(ctx, p, st)
		}
		for p := range states {
			if !live[p] {
				delete(states, p)
			}
		}
	})
}

func (m *Manager) uploadOnce(ctx context.Context, p *Partition, st *tierUploadState) {
	now := m.now()
	if now.Before(st.nextTry) {
		return
	}
	// A hung store must not stall the uploads of every other partition forever.
	ctx, cancel := context.WithTimeout(ctx, uploadPassTimeout)
	defer cancel()
	epoch := p.LeaderEpoch()
	var err error
	if st.epoch != epoch {
		if err = st.tier.Load(ctx); err == nil {
			st.epoch = epoch
		}
	}
	n := 0
	if err == nil {
		// Only below the last stable offset: an open transaction's batches stay
		// local until it ends, so a replica that restarts still sees where it
		// began.
		n, err = st.tier.Upload(ctx, p.LastStableOffset(), epoch)
	}
	if err != nil {
		if errors.Is(err, storage.ErrClosed) || ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return
		}
		if errors.Is(err, storage.ErrFencedLeaderEpoch) {
			st.epoch = -1 // reload: a newer leader wrote the manifest
		}
		st.failures++
		st.backoff = min(max(2*st.backoff, time.Second), maxUploadBackoff)
		st.nextTry = now.Add(st.backoff)
		if st.failures == 1 {
			m.log.Warn("remote upload failing; retrying with backoff", "topic", p.Topic, "partition", p.Index, "err", err)
		}
		return
	}
	if st.failures > 0 {
		m.log.Info("remote upload recovered", "topic", p.Topic, "partition", p.Index, "failed_attempts", st.failures)
	}
	st.failures, st.backoff, st.nextTry = 0, 0, time.Time{}
	if n > 0 {
		m.log.Debug("uploaded segments", "topic", p.Topic, "partition", p.Index, "segments", n, "uploaded_end", st.tier.UploadedEnd())
	}
}

// loadTier makes sure a leader's tier has read its manifest before it answers
// from it (storage.Tier.EnsureLoaded), within one remote read's time.
func loadTier(ctx context.Context, tier *storage.Tier) error {
	ctx, cancel := context.WithTimeout(ctx, defaultRemoteReadTimeout)
	defer cancel()
	return tier.EnsureLoaded(ctx)
}

// ReadableLogStart is the log start a leader serves reads from: on a tiered
// partition the object store's (its manifest read first, within one remote
// read's time, as ListOffsets earliest does), else the local log's.
func (p *Partition) ReadableLogStart() (int64, error) {
	tier := p.tier.Load()
	if tier == nil {
		return p.log.LogStartOffset(), nil
	}
	if err := loadTier(context.Background(), tier); err != nil {
		return 0, err
	}
	return tier.LogStartOffset(), nil
}

// remoteAuxState is where a follower whose log ends below its leader's local
// log start, leaderStart, starts over, and with what producer state, as Kafka's
// TierStateMachine builds a follower's "remote log aux state": of a tiered
// partition, the next offset of the remote segment that holds the offset
// before leaderStart, and the producer-state snapshot uploaded with it
// (storage.Tier.RemoteAuxState, within one remote read's time); else, or
// without a snapshot (a segment uploaded before snapshots were), leaderStart
// and no state. A snapshot that is missing, fails its checks or does not
// decode is no state either, with the reason in lost: Kafka's follower drops
// a snapshot that does not load (ProducerStateManager, CorruptSnapshotException)
// and starts with none; retrying would find the same bytes for ever. The
// leader epochs below need no restoring: a tiered leader answers them from
// the manifest (storage.Tier.EndOffsetForEpoch).
func (p *Partition) remoteAuxState(ctx context.Context, leaderStart int64) (restartState, error) {
	tier := p.tier.Load()
	if tier == nil {
		return restartState{start: leaderStart}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, defaultRemoteReadTimeout)
	defer cancel()
	start, snapshot, err := tier.RemoteAuxState(ctx, leaderStart)
	switch {
	case errors.Is(err, storage.ErrSnapshotDamaged):
		return restartState{start: start, lost: err}, nil
	case err != nil || snapshot == nil:
		return restartState{start: start}, err
	}
	producers, txns, err := decodeSnapshot(snapshot)
	if err != nil {
		err = fmt.Errorf("%w: the producer snapshot of the remote segment ending at %d: %v", storage.ErrSnapshotDamaged, start, err)
		return restartState{start: start, lost: err}, nil
	}
	if cutoff, ok := p.expiry.cutoff(); ok {
		producers.expire(cutoff, txns.inTxn)
	}
	return restartState{start: start, producers: producers, txns: txns}, nil
}

// readRemote serves a fetch below the local log start from the object store;
// it also returns the offset after the batches read.
func (p *Partition) readRemote(tier *storage.Tier, offset int64, maxBytes int, res FetchResult) (FetchResult, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultRemoteReadTimeout)
	defer cancel()
	b, next, err := tier.Read(ctx, offset, maxBytes)
	if err != nil {
		return res, offset, err
	}
	res.Remote = b
	return res, next, nil
}

// listOffsetTiered answers the ListOffsets lookups a tiered partition answers
// differently, as Kafka 4.4 does; handled is false for the others:
//   - earliest (-2): the remote log start;
//   - latest tiered (-5, KIP-1005): the last uploaded offset and the epoch that
//     wrote it, or -1 and -1 before the first upload;
//   - earliest pending upload (-6, KIP-1023): the offset after the last
//     uploaded one (at least the log start) and its epoch; before the first
//     upload, the log start while nothing was deleted below the local log,
//     else -1;
//   - a timestamp: the first remote record at or after it, if any is remote,
//     looked up within ctx's deadline, or defaultRemoteReadTimeout without one.
func (p *Partition) listOffsetTiered(ctx context.Context, tier *storage.Tier, ts int64) (offset, timestamp int64, epoch int32, found, handled bool, err error) {
	if ts < 0 && ts != EarliestTimestamp && ts != LatestTieredTimestamp && ts != EarliestPendingUploadTimestamp {
		return 0, 0, -1, false, false, nil
	}
	if err := loadTier(ctx, tier); err != nil {
		return 0, 0, -1, false, true, err
	}
	switch ts {
	case EarliestTimestamp:
		start := tier.LogStartOffset()
		return start, -1, tier.EpochAt(start), true, true, nil
	case LatestTieredTimestamp:
		off, e := tier.LastUploaded()
		return off, -1, e, true, true, nil
	case EarliestPendingUploadTimestamp:
		last, _ := tier.LastUploaded()
		start := tier.LogStartOffset()
		if last < 0 {
			if start != p.log.LogStartOffset() {
				return -1, -1, -1, true, true, nil
			}
			return start, -1, p.log.EpochAt(start), true, true, nil
		}
		off := max(last+1, start)
		return off, -1, p.log.EpochAt(off), true, true, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRemoteReadTimeout)
		defer cancel()
	}
	off, t, ok, err := tier.OffsetForTimestamp(ctx, ts, p.maxRecordBytes())
	switch {
	case err != nil:
		return 0, 0, -1, false, true, err
	case !ok:
		return 0, 0, -1, false, false, nil // every remote record is older: look locally
	}
	return off, t, tier.EpochAt(off), true, true, nil
}

// deleteRecordsTiered moves the remote start first (the manifest), then the local
// log start if offset is past it, and returns the partition's new log start.
// After a crash between the two steps, the tier's next Load moves the local
// start (as it does on a follower, which keeps its own local start).
func (p *Partition) deleteRecordsTiered(tier *storage.Tier, offset int64) (int64, error) {
	if err := loadTier(context.Background(), tier); err != nil {
		return -1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultRemoteReadTimeout)
	defer cancel()
	if err := tier.DeleteRecords(ctx, offset, p.LeaderEpoch()); err != nil {
		return -1, err
	}
	if offset > p.log.LogStartOffset() {
		if err := p.log.DeleteRecords(offset); err != nil {
			return -1, err
		}
	}
	return tier.LogStartOffset(), nil
}

// remoteDeleteTimeout bounds the deletion of a deleted topic's remote objects.
const remoteDeleteTimeout = 5 * time.Minute

// deleteRemote deletes, in the background, every object of a tiered partition
// whose topic was deleted (every replica tries; deletes are idempotent).
func (m *Manager) deleteRemote(p *Partition) {
	if tier := p.Tier(); tier != nil {
		m.deleteRemoteOf(p, tier, nil)
	}
}

// deleteRemoteOf deletes, in the background, every object of p's tier, then
// calls done (if not nil), whether the deletion succeeded or not. Objects a
// failure leaves behind are logged; nothing reads them any more. The deletion
// is one of the Manager's own goroutines: Close cancels it and waits for it,
// so no store request outlives the Manager.
func (m *Manager) deleteRemoteOf(p *Partition, tier *storage.Tier, done func()) {
	m.goOwned(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, remoteDeleteTimeout)
		defer cancel()
		if err := tier.DeleteAll(ctx); err != nil {
			m.log.Warn("deleting a partition's remote objects", "topic", p.Topic, "partition", p.Index, "err", err)
		}
		if done != nil {
			done()
		}
	})
}
