package share

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"
)

// RecordState is the delivery state of one record of a share partition, numbered as
// Kafka numbers it in its share-group state records.
type RecordState int8

const (
	Available    RecordState = 0 // may be acquired
	Acquired     RecordState = 1 // locked by one member until its acquisition lock expires
	Acknowledged RecordState = 2 // accepted: done
	Archiving    RecordState = 3 // failed for good; being written to the group's dead-letter topic
	Archived     RecordState = 4 // rejected, out of deliveries, or not a record: done
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archiving:
		return "archiving"
	case Archived:
		return "archived"
	}
	return "unknown"
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

const (
	Gap     AckType = 0 // the offset holds no record (compacted away, a control record)
	Accept  AckType = 1 // processed: done
	Release AckType = 2 // give it back for another delivery
	Reject  AckType = 3 // unprocessable: done, never delivered again
	Renew   AckType = 4 // keep it locked for another lock duration (KIP-1222)
)

// ErrInvalidRecordState: an acknowledgement names a record the member does not hold
// (never acquired, lock expired, another member's, already acknowledged).
var ErrInvalidRecordState = errors.New("share: record not acquired by this member")

// ErrInvalidAck: an acknowledgement batch is malformed (types that do not match its
// offsets, an unknown type, last before first).
var ErrInvalidAck = errors.New("share: invalid acknowledgement batch")

// AckError is an acknowledgement refused for the state of the offsets it names,
// with the message (and, Past, the code) a Kafka 4.4 broker answers in that case.
// It is always ErrInvalidRecordState to errors.Is: the member does not hold them.
type AckError struct {
	Msg  string
	Past bool // past every offset in flight: Kafka answers INVALID_REQUEST
}

func (e *AckError) Error() string { return e.Msg }
func (e *AckError) Unwrap() error { return ErrInvalidRecordState }

// The refusals of Acknowledge, worded as Kafka 4.4's SharePartition words them.
var (
	errAckNotCached   = &AckError{Msg: "Batch record not found. The request batch offsets are not found in the cache."}
	errAckFirstPast   = &AckError{Msg: "Batch record not found. The first offset in request is past acquired records.", Past: true}
	errAckLastPast    = &AckError{Msg: "Batch record not found. The last offset in request is past acquired records.", Past: true}
	errAckNotAcquired = &AckError{Msg: "The batch cannot be acknowledged. The batch is not in the acquired state."}
	errAckNotOwner    = &AckError{Msg: "Member is not the owner of batch record"}
)

// Limits are the rules of one share partition, from the group's configs.
type Limits struct {
	LockDuration  time.Duration // share.record.lock.duration.ms
	DeliveryLimit int16         // share.delivery.count.limit: deliveries before a record is archived
	MaxInFlight   int64         // group.share.partition.max.record.locks: the window [start, end)
	// DeadLetter: the group has a dead-letter topic (KIP-1191). A record that fails
	// for good (rejected, out of deliveries) is then Archiving, not Archived, until
	// the caller has written it there (Archive) or failed to (Unarchive).
	DeadLetter bool
}

// record is one offset in the in-flight window.
type record struct {
	state    RecordState
	count    int16 // deliveries so far
	member   string
	deadline time.Time
	why      Failure // why an Archiving record failed (not persisted)
}

// Failure says why a record failed for good, for its dead-letter record.
type Failure int8

const (
	FailureUnknown    Failure = iota // restored from a snapshot: the reason was not kept
	FailureRejected                  // a member rejected it
	FailureDeliveries                // it reached the delivery count limit
)

// fail ends r for good: Archiving when the group dead-letters, else Archived.
func (r *record) fail(lim Limits, why Failure) {
	r.member, r.deadline = "", time.Time{}
	if lim.DeadLetter {
		r.state, r.why = Archiving, why
		return
	}
	r.state = Archived
}

// Partition is the pure state of one share partition (one group, one topic
// partition): the share-partition start offset (SPSO, below which everything is
// done), the end offset (SPEO, the first offset never acquired) and the state of
// every offset in between. It is not safe for concurrent use and does no I/O: the
// caller reads the log, keeps time and persists Snapshot.
type Partition struct {
	start int64
	end   int64
	// recs holds every offset in [start, end) in order: recs[i] is offset
	// start+i. A slice, not a map: acquiring new offsets appends values and
	// advancing reslices, so neither allocates per record.
	recs []record
	// lockFloor is at or before the deadline of every Acquired record (noLocks
	// when none is known), so Expire skips its scan until a lock may be due.
	lockFloor time.Time
}

// noLocks is the lockFloor of a partition without acquisition locks.
var noLocks = time.Unix(1<<62, 0)

// NewPartition starts a share partition with nothing in flight at offset start.
func NewPartition(start int64) *Partition {
	return &Partition{start: start, end: start, lockFloor: noLocks}
}

// at is the record of offset o, which must be in [start, end).
func (p *Partition) at(o int64) *record { return &p.recs[o-p.start] }

// grow adds offset end to the window in state st.
func (p *Partition) grow(st RecordState) {
	p.recs = append(p.recs, record{state: st})
	p.end++
}

// dropFront removes the first n offsets of the window.
func (p *Partition) dropFront(n int64) {
	clear(p.recs[:n]) // let go of member strings
	p.recs = p.recs[n:]
	p.start += n
}

// Start is the share-partition start offset (SPSO).
func (p *Partition) Start() int64 { return p.start }

// End is the first offset never acquired (SPEO).
func (p *Partition) End() int64 { return p.end }

// InFlight is the number of offsets between Start and End.
func (p *Partition) InFlight() int64 { return p.end - p.start }

// State returns the state and delivery count of an offset (Acknowledged below Start,
// Available at or past End).
func (p *Partition) State(offset int64) (RecordState, int16) {
	switch {
	case offset < p.start:
		return Acknowledged, 0
	case offset >= p.end:
		return Available, 0
	}
	r := p.at(offset)
	return r.state, r.count
}

// FetchOffset is where the next acquisition reads the log from: the first Available
// offset in flight, or End.
func (p *Partition) FetchOffset() int64 {
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i)
		}
	}
	return p.end
}

// Room is how many offsets past End the in-flight window can still take.
func (p *Partition) Room(lim Limits) int64 {
	if lim.MaxInFlight <= 0 {
		return math.MaxInt64
	}
	return lim.MaxInFlight - (p.end - p.start)
}

// Acquirable is how many offsets an acquisition could take now, with the log's
// high watermark at hwm: the Available offsets in flight and what the window has
// room for below hwm.
func (p *Partition) Acquirable(hwm int64, lim Limits) int64 {
	n := max(0, min(hwm-p.end, p.Room(lim)))
	for i := range p.recs {
		if p.recs[i].state == Available {
			n++
		}
	}
	return n
}

// Holds reports whether member holds the acquisition lock of some offset.
func (p *Partition) Holds(member string) bool {
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			return true
		}
	}
	return false
}

// Locked reports whether some offset is acquired under a lock that has not
// expired at now.
func (p *Partition) Locked(now time.Time) bool {
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.deadline.After(now) {
			return true
		}
	}
	return false
}

// Batch is the offset range of one record batch of the log.
type Batch struct {
	First, Last int64
	Control     bool // a transaction marker, or an aborted transaction's read_committed: never delivered
}

// AcquiredRange is a run of acquired offsets with one delivery count.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// Acquire locks for member the Available offsets of batches (read from the log at
// FetchOffset, in order) until maxRecords offsets are acquired or the in-flight
// window is full. Offsets past End join the window; control batches are archived.
// Acquisition goes batch by batch, as the client receives whole batches: a batch is
// taken whole (its Available offsets) even when that passes maxRecords, unless
// strict (ShareFetch's record_limit acquire mode), which stops at maxRecords.
func (p *Partition) Acquire(member string, now time.Time, lim Limits, batches []Batch, maxRecords int, strict bool) []AcquiredRange {
	var out []AcquiredRange
	n := 0
	deadline := now.Add(lim.LockDuration)
	if deadline.Before(p.lockFloor) {
		p.lockFloor = deadline
	}
	add := func(o int64, count int16) {
		if k := len(out); k > 0 && out[k-1].Last == o-1 && out[k-1].DeliveryCount == count {
			out[k-1].Last = o
		} else {
			out = append(out, AcquiredRange{First: o, Last: o, DeliveryCount: count})
		}
		n++
	}
	for _, b := range batches {
		if n >= maxRecords {
			break
		}
		if b.Last < p.start {
			continue
		}
		for o := max(b.First, p.start); o <= b.Last; o++ {
			if strict && n >= maxRecords {
				break
			}
			if o >= p.end && lim.MaxInFlight > 0 && p.end-p.start >= lim.MaxInFlight {
				break // the window is full: only released records may go out
			}
			if o >= p.end {
				// Offsets the log does not have (compacted away) between
				// batches: nothing to deliver.
				for p.end < o {
					p.grow(Archived)
				}
				p.grow(Available)
			}
			r := p.at(o)
			if r.state != Available {
				continue
			}
			if b.Control {
				r.state = Archived
				continue
			}
			r.state, r.count, r.member, r.deadline = Acquired, r.count+1, member, deadline
			add(o, r.count)
		}
	}
	p.advance()
	return out
}

// AckBatch is one acknowledgement batch: Types has one entry for the whole
// range or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Acknowledge applies the acknowledgement batches of member for this partition
// in one request, all of them or none, as Kafka rolls back a partition's
// batches when one of them fails: a member told that its acknowledgement failed
// still holds every record it named. Every offset must be Acquired by member (a
// Gap may also name an offset the member holds that has no record), and named
// by one batch only; otherwise nothing changes and the error is the first
// failing batch's *AckError (ErrInvalidAck for a malformed batch). Offsets below
// the start offset in a batch that reaches the window are skipped, as Kafka
// skips them; a batch wholly below it is refused. It returns the offsets
// archived by a rejection or by running out of deliveries on a release:
// Archiving when lim.DeadLetter, else Archived.
func (p *Partition) Acknowledge(member string, now time.Time, lim Limits, batches []AckBatch) ([]int64, error) {
	for i, b := range batches {
		if err := p.checkAck(member, b); err != nil {
			return nil, err
		}
		for _, prev := range batches[:i] {
			if max(prev.First, b.First, p.start) <= min(prev.Last, b.Last) {
				// An earlier batch of the request acknowledged them.
				return nil, errAckNotAcquired
			}
		}
	}
	var archived []int64
	for _, b := range batches {
		archived = p.applyAck(now, lim, b, archived)
	}
	p.advance()
	return archived, nil
}

// typeAt is the acknowledgement type of offset o in b.
func (b AckBatch) typeAt(o int64) AckType {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	return b.Types[o-b.First]
}

// checkAck returns why b cannot be applied to the current state, nil if it can.
func (p *Partition) checkAck(member string, b AckBatch) error {
	if b.Last < b.First || (len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1) {
		return ErrInvalidAck
	}
	// The types, not the offsets: a batch may name far more offsets than the
	// window holds (one type for all of them), and only the window's are
	// looked at.
	for _, t := range b.Types {
		if t < Gap || t > Renew {
			return ErrInvalidAck
		}
	}
	switch {
	case p.start == p.end || b.Last < p.start:
		return errAckNotCached
	case b.First >= p.end:
		return errAckFirstPast
	case b.Last >= p.end:
		return errAckLastPast
	}
	for o := max(b.First, p.start); o <= b.Last; o++ {
		switch r := p.at(o); {
		case r.state != Acquired:
			return errAckNotAcquired
		case r.member != member:
			return errAckNotOwner
		}
	}
	return nil
}

// applyAck applies b, which checkAck allowed, and appends the offsets it
// archives to archived.
func (p *Partition) applyAck(now time.Time, lim Limits, b AckBatch, archived []int64) []int64 {
	for o := max(b.First, p.start); o <= b.Last; o++ {
		r := p.at(o)
		switch b.typeAt(o) {
		case Accept:
			r.state = Acknowledged
		case Gap:
			r.state = Archived
		case Reject:
			r.fail(lim, FailureRejected)
			archived = append(archived, o)
			continue
		case Release:
			if p.releaseRecord(r, lim) {
				archived = append(archived, o)
			}
			continue
		case Renew:
			r.deadline = now.Add(lim.LockDuration)
			continue
		}
		r.member, r.deadline = "", time.Time{}
	}
	return archived
}

// releaseRecord makes an acquired record Available again, or fails it for good when
// it used up its deliveries; it reports the latter.
func (p *Partition) releaseRecord(r *record, lim Limits) bool {
	if lim.DeliveryLimit > 0 && r.count >= lim.DeliveryLimit {
		r.fail(lim, FailureDeliveries)
		return true
	}
	r.member, r.deadline = "", time.Time{}
	r.state = Available
	return false
}

// Expire releases every record whose acquisition lock expired by now. It returns
// the offsets archived because they ran out of deliveries, and the earliest lock
// deadline still pending (zero when none).
func (p *Partition) Expire(now time.Time, lim Limits) (archived []int64, next time.Time) {
	if now.Before(p.lockFloor) {
		// No lock is due yet: the floor is the earliest a deadline can be.
		if p.lockFloor != noLocks {
			next = p.lockFloor
		}
		return nil, next
	}
	for i := range p.recs {
		o, r := p.start+int64(i), &p.recs[i]
		if r.state != Acquired {
			continue
		}
		if !r.deadline.After(now) {
			if p.releaseRecord(r, lim) {
				archived = append(archived, o)
			}
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	p.lockFloor = noLocks
	if !next.IsZero() {
		p.lockFloor = next
	}
	p.advance()
	return archived, next
}

// ReleaseMember gives back every record member holds (its share session ended). It
// returns the offsets archived because they ran out of deliveries.
func (p *Partition) ReleaseMember(member string, lim Limits) []int64 {
	var archived []int64
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			if p.releaseRecord(r, lim) {
				archived = append(archived, p.start+int64(i))
			}
		}
	}
	p.advance()
	return archived
}

// DeadLetter is an Archiving record to write to the group's dead-letter topic.
type DeadLetter struct {
	Offset        int64
	DeliveryCount int16
	Why           Failure
}

// DeadLetters lists the Archiving offsets, in order.
func (p *Partition) DeadLetters() []DeadLetter {
	var out []DeadLetter
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Archiving {
			out = append(out, DeadLetter{Offset: p.start + int64(i), DeliveryCount: r.count, Why: r.why})
		}
	}
	return out
}

// Archive finishes Archiving offsets (their dead-letter records are written, or
// the group no longer has a dead-letter topic). Offsets no longer in flight or not
// Archiving are ignored.
func (p *Partition) Archive(offsets []int64) {
	for _, o := range offsets {
		if o >= p.start && o < p.end && p.at(o).state == Archiving {
			p.at(o).state = Archived
		}
	}
	p.advance()
}

// Unarchive makes Archiving offsets Available again with their delivery counts (a
// dead-letter write failed: the record must not be lost, so it can be acquired
// again). Offsets no longer in flight or not Archiving are ignored.
func (p *Partition) Unarchive(offsets []int64) {
	for _, o := range offsets {
		if o >= p.start && o < p.end && p.at(o).state == Archiving {
			p.at(o).state = Available
		}
	}
}

// AdvanceTo moves Start up to offset (the log start moved past it: those records are
// gone), archiving what was in flight below it.
func (p *Partition) AdvanceTo(offset int64) {
	if offset <= p.start {
		return
	}
	p.dropFront(min(offset, p.end) - p.start)
	p.start = offset
	p.end = max(p.end, p.start)
}

// advance moves Start past every finished offset.
func (p *Partition) advance() {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	if n > 0 {
		p.dropFront(int64(n))
	}
}

// StateBatch is a run of offsets in one state with one delivery count, as persisted.
type StateBatch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// Snapshot is the durable state of a share partition: its start offset and the
// state of every offset in flight, Acquired recorded as Available with the count
// of the delivery under way (locks do not survive a failover; delivery counts do). Archiving is recorded as such, so a
// record whose dead-letter write a crash interrupted is written again after it.
type Snapshot struct {
	StateEpoch  int32 // the share partition's initialization it belongs to (set by the caller)
	LeaderEpoch int32 // the data partition's leader epoch when it was taken (set by the caller)
	Start       int64
	// DeliveryComplete counts the offsets at or past Start whose delivery is
	// complete (acknowledged or archived): KIP-1226's DeliveryCompleteCount, which
	// WriteShareGroupState v1 carries and the share-group lag subtracts.
	DeliveryComplete int32
	Batches          []StateBatch
}

// CountDeliveryComplete counts the offsets at or past start that batches show
// acknowledged or archived.
func CountDeliveryComplete(start int64, batches []StateBatch) int32 {
	var n int64
	for _, b := range batches {
		if (b.State == Acknowledged || b.State == Archived) && b.Last >= start {
			n += b.Last - max(b.First, start) + 1
		}
	}
	return int32(n)
}

// newerThan reports whether s supersedes o as a key's state: a later
// initialization (state epoch), or the same one under at least o's leader epoch.
func (s Snapshot) newerThan(o Snapshot) bool {
	if s.StateEpoch != o.StateEpoch {
		return s.StateEpoch > o.StateEpoch
	}
	return s.LeaderEpoch >= o.LeaderEpoch
}

// Snapshot returns the partition's durable state.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start}
	for i := range p.recs {
		o, r := p.start+int64(i), &p.recs[i]
		st := r.state
		if st == Acquired {
			st = Available
		}
		if k := len(s.Batches); k > 0 && s.Batches[k-1].Last == o-1 && s.Batches[k-1].State == st && s.Batches[k-1].DeliveryCount == r.count {
			s.Batches[k-1].Last = o
			continue
		}
		s.Batches = append(s.Batches, StateBatch{First: o, Last: o, State: st, DeliveryCount: r.count})
	}
	s.DeliveryComplete = CountDeliveryComplete(s.Start, s.Batches)
	return s
}

// FailSpent fails for good, as a release at the limit does, every Available
// offset already delivered lim.DeliveryLimit times, and returns them. A new
// leader calls it on a restored state: a record whose last delivery was in
// flight at the failover (or a failed save) is saved Available (locks are not
// saved) and would otherwise be delivered past the limit.
func (p *Partition) FailSpent(lim Limits) []int64 {
	if lim.DeliveryLimit <= 0 {
		return nil
	}
	var spent []int64
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Available && r.count >= lim.DeliveryLimit {
			r.fail(lim, FailureDeliveries)
			spent = append(spent, p.start+int64(i))
		}
	}
	p.advance()
	return spent
}

// Restore rebuilds a partition from a snapshot. Offsets between batches, if any, are
// Available with no deliveries.
func Restore(s Snapshot) *Partition {
	p := NewPartition(s.Start)
	bs := slices.Clone(s.Batches)
	slices.SortFunc(bs, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	for _, b := range bs {
		st := b.State
		if st == Acquired {
			st = Available
		}
		for o := max(b.First, p.start); o <= b.Last; o++ {
			for p.end < o {
				p.grow(Available)
			}
			if o == p.end {
				p.grow(st)
			}
			r := p.at(o)
			r.state, r.count = st, b.DeliveryCount
		}
	}
	p.advance()
	return p
}
