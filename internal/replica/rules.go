package replica

import (
	"fmt"
	"slices"
	"time"
)

// The replication rules, as pure functions over follower state: no locks, no
// logs, no clock of their own. Partition applies their decisions under its lock
// and does the I/O; testdata/rules/*.txt drive them step by step.

// followerState is a leader's view of one follower.
type followerState struct {
	// logEnd is the follower's last fetch offset: followers fetch only once what
	// they hold is durable, so everything below it is on the follower's disk.
	// -1 until the follower's first fetch under this leadership.
	logEnd int64
	// logStart is the log start offset its last fetch named, -1 if none.
	logStart int64
	// lastCaughtUp is the last time the follower had everything the leader had
	// (Kafka's lastCaughtUpTimeMs): a fetch at the leader's log end, or at the log
	// end the leader had at the follower's previous fetch.
	lastCaughtUp    time.Time
	lastFetch       time.Time
	leaderEndAtLast int64
	// brokerEpoch is the broker epoch its last fetch carried (KIP-903), -1 if
	// none; AlterPartition sends it for the controller to check.
	brokerEpoch int64
}

// newFollowerState is a follower not heard from yet: unknown until it fetches.
// An in-sync one has a full lag period from now to do so; any other has never
// caught up (as Kafka's leader resets a replica outside the ISR), so that it
// holds no high-water mark before it fetches what the leader has.
func newFollowerState(now time.Time, inSync bool) *followerState {
	f := &followerState{logEnd: -1, logStart: -1, leaderEndAtLast: -1, brokerEpoch: -1}
	if inSync {
		f.lastCaughtUp = now
	}
	return f
}

// caughtUp reports whether the follower has everything the leader has
// (leaderEnd), or had within maxLag of now: Kafka's isCaughtUp.
func (f *followerState) caughtUp(leaderEnd int64, now time.Time, maxLag time.Duration) bool {
	return f.logEnd == leaderEnd || now.Sub(f.lastCaughtUp) <= maxLag
}

// fetched records a follower's fetch at fetchOffset, its log starting at
// logStart, while the leader's log ends at leaderEnd.
func (f *followerState) fetched(fetchOffset, logStart, leaderEnd int64, now time.Time) {
	switch {
	case fetchOffset >= leaderEnd:
		f.lastCaughtUp = now
	case f.leaderEndAtLast >= 0 && fetchOffset >= f.leaderEndAtLast:
		// It has everything the leader had at its previous fetch.
		f.lastCaughtUp = f.lastFetch
	}
	f.logEnd, f.logStart, f.lastFetch, f.leaderEndAtLast = fetchOffset, logStart, now, leaderEnd
}

// tracker is a replica's view of a partition's replica set: the replicas and
// the ISR as last committed and the partition epoch they were committed at, and,
// while this broker leads, every other replica's progress. Its methods decide;
// they change nothing but the tracker.
//
// The leader's high-water mark counts one more member than the committed ISR
// while an expansion is unresolved (Kafka's maximal ISR, KIP-497): from the
// moment the leader proposes adding a follower until it learns that the
// controller committed a newer partition state (which holds the follower or
// tells the proposal was refused) or refused it outright. Otherwise the HWM
// could pass what the joining follower holds while the controller commits it,
// and the controller may make it leader at once (a reassignment completes in
// the same change): acknowledged records would be lost.
type tracker struct {
	localID        int32
	partitionEpoch int32
	replicas, isr  []int32
	followers      map[int32]*followerState // nil unless leading
	// adding is the follower an unresolved expansion adds (noReplica: none),
	// proposed at partition epoch addingBase.
	adding     int32
	addingBase int32
}

// noReplica marks the absence of a replica id.
const noReplica int32 = -1

// newTracker starts a view of replicas with isr at partitionEpoch; leading
// tracks the other replicas' progress from now on.
func newTracker(localID, partitionEpoch int32, replicas, isr []int32, leading bool, now time.Time) *tracker {
	t := &tracker{localID: localID, partitionEpoch: partitionEpoch, replicas: slices.Clone(replicas), isr: slices.Clone(isr), adding: noReplica}
	if leading {
		t.followers = map[int32]*followerState{}
		for _, id := range replicas {
			if id != localID {
				t.followers[id] = newFollowerState(now, slices.Contains(isr, id))
			}
		}
	}
	return t
}

// update takes a newer ISR (and replica set, unless nil: an AlterPartition
// answer carries none) committed at partitionEpoch while leadership is
// unchanged. Replicas a reassignment adds are tracked from now on, removed ones
// no longer. A partition epoch past the one an unresolved expansion was
// proposed at resolves it: the controller either committed it (the follower is
// in isr) or refuses it as stale. An older partition epoch changes nothing; it
// reports whether the update applied.
func (t *tracker) update(partitionEpoch int32, replicas, isr []int32, now time.Time) bool {
	if partitionEpoch < t.partitionEpoch {
		return false
	}
	t.partitionEpoch = partitionEpoch
	t.isr = slices.Clone(isr)
	if t.adding != noReplica && (partitionEpoch > t.addingBase || slices.Contains(isr, t.adding)) {
		t.adding = noReplica
	}
	if replicas != nil {
		t.replicas = slices.Clone(replicas)
		for _, id := range replicas {
			if t.followers != nil && id != t.localID && t.followers[id] == nil {
				t.followers[id] = newFollowerState(now, slices.Contains(isr, id))
			}
		}
		for id := range t.followers {
			if !slices.Contains(replicas, id) {
				delete(t.followers, id) // its fetches get ErrNotReplica
			}
		}
		if !slices.Contains(replicas, t.adding) {
			t.adding = noReplica
		}
	}
	return true
}

// proposeExpansion is the ISR with follower id added when it qualifies
// (expandISR) by the last fetch this view recorded of it, or nil. A proposal
// makes the HWM count the follower from now until it is resolved; while
// another follower's expansion is unresolved, none is proposed (it may have
// been committed, and only one unresolved member is counted).
//
// It reads the follower's progress here, not from the fetch that led to the
// proposal: under a leader epoch begun since that fetch was recorded, the
// view is new and has not heard from the follower (its log end is -1).
func (t *tracker) proposeExpansion(id int32, highWatermark, epochStart int64) []int32 {
	f := t.followers[id]
	if f == nil || (t.adding != noReplica && t.adding != id) {
		return nil
	}
	isr := expandISR(t.isr, id, f.logEnd, highWatermark, epochStart)
	if isr != nil {
		t.adding, t.addingBase = id, t.partitionEpoch
	}
	return isr
}

// expansionRefused resolves an unresolved expansion the controller refused
// without applying it (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED): the HWM
// stops counting the follower. Any other failure (a timeout, a lost answer, a
// stale epoch) leaves it counted, as the change may have been committed; a
// newer partition state (update) or a retried proposal resolves it.
func (t *tracker) expansionRefused(id int32) {
	if t.adding == id {
		t.adding = noReplica
	}
}

// unresolvedExpansion is the ISR an unresolved expansion proposed (to propose
// again), or nil.
func (t *tracker) unresolvedExpansion() []int32 {
	if t.adding == noReplica || slices.Contains(t.isr, t.adding) {
		return nil
	}
	return slices.Sorted(slices.Values(append(slices.Clone(t.isr), t.adding)))
}

// maximalISRSize is the size of the committed ISR with the follower an
// unresolved expansion adds (Kafka's maximal ISR).
func (t *tracker) maximalISRSize() int {
	if t.adding != noReplica && !slices.Contains(t.isr, t.adding) {
		return len(t.isr) + 1
	}
	return len(t.isr)
}

// leaderState is what the leader's high-water mark depends on besides the
// tracker.
type leaderState struct {
	// safeEnd is the end of what the leader holds durably, logEnd its log end.
	safeEnd, logEnd int64
	// minISR is min.insync.replicas.
	minISR int32
	now    time.Time
	// maxLag is replica.lag.time.max.ms.
	maxLag time.Duration
	// eligible reports whether a broker, fetching at a broker epoch, may join
	// an ISR (KIP-841); nil: every broker may.
	eligible func(id int32, brokerEpoch int64) bool
}

// highWatermark is the minimum of what each member holds durably (the
// leader's safe end, each follower's last fetch offset) over the ISR, the
// follower an unresolved expansion adds, and every follower outside the ISR
// that is caught up (caughtUp) and eligible to join it: as Kafka's leader, it
// waits for such a follower, which then reaches the high-water mark and joins
// although producers keep the leader's log end moving. A member that has not
// fetched yet (-1) holds the high-water mark at or below -1, so it never rises
// past what an in-sync follower was not yet seen to hold. While the committed
// ISR is below min.insync.replicas (underMinISR) it is -1: the high-water mark
// stays where it is, as Kafka's leader holds it (KAFKA-15583), so that nothing
// only too few replicas hold is shown to consumers or acknowledged. The caller
// never moves its high-water mark down to this value.
func (t *tracker) highWatermark(l leaderState) int64 {
	if underMinISR(len(t.isr), len(t.replicas), l.minISR) {
		return -1
	}
	end := l.safeEnd
	for _, id := range t.isr {
		if f := t.followers[id]; f != nil && f.logEnd < end {
			end = f.logEnd
		}
	}
	if f := t.followers[t.adding]; f != nil && f.logEnd < end {
		end = f.logEnd
	}
	for id, f := range t.followers {
		if f.logEnd < 0 || f.logEnd >= end || slices.Contains(t.isr, id) || !f.caughtUp(l.logEnd, l.now, l.maxLag) {
			continue
		}
		if l.eligible == nil || l.eligible(id, f.brokerEpoch) {
			end = f.logEnd
		}
	}
	return end
}

// fetched records follower id's fetch at fetchOffset, its log starting at
// logStart (the leader's log ending at leaderEnd), and reports whether it is
// in the ISR already.
func (t *tracker) fetched(id int32, fetchOffset, logStart, leaderEnd int64, now time.Time) (inISR bool, err error) {
	f := t.followers[id]
	if f == nil {
		return false, fmt.Errorf("%w: broker %d", ErrNotReplica, id)
	}
	f.fetched(fetchOffset, logStart, leaderEnd, now)
	return slices.Contains(t.isr, id), nil
}

// ReplicaView is what a leader knows of a follower that could serve a
// consumer's fetch (KIP-392), for a replica selector to choose by, as Kafka's
// ReplicaView.
type ReplicaView struct {
	ID int32
	// LogEndOffset is the follower's last fetch offset.
	LogEndOffset int64
	// SinceCaughtUp is how long ago the follower last had everything the
	// leader had.
	SinceCaughtUp time.Duration
}

// readReplicas is the in-sync followers whose log, by their last fetch, holds
// fetchOffset: it starts at or below it and ends at or above it, as Kafka's
// leader filters the replicas it lets its selector choose from
// (ReplicaManager.findPreferredReadReplica). A follower not heard from under
// this leadership holds nothing (its log end is -1).
func (t *tracker) readReplicas(fetchOffset int64, now time.Time) []ReplicaView {
	var views []ReplicaView
	for _, id := range t.isr {
		f := t.followers[id]
		if id == t.localID || f == nil || f.logEnd < fetchOffset || f.logStart > fetchOffset {
			continue
		}
		views = append(views, ReplicaView{ID: id, LogEndOffset: f.logEnd, SinceCaughtUp: now.Sub(f.lastCaughtUp)})
	}
	return views
}

// underMinISR reports whether an ISR of isr members, of a partition of replicas
// replicas, is smaller than min.insync.replicas minISR as Kafka's leader
// applies it (effectiveMinIsr): a minimum above the number of replicas asks
// for every replica, not for more than there are.
func underMinISR(isr, replicas int, minISR int32) bool {
	return isr < min(int(minISR), replicas)
}

// noteBrokerEpoch records the broker epoch of follower id's last fetch.
func (t *tracker) noteBrokerEpoch(id int32, epoch int64) {
	if f := t.followers[id]; f != nil {
		f.brokerEpoch = epoch
	}
}

// brokerEpochs returns the broker epoch of each member of isr as its last
// fetch carried it, -1 for this broker and for members not heard from.
func (t *tracker) brokerEpochs(isr []int32) []int64 {
	epochs := make([]int64, len(isr))
	for i, id := range isr {
		epochs[i] = -1
		if f := t.followers[id]; f != nil && id != t.localID {
			epochs[i] = f.brokerEpoch
		}
	}
	return epochs
}

// expandISR is the ISR with follower id added once its fetch offset has reached
// both the high-water mark and the start of this leader's epoch (it then has
// every record a member may have acknowledged), or nil for no change.
func expandISR(isr []int32, id int32, fetchOffset, highWatermark, epochStart int64) []int32 {
	if slices.Contains(isr, id) || fetchOffset < highWatermark || fetchOffset < epochStart {
		return nil
	}
	return slices.Sorted(slices.Values(append(slices.Clone(isr), id)))
}

// shrinkISR is the ISR without the followers that have not caught up within
// maxLag, or nil for no change. The leader always stays.
func (t *tracker) shrinkISR(now time.Time, maxLag time.Duration) []int32 {
	var keep []int32
	for _, id := range t.isr {
		if f := t.followers[id]; id != t.localID && f != nil && now.Sub(f.lastCaughtUp) > maxLag {
			continue
		}
		keep = append(keep, id)
	}
	if len(keep) == len(t.isr) {
		return nil
	}
	return keep
}

// resignISR is the ISR without the leader (whose log failed), so that the
// controller elects another member; nil when the leader is the only member: no
// other copy holds every acknowledged record.
func resignISR(isr []int32, localID int32) []int32 {
	others := slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return id == localID })
	if len(others) == 0 {
		return nil
	}
	return others
}

// epochEnds answers, for a leader epoch, the largest epoch at or below it that
// a log knows and the offset where that epoch ended (its log end for the
// latest): storage.Log.EndOffsetForEpoch.
type epochEnds func(epoch int32) (int32, int64)

// divergence is the leader's check of a follower's fetch (KIP-320/595): the
// follower last fetched lastFetchedEpoch and fetches at fetchOffset. If the
// leader's log does not have that epoch, or that epoch ends before fetchOffset,
// the follower's tail diverges and it must truncate; nil otherwise, and when the
// follower sends no epoch.
func divergence(lastFetchedEpoch int32, fetchOffset int64, leader epochEnds) *Diverging {
	if lastFetchedEpoch < 0 {
		return nil
	}
	e, end := leader(lastFetchedEpoch)
	if e != lastFetchedEpoch || end < fetchOffset {
		return &Diverging{Epoch: e, EndOffset: end}
	}
	return nil
}

// truncationOffset is where a follower truncates on the leader's Diverging
// answer: the end of the diverging epoch on the leader, or where that epoch
// ends in the follower's own log if earlier.
func truncationOffset(d Diverging, local epochEnds) int64 {
	end := d.EndOffset
	if _, localEnd := local(d.Epoch); localEnd < end {
		end = localEnd
	}
	return end
}

// outOfRange decides what a follower does when the leader answers
// OFFSET_OUT_OF_RANGE to its fetch at fetchOffset: start over at the leader's
// log start if the follower is behind it (restart), else truncate to what the
// leader can have committed (its high-water mark, not below the follower's own
// log start): the follower is ahead with no diverging epoch to go by.
func outOfRange(fetchOffset, leaderLogStart, leaderHighWatermark, localLogStart int64) (restart bool, offset int64) {
	if fetchOffset < leaderLogStart {
		return true, leaderLogStart
	}
	return false, max(leaderHighWatermark, localLogStart)
}

// followerHighWatermark is a follower's high-water mark after a fetch answer:
// the leader's, capped by its own log end, and never lower than cur.
func followerHighWatermark(cur, leaderHighWatermark, logEnd int64) int64 {
	return max(cur, min(leaderHighWatermark, logEnd))
}
