package replica

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/storage"
)

// Transaction errors on the partition side.
var (
	// ErrInvalidTxnState: a producer with an open transaction on the partition
	// wrote a non-transactional batch, or a transactional batch came without a
	// producer id. INVALID_TXN_STATE.
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTxnMarkerPending: a transactional batch of a producer at a newer
	// epoch than its transaction open on the partition (the producer's next
	// transaction, begun while the coordinator writes the previous one's
	// markers) came, and the previous transaction's marker did not within
	// markerWait. Appended, the batch would join the previous transaction,
	// and the marker, not above the producer's epoch then, would be refused
	// (KIP-1228). Retriable: NOT_ENOUGH_REPLICAS to a producer.
	ErrTxnMarkerPending = errors.New("the producer's previous transaction is not ended on the partition yet")
)

// markerWait bounds how long a transactional batch waits for the marker of
// its producer's previous transaction on the partition before it is refused
// with ErrTxnMarkerPending. The coordinator writes that marker right after
// the previous transaction's end is answered, so it usually comes within an
// fsync; a partition whose marker is retried (its leader moving) refuses the
// batch and the client retries it.
const markerWait = 500 * time.Millisecond

// markerFlushWithin is how long a transaction marker may wait for the fsync
// of a later append before its own (storage.AppendHints.FlushWithin). A
// producer's next transaction usually writes to the partition within that
// time, and one fsync then covers the marker and the new batch; a marker
// fsynced alone at once made that batch's fsync wait behind it. Only the
// coordinator waits for the marker (before the transaction's completed
// state), and read_committed readers, whose last stable offset it holds: no
// longer than a gathering fsync may already wait (storage's maxGather).
const markerFlushWithin = 2 * time.Millisecond

// markerPendingLocked tells whether transactional batch h would join its
// producer's transaction of an older epoch open here (see
// ErrTxnMarkerPending). appendMu must be held.
func (p *Partition) markerPendingLocked(h batch.Header) bool {
	if !h.Transactional() || !h.Idempotent() || h.Control() {
		return false
	}
	e, ok := p.producers.entries[h.ProducerID]
	return ok && e.epoch < h.ProducerEpoch && p.inTxn(h.ProducerID)
}

// afterMarker runs appendFn, the append of transactional batch h; refused
// with ErrTxnMarkerPending, it waits for the marker (awaitMarker) and runs it
// once more. The common case takes the append lock once.
func (p *Partition) afterMarker(h batch.Header, appendFn func() (AppendResult, error)) (AppendResult, error) {
	res, err := appendFn()
	if errors.Is(err, ErrTxnMarkerPending) {
		p.awaitMarker(h)
		res, err = appendFn()
	}
	return res, err
}

// awaitMarker waits, up to markerWait, until transactional batch h no longer
// finds its producer's previous transaction open here (markerPendingLocked),
// woken by every append (the marker's among them). The append after it checks
// again under the append lock.
func (p *Partition) awaitMarker(h batch.Header) {
	if !h.Transactional() || h.Control() {
		return
	}
	pending := func() bool {
		p.appendMu.Lock()
		defer p.appendMu.Unlock()
		return p.markerPendingLocked(h)
	}
	if !pending() {
		return
	}
	w := NewWatcher()
	p.WatchAppends(w) // checked again below: an append after this wakes w
	defer p.UnwatchAppends(w)
	t := time.NewTimer(markerWait)
	defer t.Stop()
	for p.IsLeader() && pending() {
		select {
		case <-w.C:
		case <-t.C:
			return
		}
	}
}

// Isolation is a fetch or ListOffsets isolation level (Kafka's IsolationLevel).
type Isolation int8

// Isolation levels, numbered as on the wire.
const (
	// ReadUncommitted reads up to the high-water mark.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset and learns which ranges
	// hold aborted transactions.
	ReadCommitted Isolation = 1
)

// AbortedTxn is one aborted transaction on a partition: producer id, the offset of
// its first batch and the offset of its abort marker (LastOffset). A
// read_committed consumer drops the producer's batches from FirstOffset until
// it meets the marker. The tier's manifest holds the same.
type AbortedTxn = storage.AbortedTxn

// txnState is the partition's view of transactions, derived only from the
// batches in its log, so leader, follower and a restarted replica agree: the open
// transaction of each producer (the offset of its first batch) and the
// transactions whose marker is not yet known to be below the high-water mark.
// The aborted transactions are not kept: observe hands each one out for the
// log's aborted-transaction index (storage.Log.AddAbortedTxn). It is pure; the
// Partition guards it with txnMu and feeds it every batch in offset order.
type txnState struct {
	open map[int64]int64 // producer id -> first offset of its open transaction
	// unreplicated are ended transactions (either outcome) whose marker the
	// high-water mark has not passed, by marker offset (Kafka's unreplicated
	// transactions). They hold the last stable offset as an open transaction
	// does: a marker above the HWM can still be lost with this leader, and the
	// next leader's LSO would then be back at the transaction's first offset.
	// lastStable drops those the HWM has passed.
	unreplicated []endedTxn
}

// endedTxn is a transaction whose marker is in the log: its first offset and
// the marker's offset.
type endedTxn struct{ first, marker int64 }

// newTxnState returns an empty state; its map is made by the first
// transaction (most partitions never see one).
func newTxnState() *txnState { return &txnState{} }

// observe applies one appended batch. marker is the marker type of a control
// batch (ignored for other batches).
func (s *txnState) observe(h batch.Header, marker batch.ControlType) {
	if !h.Transactional() || !h.Idempotent() {
		return
	}
	if !h.Control() {
		if _, ok := s.open[h.ProducerID]; !ok {
			put(&s.open, h.ProducerID, h.BaseOffset)
		}
		return
	}
	if marker != batch.ControlAbort && marker != batch.ControlCommit {
		return // an unknown control type is not a transaction marker
	}
	first, ok := s.open[h.ProducerID]
	if !ok {
		return // a marker for a partition the transaction wrote nothing to
	}
	delete(s.open, h.ProducerID)
	s.unreplicated = append(s.unreplicated, endedTxn{first: first, marker: h.BaseOffset})
}

// aborts returns the aborted-transaction index entry of batch h, before
// observe applies it, when h is an abort marker ending a transaction open
// here: the transaction, and as last stable offset the first offset of the
// oldest other transaction open, or the marker's offset + 1 (Kafka's, which
// the high-water mark does not bound). It changes nothing.
func (s *txnState) aborts(h batch.Header, marker batch.ControlType) (storage.AbortEntry, bool) {
	if marker != batch.ControlAbort || !h.Control() || !h.Transactional() || !h.Idempotent() {
		return storage.AbortEntry{}, false
	}
	first, ok := s.open[h.ProducerID]
	if !ok {
		return storage.AbortEntry{}, false
	}
	e := storage.AbortEntry{AbortedTxn: AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset}, LastStableOffset: h.BaseOffset + 1}
	for pid, off := range s.open {
		if pid != h.ProducerID && off < e.LastStableOffset {
			e.LastStableOffset = off
		}
	}
	return e, true
}

// inTxn reports whether producer pid has an open transaction.
func (s *txnState) inTxn(pid int64) bool {
	_, ok := s.open[pid]
	return ok
}

// firstUnstable is the first offset of the oldest open transaction.
func (s *txnState) firstUnstable() (int64, bool) {
	first, ok := int64(0), false
	for _, off := range s.open {
		if !ok || off < first {
			first, ok = off, true
		}
	}
	return first, ok
}

// lastStable is the last stable offset under high-water mark hwm: the first offset
// of the oldest transaction that is open or whose marker is at or above hwm, if
// that is lower. It forgets the ended transactions whose marker is below hwm:
// the partition's HWM only moves back by a truncation, which rebuilds the
// state, and a caller with an older reading of the HWM then only misses
// transactions whose markers are below the HWM already.
func (s *txnState) lastStable(hwm int64) int64 {
	i := 0
	for i < len(s.unreplicated) && s.unreplicated[i].marker < hwm {
		i++
	}
	s.unreplicated = slices.Delete(s.unreplicated, 0, i)
	lso := hwm
	if first, ok := s.firstUnstable(); ok {
		lso = min(lso, first)
	}
	for _, e := range s.unreplicated {
		lso = min(lso, e.first)
	}
	return lso
}

// WriteTxnMarker appends a commit or abort marker for producer m.ProducerID as
// leader (WriteTxnMarkers). tv is the marker's transaction version
// (WriteTxnMarkers v2, KIP-1228; 0 from older requests). A marker from an epoch
// older than the producer's latest on this partition is refused with
// ErrInvalidProducerEpoch (a zombie's transaction), and so is a marker of
// transaction version 2 or above at the producer's epoch while a transaction
// is open here: such a coordinator bumps the epoch before it writes the
// markers, so that transaction is the producer's next one, and the marker a
// late or repeated one of the previous. Without an open transaction such a
// marker is a repeat and is written again, and so is one at epoch 32767 (no
// end bumps it), as Kafka 4.4's checkProducerEpoch lets them. Then one from an
// older coordinator epoch than the producer's last marker here is refused with
// ErrCoordinatorFenced (a deposed coordinator). Writing a marker for a
// producer with no open transaction here is allowed and changes nothing but
// the log, as in Kafka. The caller waits for the high-water mark to pass
// LastOffset before answering.
func (p *Partition) WriteTxnMarker(m batch.Marker, tv int8) (AppendResult, error) {
	return p.appendTrusted(batch.BuildControl(m), storage.AppendHints{FlushWithin: p.markerFlushWithin}, func() error {
		e, ok := p.producers.entries[m.ProducerID]
		switch {
		case !ok:
		case m.ProducerEpoch < e.epoch, tv >= 2 && m.ProducerEpoch == e.epoch && m.ProducerEpoch != math.MaxInt16 && p.inTxn(m.ProducerID):
			return fmt.Errorf("%w: marker epoch %d (transaction version %d), producer %d is at %d", ErrInvalidProducerEpoch, m.ProducerEpoch, tv, m.ProducerID, e.epoch)
		case m.CoordinatorEpoch < e.coordinatorEpoch:
			return fmt.Errorf("%w: marker from coordinator epoch %d, producer %d's last marker is from %d", ErrCoordinatorFenced, m.CoordinatorEpoch, m.ProducerID, e.coordinatorEpoch)
		}
		return nil
	})
}

// AppendAsCoordinator appends one batch a coordinator built itself (a
// transactional offset commit on __consumer_offsets) as leader. Such a batch
// carries no sequence number (Kafka's coordinator origin), so the producer
// sequence checks of Append do not apply; max.message.bytes does, and so does
// the producer's epoch: a batch of an older epoch than the producer's here (a
// zombie's, fenced by a newer instance or by a marker of transaction version
// 2) is refused with ErrInvalidProducerEpoch, as Kafka's checkProducerEpoch
// refuses it, and an accepted batch's epoch becomes the producer's. Of opts,
// AtLeaderEpoch applies, and Verify: the batch's verification guard, Guard,
// must still be valid (a TxnOffsetCommit of an older client, verified with the
// transaction coordinator; replica/verify.go).
func (p *Partition) AppendAsCoordinator(records []byte, opts AppendOpts) (AppendResult, error) {
	h, err := batch.Validate(records)
	if err != nil {
		return AppendResult{}, err
	}
	if limit := p.Config().MaxMessageBytes; h.Size() > int(limit) {
		return AppendResult{}, fmt.Errorf("%w: batch of %d bytes, max.message.bytes is %d", ErrRecordTooLarge, h.Size(), limit)
	}
	return p.afterMarker(h, func() (AppendResult, error) {
		return p.appendTrusted(records, storage.AppendHints{}, func() error {
			if err := p.checkLeaderEpochLocked(opts); err != nil {
				return err
			}
			if p.markerPendingLocked(h) {
				return fmt.Errorf("%w: producer %d at epoch %d", ErrTxnMarkerPending, h.ProducerID, h.ProducerEpoch)
			}
			if e, ok := p.producers.entries[h.ProducerID]; h.Idempotent() && ok && h.ProducerEpoch < e.epoch {
				return fmt.Errorf("%w: producer %d's batch at epoch %d, the producer is at %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
			}
			if opts.Verify {
				return p.checkVerificationLocked(h, opts.Guard)
			}
			return nil
		})
	})
}

// appendTrusted appends batches the broker built as leader, after check (run
// under the append lock) passes, and feeds them to the producer and
// transaction state, as a follower's append does; hints go to the log's
// flusher.
func (p *Partition) appendTrusted(records []byte, hints storage.AppendHints, check func() error) (AppendResult, error) {
	if !p.IsLeader() {
		return AppendResult{}, ErrNotLeader
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.IsLeader() {
		return AppendResult{}, ErrNotLeader
	}
	if check != nil {
		if err := check(); err != nil {
			return AppendResult{}, err
		}
	}
	epoch := p.leaderEpoch.Load()
	info, err := p.log.AppendHinted(records, epoch, hints)
	if err != nil {
		return AppendResult{}, err
	}
	if h, err := batch.ParseHeader(records); err == nil && h.Idempotent() && !h.Control() {
		p.producers.record(h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.NumRecords, info.FirstOffset, info.LastOffset, info.MaxTimestamp)
	}
	if err := p.observeTxns(records); err != nil {
		return AppendResult{}, err
	}
	p.maybeSnapshot()
	p.fireAppend()
	if !p.groupCommit {
		p.maybeAdvanceHighWatermark()
	}
	return AppendResult{BaseOffset: info.FirstOffset, LastOffset: info.LastOffset, LogAppendTime: -1, LogStartOffset: info.LogStartOffset, LeaderEpoch: epoch}, nil
}

// ProducerInfo is one producer's state on a partition (DescribeProducers).
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the coordinator epoch of its last transaction marker
	// here (-1: none).
	CoordinatorEpoch int32
	LastSequence     int32 // -1: none
	LastTimestamp    int64
	TxnStartOffset   int64 // first offset of its open transaction, -1: none
}

// Producers returns the idempotent and transactional producers the leader
// knows on this partition, by producer id.
func (p *Partition) Producers() ([]ProducerInfo, error) {
	if !p.IsLeader() {
		return nil, ErrNotLeader
	}
	out := p.producerInfos()
	p.addTxnStarts(out)
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

// producerInfos lists the producers the partition knows, without their open
// transactions' starts.
func (p *Partition) producerInfos() []ProducerInfo {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers.entries))
	for pid, e := range p.producers.entries {
		pi := ProducerInfo{ProducerID: pid, ProducerEpoch: e.epoch, CoordinatorEpoch: e.coordinatorEpoch, LastSequence: -1, LastTimestamp: e.lastTimestamp, TxnStartOffset: -1}
		if n := len(e.batches); n > 0 {
			pi.LastSequence = e.batches[n-1].lastSeq
		}
		out = append(out, pi)
	}
	return out
}

// addTxnStarts sets the start of each producer's open transaction in out.
func (p *Partition) addTxnStarts(out []ProducerInfo) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	for i := range out {
		if off, ok := p.txns.open[out[i].ProducerID]; ok {
			out[i].TxnStartOffset = off
		}
	}
}
