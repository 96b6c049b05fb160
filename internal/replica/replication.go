package replica

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
)

// Replication errors.
var (
	// ErrNotEnoughReplicasAfterAppend: acks=all, the batch was appended and the
	// high-water mark passed it, but the ISR is below min.insync.replicas by
	// the time the wait ends (below it the high-water mark does not move, so
	// a batch appended before the ISR shrank usually times out instead).
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND; the producer retries (idempotence dedups).
	ErrNotEnoughReplicasAfterAppend = errors.New("not enough in-sync replicas after append")
	// ErrNotReplica: a replica fetch from a broker that is not a replica of the
	// partition. NOT_LEADER_OR_FOLLOWER.
	ErrNotReplica = errors.New("fetching broker is not a replica")
	// ErrOffsetMovedToTieredStorage: a replica fetch below a tiered leader's
	// local log start but not below the partition's (KIP-405). The follower
	// starts over at the leader's local start (ListOffsets earliest-local).
	// OFFSET_MOVED_TO_TIERED_STORAGE.
	ErrOffsetMovedToTieredStorage = errors.New("offset moved to tiered storage")
)

// Diverging tells a follower where its log diverges from the leader's
// (KIP-320/595): truncate to EndOffset (or less) and fetch again.
type Diverging struct {
	Epoch     int32
	EndOffset int64
}

// applyState brings the partition's role and replica set in line with the image.
// It reports whether this broker should fetch from a leader (and which).
func (p *Partition) applyState(ip *metadata.Partition, now time.Time) (followLeader int32, err error) {
	if ip.Leader == p.localID {
		if !p.leader.Load() || p.leaderEpoch.Load() != ip.LeaderEpoch {
			return metadata.NoLeader, p.becomeLeader(ip, now)
		}
		p.updateReplicaSet(ip, now)
		return metadata.NoLeader, nil
	}
	p.becomeFollower(ip)
	return ip.Leader, nil
}

// becomeLeader makes this broker the leader at ip's epoch.
// A failed log still takes the role, so that it can hand it on (resignIfFailed).
func (p *Partition) becomeLeader(ip *metadata.Partition, now time.Time) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	start := p.log.LogEndOffset()
	if err := p.log.AssignEpoch(ip.LeaderEpoch, start); err != nil && p.log.Err() == nil {
		return err
	}
	// Verifications begun under another broker's leadership may have missed
	// markers written there. Leading on at the next epoch (a reassignment
	// removed a follower), this broker wrote every marker itself: a
	// transactional produce being verified goes on.
	if !p.leader.Load() || ip.LeaderEpoch != p.leaderEpoch.Load()+1 {
		clear(p.verifications)
	}
	p.takeLeadership(ip, start, now)
	p.fire()
	p.fireAppend()
	p.resignIfFailed()
	return nil
}

// takeLeadership sets the leader's state at ip's epoch, begun at offset start.
func (p *Partition) takeLeadership(ip *metadata.Partition, start int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.leader = true
	p.mu.leaderID = p.localID
	p.mu.leaderEpoch = ip.LeaderEpoch
	p.mu.epochStart = start
	p.mu.set = newTracker(p.localID, ip.PartitionEpoch, ip.Replicas, ip.ISR, true, now)
	p.mu.isrPending = false
	p.mu.resignBackoff = 0
	p.publishLocked()
	p.maybeAdvanceHighWatermarkLocked()
}

// publishLocked publishes the role, the epoch and the ISR sizes; mu must be held.
func (p *Partition) publishLocked() {
	p.leaderEpoch.Store(p.mu.leaderEpoch)
	p.isrSize.Store(int32(len(p.mu.set.isr)))
	p.maximalISRSize.Store(int32(p.mu.set.maximalISRSize()))
	p.replicaCount.Store(int32(len(p.mu.set.replicas)))
	p.leader.Store(p.mu.leader)
}

// becomeFollower makes this broker a follower (or leaderless replica) at ip's
// epoch. It waits for an append under way as leader: that append must finish
// under the leadership it was checked against, stamped with its epoch, or the
// batch would carry the new leader's epoch and hide from the divergence check
// that truncates what a deposed leader wrote (TestAppendRacingBecomeFollower).
func (p *Partition) becomeFollower(ip *metadata.Partition) {
	if p.takeFollowing(ip) {
		p.fire() // acks=all waiters and fetches find out at once
		p.fireAppend()
	}
}

// takeFollowing sets the follower's state at ip's epoch; it reports whether
// this broker led before.
func (p *Partition) takeFollowing(ip *metadata.Partition) (wasLeader bool) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	wasLeader = p.mu.leader
	p.mu.leader = false
	p.mu.leaderID = ip.Leader
	p.mu.leaderEpoch = ip.LeaderEpoch
	p.mu.set = newTracker(p.localID, ip.PartitionEpoch, ip.Replicas, ip.ISR, false, time.Time{})
	p.mu.isrPending = false
	p.publishLocked()
	return wasLeader
}

// updateReplicaSet takes a newer ISR and replica set from the image while
// leadership is unchanged (tracker.update).
func (p *Partition) updateReplicaSet(ip *metadata.Partition, now time.Time) {
	if p.updateReplicaSetWithLock(ip, now) {
		p.fire()
	}
}

// updateReplicaSetWithLock is updateReplicaSetLocked taking mu.
func (p *Partition) updateReplicaSetWithLock(ip *metadata.Partition, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.updateReplicaSetLocked(ip, now)
}

// updateReplicaSetLocked is updateReplicaSet with mu held; it reports whether
// the HWM moved.
func (p *Partition) updateReplicaSetLocked(ip *metadata.Partition, now time.Time) bool {
	if p.mu.set.update(ip.PartitionEpoch, ip.Replicas, ip.ISR, now) {
		p.publishLocked()
	}
	return p.maybeAdvanceHighWatermarkLocked()
}

// ISR returns the in-sync replicas as this broker knows them.
func (p *Partition) ISR() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.set.isr)
}

// FollowerFetch is the leader's answer to a follower's fetch.
type FollowerFetch struct {
	Chunk          storage.Chunk // release after sending
	HighWatermark  int64
	LogStartOffset int64
	Diverging      *Diverging
}

// FollowerFetchRequest is one partition of a follower's fetch.
type FollowerFetchRequest struct {
	ReplicaID int32
	// BrokerEpoch is the follower's broker epoch (Fetch v15+, KIP-903; -1:
	// none): a fetch of another registration than the one this broker's image
	// holds earns no place in the ISR.
	BrokerEpoch int64
	// LeaderEpoch is the leader epoch the follower fetches at
	// (CurrentLeaderEpoch; -1: not checked).
	LeaderEpoch int32
	FetchOffset int64
	// LogStartOffset is where the follower's log starts (Fetch v5+; -1: not
	// known): the leader points consumers at it only for offsets it holds.
	LogStartOffset int64
	// LastFetchedEpoch is the epoch of the follower's last batch (Fetch v12+;
	// -1: not known).
	LastFetchedEpoch int32
	MaxBytes         int
}

// Diverging tells a reader fetching at fetchOffset after a batch of
// lastFetchedEpoch (Fetch v12+, KIP-320) where its log split from this
// replica's, or nil when it did not (or names no epoch); a consumer is told
// as a follower is, and reads nothing until it moves back.
func (p *Partition) Diverging(lastFetchedEpoch int32, fetchOffset int64) *Diverging {
	return divergence(lastFetchedEpoch, fetchOffset, p.log.EndOffsetForEpoch)
}

// ReadForFollower serves a replica fetch: it checks the follower's view of the log
// against the leader's (divergence by epoch), records the follower's progress
// (which may advance the HWM or earn it a place in the ISR), and reads from
// the fetch offset up to the log end.
//
// The progress counts only at the leader epoch the fetch names, checked under
// the same lock that records it: a replica removed and added back moves the
// epoch on (the controller's endReassignment), so a fetch its removed
// incarnation sent, long-polling here while it was added back, is fenced and
// never credits the new, empty replica with the old one's log end.
func (p *Partition) ReadForFollower(req FollowerFetchRequest, now time.Time) (FollowerFetch, error) {
	if !p.IsLeader() {
		return FollowerFetch{}, ErrNotLeader
	}
	res := FollowerFetch{LogStartOffset: p.log.LogStartOffset()}
	if d := divergence(req.LastFetchedEpoch, req.FetchOffset, p.log.EndOffsetForEpoch); d != nil {
		res.HighWatermark = p.HighWatermark()
		res.Diverging = d
		return res, nil
	}
	leo := p.log.LogEndOffset()
	if req.FetchOffset < res.LogStartOffset {
		if err := p.checkRemoteFetch(req, &res); err != nil {
			return res, err
		}
	}
	if req.FetchOffset < res.LogStartOffset || req.FetchOffset > leo {
		res.HighWatermark = p.HighWatermark()
		return res, fmt.Errorf("%w: follower %d at %d, log is [%d, %d)", storage.ErrOffsetOutOfRange, req.ReplicaID, req.FetchOffset, res.LogStartOffset, leo)
	}
	if err := p.recordFollower(req, leo, now); err != nil {
		return res, err
	}
	// Past the range check, the partition's log start (an out-of-range
	// follower restarts at the local start above: it holds only the local
	// part).
	res.LogStartOffset = p.FetchLogStart(true)
	res.HighWatermark = p.HighWatermark()
	if req.FetchOffset == leo {
		return res, nil
	}
	chunk, err := p.log.Read(req.FetchOffset, req.MaxBytes, leo)
	if err != nil {
		return res, err
	}
	res.Chunk = chunk
	return res, nil
}

// checkRemoteFetch answers a follower fetch below the local log start of a
// tiered partition: ErrOffsetMovedToTieredStorage, with the high-water mark
// and the partition's log start in res, when the offset is in the remote
// part (Kafka's ReplicaManager.handleOffsetOutOfRangeError); nil when it is
// below the partition's start too, or the partition is not tiered. The
// tier's manifest is read first if it has not been.
func (p *Partition) checkRemoteFetch(req FollowerFetchRequest, res *FollowerFetch) error {
	if p.tier.Load() == nil {
		return nil
	}
	start, err := p.ReadableLogStart()
	if err != nil {
		return err
	}
	if req.FetchOffset < start {
		return nil
	}
	res.LogStartOffset, res.HighWatermark = start, p.HighWatermark()
	return fmt.Errorf("%w: follower %d at %d, the local log starts at %d", ErrOffsetMovedToTieredStorage, req.ReplicaID, req.FetchOffset, p.log.LogStartOffset())
}

// FetchLogStart is the log start offset a fetch answer carries: the
// partition's, below the local log's for a tiered partition. A follower
// moves its own log start up to it (followLogStart), so to a follower
// (follower true) a tier that has not loaded its manifest answers -1, which
// moves nothing: its local start would drop records the store still holds.
func (p *Partition) FetchLogStart(follower bool) int64 {
	tier := p.tier.Load()
	switch {
	case tier == nil:
		return p.log.LogStartOffset()
	case follower && !tier.Loaded():
		return -1
	default:
		return tier.LogStartOffset()
	}
}

// CheckLeaderEpoch fences a request whose view of the leader epoch differs
// (KIP-320): older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1
// skips the check.
func (p *Partition) CheckLeaderEpoch(epoch int32) error {
	return leaderEpochMismatch(epoch, p.LeaderEpoch())
}

// leaderEpochMismatch is CheckLeaderEpoch against the replica's epoch cur.
func leaderEpochMismatch(epoch, cur int32) error {
	switch {
	case epoch == -1 || epoch == cur:
		return nil
	case epoch < cur:
		return fmt.Errorf("%w: %d, the partition is at %d", metadata.ErrFencedLeaderEpoch, epoch, cur)
	default:
		return fmt.Errorf("%w: %d, the partition is at %d", metadata.ErrUnknownLeaderEpoch, epoch, cur)
	}
}

// recordFollower notes a follower's fetch, advances the high-water mark, and
// proposes adding the follower to the ISR when it has caught up and is
// eligible (isrEligible, with the broker epoch its fetch carried).
func (p *Partition) recordFollower(req FollowerFetchRequest, leo int64, now time.Time) error {
	inSync, moved, err := p.noteFollowerFetch(req, leo, now)
	if err != nil {
		return err
	}
	if inSync {
		if moved {
			p.fire()
		}
		return nil
	}
	defer p.maybeAdvanceHighWatermark()
	if p.isrEligible != nil && !p.isrEligible(req.ReplicaID, req.BrokerEpoch) {
		return nil // a later fetch proposes it once the image says it is live
	}
	p.proposeISR("expand", func() []int32 {
		return p.mu.set.proposeExpansion(req.ReplicaID, p.highWatermark.Load(), p.mu.epochStart)
	})
	return nil
}

// noteFollowerFetch records a follower's fetch in the replica set and, when the
// follower is in sync (the usual case: nothing to propose, one lock for both),
// advances the high-water mark; moved reports that it did.
func (p *Partition) noteFollowerFetch(req FollowerFetchRequest, leo int64, now time.Time) (inSync, moved bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.leader {
		return false, false, ErrNotLeader
	}
	if err := leaderEpochMismatch(req.LeaderEpoch, p.mu.leaderEpoch); err != nil {
		return false, false, err
	}
	inSync, err = p.mu.set.fetched(req.ReplicaID, req.FetchOffset, req.LogStartOffset, leo, now)
	p.mu.set.noteBrokerEpoch(req.ReplicaID, req.BrokerEpoch)
	if err != nil {
		return false, false, err
	}
	if inSync {
		moved = p.maybeAdvanceHighWatermarkLocked()
	}
	return inSync, moved, nil
}

// epochStartOffset is where this broker's current leadership began (its log end
// when it became leader, as Kafka's leaderEpochStartOffset): a follower joins the
// ISR only once it has everything from before, and ListOffsets waits for the HWM
// to reach it.
func (p *Partition) epochStartOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.epochStart
}

// maybeShrinkISR proposes removing followers that have not caught up within maxLag.
func (p *Partition) maybeShrinkISR(now time.Time, maxLag time.Duration) {
	if !p.IsLeader() {
		return
	}
	p.proposeISR("shrink", func() []int32 { return p.mu.set.shrinkISR(now, maxLag) })
}

// retryExpansion proposes again an expansion whose outcome is unknown (its
// AlterPartition failed without a refusal): the controller's answer, or the
// newer partition state it points to, resolves it, so that a follower that
// stopped fetching meanwhile does not hold the high-water mark for good.
func (p *Partition) retryExpansion() {
	if !p.IsLeader() {
		return
	}
	p.proposeISR("expand (retry)", func() []int32 { return p.mu.set.unresolvedExpansion() })
}

// resignIfFailed asks the controller to move leadership away when this leader's
// log has failed (fail-stop until the broker restarts): it proposes the ISR
// without itself, and the controller elects the next in-sync replica. As the
// only in-sync replica it stays, answering KAFKA_STORAGE_ERROR: no other copy
// holds every acknowledged record. A proposal that did not move leadership is
// proposed again soon (scheduleResign), and by the ISR maintenance.
func (p *Partition) resignIfFailed() {
	if !p.IsLeader() || p.log.Err() == nil {
		return
	}
	p.proposeISR("resign: log failed", func() []int32 { return resignISR(p.mu.set.isr, p.localID) })
}

// proposeISR hands an ISR change to the manager's proposer, one at a time. next
// computes the proposed ISR with mu held, so that the ISR and the partition
// epoch the proposal is based on agree; nil proposes nothing.
func (p *Partition) proposeISR(why string, next func() []int32) {
	if req, ok := p.nextISRChange(why, next); ok {
		p.isrProposer(req)
	}
}

// nextISRChange is the proposal proposeISR makes, marked pending; false when
// there is none to make.
func (p *Partition) nextISRChange(why string, next func() []int32) (isrChange, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.isrPending || p.isrProposer == nil || !p.mu.leader {
		return isrChange{}, false
	}
	isr := next()
	if isr == nil {
		return isrChange{}, false
	}
	p.mu.isrPending = true
	p.publishLocked() // an expansion counts in the maximal ISR from now on
	return isrChange{p: p, isr: isr, brokerEpochs: p.mu.set.brokerEpochs(isr), why: why, leaderEpoch: p.mu.leaderEpoch, partitionEpoch: p.mu.set.partitionEpoch}, true
}

// isrChange is one AlterPartition proposal.
type isrChange struct {
	p   *Partition
	isr []int32
	// brokerEpochs: of each member of isr, as its last fetch carried it (-1:
	// this broker, or not known).
	brokerEpochs                []int64
	why                         string
	leaderEpoch, partitionEpoch int32
}

// isrChangeDone applies the controller's answer to a proposal (nil: failed),
// if this broker still leads at the epoch the proposal was made at. refused
// reports that the controller refused it without applying it: only then does
// the follower an expansion adds stop counting towards the high-water mark.
func (p *Partition) isrChangeDone(c isrChange, ip *metadata.Partition, refused bool, now time.Time) {
	if p.applyISRChange(c, ip, refused, now) {
		p.fire()
	}
	if ip == nil || ip.Leader == p.localID {
		p.scheduleResign()
	}
}

// Bounds of the wait before a failed log's leader proposes its resignation
// again, doubling from the first to the second while proposals go unapplied.
// Without it the next try waited for the ISR maintenance, half the replica lag
// limit (15 s by default): a resignation refused with NOT_CONTROLLER while the
// controller quorum elected a leader kept the partition on the failed log, each
// produce answered KAFKA_STORAGE_ERROR, that long.
const (
	resignRetryFirst = 100 * time.Millisecond
	resignRetryMax   = 2 * time.Second
)

// scheduleResign arranges one retry of resignIfFailed after the backoff, if this
// broker still leads on a failed log once an ISR change is over: the change
// was the resignation and the controller did not apply it, or another change
// was in flight when the log failed and the resignation could not be proposed.
func (p *Partition) scheduleResign() {
	if !p.IsLeader() || p.log.Err() == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.resignRetry != nil || !p.mu.leader || p.closed.Load() { // close sets closed, then stops a retry under mu
		return
	}
	p.mu.resignBackoff = min(max(2*p.mu.resignBackoff, resignRetryFirst), resignRetryMax)
	p.mu.resignRetry = time.AfterFunc(p.mu.resignBackoff, func() {
		p.mu.Lock()
		p.mu.resignRetry = nil
		p.mu.Unlock()
		p.resignIfFailed()
	})
}

// stopResignRetry cancels a pending retry of the resignation (the partition
// closes).
func (p *Partition) stopResignRetry() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.resignRetry != nil {
		p.mu.resignRetry.Stop()
		p.mu.resignRetry = nil
	}
}

// applyISRChange is isrChangeDone's change of state; it reports whether the
// high-water mark moved.
func (p *Partition) applyISRChange(c isrChange, ip *metadata.Partition, refused bool, now time.Time) (moved bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.leaderEpoch != p.mu.leaderEpoch {
		// Proposed under an earlier leadership: taking this one cleared the
		// flag, which may now mark a proposal of this epoch still in flight.
		return false
	}
	p.mu.isrPending = false
	if !p.mu.leader || p.closed.Load() {
		return false
	}
	switch {
	case ip != nil:
		if ip.LeaderEpoch == p.mu.leaderEpoch {
			return p.updateReplicaSetLocked(ip, now)
		}
	case refused && c.partitionEpoch == p.mu.set.partitionEpoch:
		for _, id := range c.isr {
			if !slices.Contains(p.mu.set.isr, id) {
				p.mu.set.expansionRefused(id)
			}
		}
		p.publishLocked()
		return p.maybeAdvanceHighWatermarkLocked()
	}
	return false
}

// fetchPosition is where this follower fetches next: its log end, which is durable
// (the fetcher waits for that before fetching again), and the epoch of its last batch.
//
// It waits for a truncation or an append in progress: one begun under the
// previous leader epoch may still be changing the log after the epoch moved
// on, and a fetch must not report a log end that is about to go.
func (p *Partition) fetchPosition() (offset int64, lastFetchedEpoch int32) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.log.LogEndOffset(), p.log.LatestEpoch()
}

// followingFrom reports whether this replica still follows at leader epoch
// epoch with its log ending at from, the fetch offset of the answer it is
// about to apply: an answer to a fetch from another log end (the log was
// truncated since, under an earlier leader epoch) must not change the log.
// appendMu must be held.
func (p *Partition) followingFrom(epoch int32, from int64) bool {
	return p.followingAt(epoch) && p.log.LogEndOffset() == from
}

// followingAt reports whether this replica still follows at leader epoch epoch:
// a fetch answer from an earlier leadership must not change its log (it may lead
// by now, with a new epoch at its log end). appendMu must be held, which
// becomeLeader holds too.
func (p *Partition) followingAt(epoch int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.mu.leader && p.mu.leaderEpoch == epoch
}

// appendFromLeader appends batches fetched from offset from of the leader of
// epoch, and follows its HWM.
func (p *Partition) appendFromLeader(epoch int32, from int64, records []byte, leaderHWM int64) error {
	if len(records) > 0 {
		if following, err := p.appendAsFollower(epoch, from, records); err != nil || !following {
			return err
		}
	}
	p.followHighWatermark(leaderHWM)
	return nil
}

// appendAsFollower appends batches fetched from offset from of the leader of
// epoch, unless this replica no longer follows at epoch from there (following
// false: followingFrom).
func (p *Partition) appendAsFollower(epoch int32, from int64, records []byte) (following bool, err error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingFrom(epoch, from) {
		return false, nil
	}
	// The leader's log start falls inside the first batch (DeleteRecords cuts
	// between records), and this log holds nothing yet: it starts at the
	// batch, as Kafka's follower does, and then follows the leader's log
	// start (followLogStart). A log that holds records never takes a batch
	// that begins below its end.
	if h, err := batch.ParseHeader(records); err == nil && from == p.log.LogStartOffset() && h.BaseOffset < from && h.LastOffset() >= from {
		if err := p.startAtLocked(h.BaseOffset); err != nil {
			return true, err
		}
	}
	if _, err := p.log.AppendAsFollower(records); err != nil {
		return true, err
	}
	// Stored batches may be compacted (fewer records than offsets).
	// The log checked their CRCs as it appended them.
	it := batch.NewValidatedStoredIter(records)
	for it.Next() {
		h := it.Header()
		if h.Idempotent() && !h.Control() {
			p.producers.record(h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastOffsetDelta+1, h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
		}
	}
	err = p.observeTxns(records)
	p.maybeSnapshot()
	return true, err
}

// followHighWatermark sets a follower's HWM to the leader's, capped by what it has.
func (p *Partition) followHighWatermark(leaderHWM int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader {
		return
	}
	if p.setHighWatermarkLocked(followerHighWatermark(p.highWatermark.Load(), leaderHWM, p.log.LogEndOffset())) {
		p.fire() // consumers fetching from this follower (KIP-392)
	}
}

// applyDiverging truncates this follower where its log diverges from that of
// the leader of epoch (truncationOffset), answering a fetch from offset from.
func (p *Partition) applyDiverging(epoch int32, from int64, d Diverging) (int64, error) {
	end := truncationOffset(d, p.log.EndOffsetForEpoch)
	return end, p.truncateTo(epoch, from, end)
}

// applyOutOfRange handles the leader's OFFSET_OUT_OF_RANGE answer to this
// follower's fetch from offset from (outOfRange) and says what it did: started
// over at to, or truncated to it.
func (p *Partition) applyOutOfRange(epoch int32, from, leaderLogStart, leaderHWM int64) (restart bool, to int64, err error) {
	restart, to = outOfRange(from, leaderLogStart, leaderHWM, p.log.LogStartOffset())
	if restart {
		return restart, to, p.restartAt(epoch, from, restartState{start: to})
	}
	return restart, to, p.truncateTo(epoch, from, to)
}

// truncateTo removes this follower's records at and above offset (a divergent tail)
// and the leader epochs that start there, even when no record goes: a replica
// deposed before it appended at its epoch must stop fetching with that epoch.
// Nothing changes unless it still follows at epoch from log end from, the
// fetch offset of the answer that asks for the truncation (followingFrom).
func (p *Partition) truncateTo(epoch int32, from, offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingFrom(epoch, from) {
		return nil
	}
	leo := p.log.LogEndOffset()
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	if offset < leo {
		// Producers' batches and transaction markers went: rebuild both from what
		// is left (a removed marker reopens its transaction).
		if err := p.rebuildProducerState(); err != nil {
			return err
		}
	}
	p.lowerHighWatermarkTo(offset)
	return nil
}

// lowerHighWatermarkTo moves the high-water mark down to offset when it is
// above (a follower's truncated tail).
func (p *Partition) lowerHighWatermarkTo(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.highWatermark.Load() > offset {
		p.setHighWatermarkLocked(offset)
	}
}

// restartState is where a follower starts over and the producer and
// transaction state it starts with (nil: none; lost, when set, says why the
// state that should have been restored was not).
type restartState struct {
	start     int64
	producers *producerState
	txns      *txnState
	lost      error
}

// restartAt empties this follower's log and starts it at r.start (the leader's
// log start, or local log start, moved past everything the follower has), with
// r's producer state, which it stores as a snapshot there, so that a restart
// finds it (as Kafka's follower writes the snapshot it restores into its log
// directory).
func (p *Partition) restartAt(epoch int32, from int64, r restartState) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingFrom(epoch, from) {
		return nil
	}
	if err := p.startAtLocked(r.start); err != nil {
		return err
	}
	if r.producers != nil {
		p.producers = r.producers
		p.setTxns(r.txns)
		p.writeSnapshot()
	}
	return nil
}

// startAtLocked empties the log and starts it at offset, with no producer or
// transaction state; appendMu must be held.
func (p *Partition) startAtLocked(offset int64) error {
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.producers = newProducerState()
	p.snapshotOffset = -1
	p.setTxns(newTxnState())
	p.setHighWatermark(offset)
	return nil
}

// followLogStart moves this follower's log start offset up to its leader's of
// epoch, as far as its own high-water mark, as Kafka's followers do: records
// deleted on the leader (DeleteRecords, retention) do not come back when this
// replica leads, nor reach a consumer reading from it (KIP-392). Of a tiered
// partition the leader sends the partition's start, remote part included
// (ReadForFollower), so only records deleted everywhere leave the local log.
func (p *Partition) followLogStart(epoch int32, leaderLogStart int64) error {
	if leaderLogStart <= p.log.LogStartOffset() {
		return nil
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingAt(epoch) {
		return nil
	}
	if start := min(leaderLogStart, p.HighWatermark()); start > p.log.LogStartOffset() {
		return p.log.DeleteRecords(start)
	}
	return nil
}

// setHighWatermark publishes hwm, taking mu.
func (p *Partition) setHighWatermark(hwm int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setHighWatermarkLocked(hwm)
}

// WatchAppends registers w to be woken on every append (a follower's long poll).
func (p *Partition) WatchAppends(w *Watcher) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	put(&p.leoWatchers, w, struct{}{})
}

// UnwatchAppends removes w.
func (p *Partition) UnwatchAppends(w *Watcher) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	delete(p.leoWatchers, w)
}

func (p *Partition) fireAppend() {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	for w := range p.leoWatchers {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
}
