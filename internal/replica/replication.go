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
	// ErrNotEnoughReplicasAfterAppend: acks=all, the batch was appended, but the ISR
	// shrank below min.insync.replicas before it was committed.
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND; the producer retries (idempotence dedups).
	ErrNotEnoughReplicasAfterAppend = errors.New("not enough in-sync replicas after append")
	// ErrNotReplica: a replica fetch from a broker that is not a replica of the
	// partition. NOT_LEADER_OR_FOLLOWER.
	ErrNotReplica = errors.New("fetching broker is not a replica")
)

// followerState is a leader's view of one follower.
type followerState struct {
	// logEnd is the follower's last fetch offset: followers fetch only once what
	// they hold is durable, so everything below it is on the follower's disk.
	logEnd int64
	// lastCaughtUp is the last time the follower had everything the leader had
	// (Kafka's lastCaughtUpTimeMs): a fetch at the leader's log end, or at the log
	// end the leader had at the follower's previous fetch.
	lastCaughtUp    time.Time
	lastFetch       time.Time
	leaderEndAtLast int64
}

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
		p.updateReplicaSet(ip)
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
	p.epochStart.Store(start)
	p.mu.Lock()
	p.mu.leaderID = p.localID
	p.mu.partitionEpoch = ip.PartitionEpoch
	p.mu.replicas = slices.Clone(ip.Replicas)
	p.mu.isr = slices.Clone(ip.ISR)
	p.mu.isrPending = false
	p.mu.followers = make(map[int32]*followerState)
	for _, id := range ip.Replicas {
		if id != p.localID {
			// Unknown until it fetches; it has a full lag period to do so.
			p.mu.followers[id] = &followerState{logEnd: -1, lastCaughtUp: now, leaderEndAtLast: -1}
		}
	}
	p.mu.Unlock()
	p.leaderEpoch.Store(ip.LeaderEpoch)
	p.isrSize.Store(int32(len(ip.ISR)))
	p.leader.Store(true)
	p.maybeAdvanceHighWatermark()
	p.fire()
	p.fireAppend()
	p.resignIfFailed()
	return nil
}

// becomeFollower makes this broker a follower (or leaderless replica) at ip's epoch.
func (p *Partition) becomeFollower(ip *metadata.Partition) {
	p.mu.Lock()
	p.mu.leaderID = ip.Leader
	p.mu.partitionEpoch = ip.PartitionEpoch
	p.mu.replicas = slices.Clone(ip.Replicas)
	p.mu.isr = slices.Clone(ip.ISR)
	p.mu.followers = nil
	p.mu.isrPending = false
	p.mu.Unlock()
	p.leaderEpoch.Store(ip.LeaderEpoch)
	p.isrSize.Store(int32(len(ip.ISR)))
	wasLeader := p.leader.Swap(false)
	if wasLeader {
		p.fire() // acks=all waiters and fetches find out at once
		p.fireAppend()
	}
}

// updateReplicaSet takes a newer ISR and replica set from the image while
// leadership is unchanged: replicas a reassignment adds are tracked as
// followers from now on, replicas it removed no longer. An AlterPartition
// answer from another node carries no replica set (nil): the replicas stay.
func (p *Partition) updateReplicaSet(ip *metadata.Partition) {
	p.mu.Lock()
	if ip.PartitionEpoch >= p.mu.partitionEpoch {
		p.mu.partitionEpoch = ip.PartitionEpoch
		p.mu.isr = slices.Clone(ip.ISR)
		if ip.Replicas != nil {
			p.mu.replicas = slices.Clone(ip.Replicas)
			for _, id := range ip.Replicas {
				if id != p.localID && p.mu.followers[id] == nil {
					p.mu.followers[id] = &followerState{logEnd: -1, lastCaughtUp: time.Now(), leaderEndAtLast: -1}
				}
			}
			for id := range p.mu.followers {
				if !slices.Contains(ip.Replicas, id) {
					delete(p.mu.followers, id) // its fetches get ErrNotReplica
				}
			}
		}
		p.isrSize.Store(int32(len(ip.ISR)))
	}
	p.mu.Unlock()
	p.maybeAdvanceHighWatermark()
}

// ISR returns the in-sync replicas as this broker knows them.
func (p *Partition) ISR() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.isr)
}

// FollowerFetch is the leader's answer to a follower's fetch.
type FollowerFetch struct {
	Chunk          storage.Chunk // release after sending
	HighWatermark  int64
	LogStartOffset int64
	Diverging      *Diverging
}

// ReadForFollower serves a replica fetch: it checks the follower's view of the log
// against the leader's (divergence by epoch), records the follower's progress
// (which may advance the HWM or earn it a place in the ISR), and reads from
// fetchOffset up to the log end.
func (p *Partition) ReadForFollower(replicaID int32, fetchOffset int64, lastFetchedEpoch int32, maxBytes int, now time.Time) (FollowerFetch, error) {
	if !p.IsLeader() {
		return FollowerFetch{}, ErrNotLeader
	}
	res := FollowerFetch{LogStartOffset: p.log.LogStartOffset()}
	if lastFetchedEpoch >= 0 {
		e, end := p.log.EndOffsetForEpoch(lastFetchedEpoch)
		if e != lastFetchedEpoch || end < fetchOffset {
			res.HighWatermark = p.HighWatermark()
			res.Diverging = &Diverging{Epoch: e, EndOffset: end}
			return res, nil
		}
	}
	leo := p.log.LogEndOffset()
	if fetchOffset < res.LogStartOffset || fetchOffset > leo {
		res.HighWatermark = p.HighWatermark()
		return res, fmt.Errorf("%w: follower %d at %d, log is [%d, %d)", storage.ErrOffsetOutOfRange, replicaID, fetchOffset, res.LogStartOffset, leo)
	}
	if err := p.recordFollower(replicaID, fetchOffset, leo, now); err != nil {
		return res, err
	}
	p.maybeAdvanceHighWatermark()
	res.HighWatermark = p.HighWatermark()
	if fetchOffset == leo {
		return res, nil
	}
	chunk, err := p.log.Read(fetchOffset, maxBytes, leo)
	if err != nil {
		return res, err
	}
	res.Chunk = chunk
	return res, nil
}

// recordFollower notes a follower's fetch and proposes adding it to the ISR when
// it has caught up.
func (p *Partition) recordFollower(id int32, fetchOffset, leo int64, now time.Time) error {
	p.mu.Lock()
	f := p.mu.followers[id]
	if f == nil {
		p.mu.Unlock()
		return fmt.Errorf("%w: broker %d", ErrNotReplica, id)
	}
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case f.leaderEndAtLast >= 0 && fetchOffset >= f.leaderEndAtLast:
		f.lastCaughtUp = f.lastFetch
	}
	f.logEnd, f.lastFetch, f.leaderEndAtLast = fetchOffset, now, leo
	inSync := slices.Contains(p.mu.isr, id) // the usual case: nothing to propose
	p.mu.Unlock()
	if inSync {
		return nil
	}
	p.proposeISR("expand", func(isr []int32) []int32 {
		if slices.Contains(isr, id) || fetchOffset < p.HighWatermark() || fetchOffset < p.epochStartOffset() {
			return nil
		}
		return slices.Sorted(slices.Values(append(slices.Clone(isr), id)))
	})
	return nil
}

// epochStartOffset is where this broker's current leadership began (its log end
// when it became leader, as Kafka's leaderEpochStartOffset): a follower joins the
// ISR only once it has everything from before, and ListOffsets waits for the HWM
// to reach it.
func (p *Partition) epochStartOffset() int64 { return p.epochStart.Load() }

// maybeShrinkISR proposes removing followers that have not caught up within maxLag.
func (p *Partition) maybeShrinkISR(now time.Time, maxLag time.Duration) {
	if !p.IsLeader() {
		return
	}
	p.proposeISR("shrink", func(isr []int32) []int32 {
		var keep []int32
		for _, id := range isr {
			if f := p.mu.followers[id]; id != p.localID && f != nil && now.Sub(f.lastCaughtUp) > maxLag {
				continue
			}
			keep = append(keep, id)
		}
		if len(keep) == len(isr) {
			return nil
		}
		return keep
	})
}

// resignIfFailed asks the controller to move leadership away when this leader's
// log has failed (fail-stop until the broker restarts): it proposes the ISR
// without itself, and the controller elects the next in-sync replica. As the
// only in-sync replica it stays, answering KAFKA_STORAGE_ERROR: no other copy
// holds every acknowledged record. A refused proposal is retried by the ISR
// maintenance.
func (p *Partition) resignIfFailed() {
	if !p.IsLeader() || p.log.Err() == nil {
		return
	}
	p.proposeISR("resign: log failed", func(isr []int32) []int32 {
		others := slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return id == p.localID })
		if len(others) == 0 {
			return nil
		}
		return others
	})
}

// proposeISR hands an ISR change to the manager's proposer, one at a time. next
// computes the proposed ISR from the current one, with p.mu held so that the ISR
// and the partition epoch the proposal is based on agree; nil proposes nothing.
func (p *Partition) proposeISR(why string, next func(isr []int32) []int32) {
	p.mu.Lock()
	if p.mu.isrPending || p.isrProposer == nil {
		p.mu.Unlock()
		return
	}
	isr := next(p.mu.isr)
	if isr == nil {
		p.mu.Unlock()
		return
	}
	p.mu.isrPending = true
	req := isrChange{p: p, isr: isr, why: why, leaderEpoch: p.leaderEpoch.Load(), partitionEpoch: p.mu.partitionEpoch}
	p.mu.Unlock()
	p.isrProposer(req)
}

// isrChange is one AlterPartition proposal.
type isrChange struct {
	p                           *Partition
	isr                         []int32
	why                         string
	leaderEpoch, partitionEpoch int32
}

// isrChangeDone applies the controller's answer to a proposal.
func (p *Partition) isrChangeDone(ip *metadata.Partition) {
	p.mu.Lock()
	p.mu.isrPending = false
	p.mu.Unlock()
	if ip != nil && ip.LeaderEpoch == p.leaderEpoch.Load() && p.IsLeader() {
		p.updateReplicaSet(ip)
	}
}

// fetchPosition is where this follower fetches next: its log end, which is durable
// (the fetcher waits for that before fetching again), and the epoch of its last batch.
func (p *Partition) fetchPosition() (offset int64, lastFetchedEpoch int32) {
	return p.log.LogEndOffset(), p.log.LatestEpoch()
}

// followingAt reports whether this replica still follows at leader epoch epoch:
// a fetch answer from an earlier leadership must not change its log (it may lead
// by now, with a new epoch at its log end). appendMu must be held, which
// becomeLeader holds too.
func (p *Partition) followingAt(epoch int32) bool {
	return !p.leader.Load() && p.leaderEpoch.Load() == epoch
}

// appendFromLeader appends batches fetched from the leader of epoch, and follows
// its HWM.
func (p *Partition) appendFromLeader(epoch int32, records []byte, leaderHWM int64) error {
	if len(records) > 0 {
		p.appendMu.Lock()
		if !p.followingAt(epoch) {
			p.appendMu.Unlock()
			return nil
		}
		_, err := p.log.AppendAsFollower(records)
		if err == nil {
			// Stored batches may be compacted (fewer records than offsets).
			it := batch.NewStoredIter(records)
			for it.Next() {
				h := it.Header()
				if h.Idempotent() && !h.Control() {
					p.producers.record(h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastOffsetDelta+1, h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
				}
			}
			p.observeTxns(records)
		}
		p.appendMu.Unlock()
		if err != nil {
			return err
		}
	}
	p.followHighWatermark(leaderHWM)
	return nil
}

// followHighWatermark sets a follower's HWM to the leader's, capped by what it has.
func (p *Partition) followHighWatermark(leaderHWM int64) {
	if p.leader.Load() {
		return
	}
	hwm := min(leaderHWM, p.log.LogEndOffset())
	if hwm > p.highWatermark.Load() {
		p.highWatermark.Store(hwm)
		p.fire() // consumers fetching from this follower (KIP-392)
	}
}

// truncateTo removes this follower's records at and above offset (a divergent tail)
// and the leader epochs that start there, even when no record goes: a replica
// deposed before it appended at its epoch must stop fetching with that epoch.
func (p *Partition) truncateTo(epoch int32, offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingAt(epoch) {
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
	if p.highWatermark.Load() > offset {
		p.highWatermark.Store(offset)
	}
	return nil
}

// restartAt empties this follower's log and starts it at offset (the leader's log
// start moved past everything the follower has).
func (p *Partition) restartAt(epoch int32, offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.followingAt(epoch) {
		return nil
	}
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.producers = newProducerState()
	p.txnMu.Lock()
	p.txns = newTxnState()
	p.txnMu.Unlock()
	p.highWatermark.Store(offset)
	return nil
}

// WatchAppends registers w to be woken on every append (a follower's long poll).
func (p *Partition) WatchAppends(w *Watcher) {
	p.watchMu.Lock()
	p.leoWatchers[w] = struct{}{}
	p.watchMu.Unlock()
}

// UnwatchAppends removes w.
func (p *Partition) UnwatchAppends(w *Watcher) {
	p.watchMu.Lock()
	delete(p.leoWatchers, w)
	p.watchMu.Unlock()
}

func (p *Partition) fireAppend() {
	p.watchMu.Lock()
	for w := range p.leoWatchers {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
	p.watchMu.Unlock()
}
