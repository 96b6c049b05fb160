package replica

import (
	"errors"
	"math"
	"time"
)

// Idempotent-producer errors; the Produce handler maps them to Kafka error codes.
var (
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the last one
	// appended for its producer (a gap). OUT_OF_ORDER_SEQUENCE_NUMBER; not retriable
	// for the batch, the client bumps its epoch.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: the batch carries an epoch older than the producer's
	// current one (a zombie). INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrCoordinatorFenced: a transaction marker carries an older coordinator
	// epoch than the last marker written for its producer on the partition (a
	// deposed transaction coordinator). TRANSACTION_COORDINATOR_FENCED.
	ErrCoordinatorFenced = errors.New("transaction coordinator fenced")
)

// producerBatchesKept is how many recent batches per producer are remembered for
// duplicate detection: a client keeps at most 5 requests in flight.
const producerBatchesKept = 5

// batchMeta identifies one appended batch of an idempotent producer.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	// timestamp is the batch's max timestamp as stored (the broker's time on
	// a LogAppendTime topic): a retry of the batch is answered with it as its
	// log append time, as Kafka answers, whatever the timestamp type.
	timestamp int64
}

// producerEntry is the state of one producer id on one partition.
type producerEntry struct {
	epoch int16
	// coordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker here (-1: none yet). It lives in the markers in the
	// log (their value: version 0 | coordinator epoch, Kafka's
	// EndTransactionMarker), so it is rebuilt with the rest of the state.
	coordinatorEpoch int32
	batches          []batchMeta // oldest first, at most producerBatchesKept
	lastTimestamp    int64       // max timestamp of its last batch
}

// producerState tracks idempotent producers on one partition. It is pure: the
// Partition serialises access under its append lock and feeds it every batch.
type producerState struct {
	entries map[int64]*producerEntry
}

// newProducerState returns an empty state; its map is made by the first
// producer (most partitions never see one).
func newProducerState() *producerState { return &producerState{} }

// seqCheck is the verdict on an incoming idempotent batch.
type seqCheck struct {
	duplicate bool      // already appended: answer with the original batch
	original  batchMeta // the original batch when duplicate
}

// check validates a batch of numRecords records from producer id pid with epoch and
// first sequence firstSeq against the state, without changing it. fromZero
// marks a transactional batch of transaction version 2, which starts an
// unknown producer at sequence 0 only.
func (s *producerState) check(pid int64, epoch int16, firstSeq int32, numRecords int32, fromZero bool) (seqCheck, error) {
	e, ok := s.entries[pid]
	if !ok {
		// Unknown producer (new, or its state was lost to retention): any sequence
		// starts it, as Kafka does since KIP-360, but a transaction of version 2
		// (its epoch is new, so are its sequences).
		if fromZero && firstSeq != 0 {
			return seqCheck{}, ErrOutOfOrderSequence
		}
		return seqCheck{}, nil
	}
	if epoch < e.epoch {
		return seqCheck{}, ErrInvalidProducerEpoch
	}
	lastSeq := addSeq(firstSeq, numRecords-1)
	if epoch == e.epoch {
		for _, b := range e.batches {
			if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
				return seqCheck{duplicate: true, original: b}, nil
			}
		}
	}
	if epoch > e.epoch {
		if firstSeq != 0 {
			return seqCheck{}, ErrOutOfOrderSequence
		}
		return seqCheck{}, nil
	}
	if len(e.batches) == 0 {
		// Only a marker seen at this epoch: nothing appended at it yet, so
		// the producer starts at 0, as Kafka's checkSequence requires.
		if firstSeq != 0 {
			return seqCheck{}, ErrOutOfOrderSequence
		}
		return seqCheck{}, nil
	}
	last := e.batches[len(e.batches)-1].lastSeq
	if firstSeq != addSeq(last, 1) {
		return seqCheck{}, ErrOutOfOrderSequence
	}
	return seqCheck{}, nil
}

// record notes an appended batch (after check passed, or while rebuilding from the log).
func (s *producerState) record(pid int64, epoch int16, firstSeq int32, numRecords int32, firstOffset, lastOffset, maxTimestamp int64) {
	e, ok := s.entries[pid]
	if !ok {
		e = &producerEntry{epoch: epoch, coordinatorEpoch: -1}
		put(&s.entries, pid, e)
	}
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.lastTimestamp = maxTimestamp
	lastSeq := int32(-1) // a coordinator's batch has no sequence, nor a last one
	if firstSeq >= 0 {
		lastSeq = addSeq(firstSeq, numRecords-1)
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq:    firstSeq,
		lastSeq:     lastSeq,
		firstOffset: firstOffset,
		lastOffset:  lastOffset,
		timestamp:   maxTimestamp,
	})
}

// fence applies a transaction marker written at epoch by a coordinator at
// coordinatorEpoch, with timestamp: a producer at an older epoch moves to it,
// so its batches from before are refused (KIP-890: the coordinator bumps the
// epoch at every end of a transaction, and a late batch of the ended one must
// not open the next), the producer's coordinator epoch becomes the marker's,
// and its last timestamp the marker's (as Kafka's appendEndTxnMarker: a
// marker keeps its producer from expiring).
func (s *producerState) fence(pid int64, epoch int16, coordinatorEpoch int32, timestamp int64) {
	e, ok := s.entries[pid]
	if !ok {
		put(&s.entries, pid, &producerEntry{epoch: epoch, coordinatorEpoch: coordinatorEpoch, lastTimestamp: timestamp})
		return
	}
	e.coordinatorEpoch, e.lastTimestamp = coordinatorEpoch, timestamp
	if epoch > e.epoch {
		e.epoch, e.batches = epoch, e.batches[:0]
	}
}

// expire forgets every producer whose last timestamp is at or before cutoff
// (ms), except those open reports in a transaction: Kafka's
// removeExpiredProducers, with cutoff the time producer.id.expiration.ms ago.
func (s *producerState) expire(cutoff int64, open func(pid int64) bool) {
	for pid, e := range s.entries {
		if e.lastTimestamp <= cutoff && !open(pid) {
			delete(s.entries, pid)
		}
	}
}

// producerExpiry is producer.id.expiration.ms (after) and the clock a
// partition judges its producers' idleness by when it loads a snapshot, and
// dates its transaction verifications by. The zero value expires none at
// load, on the system clock.
type producerExpiry struct {
	after time.Duration
	now   func() time.Time
}

// cutoff is the last timestamp (ms) of an expired producer; ok is false
// when none expires.
func (e producerExpiry) cutoff() (ms int64, ok bool) {
	if e.now == nil || e.after <= 0 {
		return 0, false
	}
	return e.now().Add(-e.after).UnixMilli(), true
}

// clock returns the time now.
func (e producerExpiry) clock() time.Time {
	if e.now == nil {
		return time.Now()
	}
	return e.now()
}

// addSeq adds to a sequence number, wrapping from MaxInt32 to 0 as Kafka does.
func addSeq(seq, n int32) int32 {
	if int64(seq)+int64(n) > math.MaxInt32 {
		return int32(int64(seq) + int64(n) - math.MaxInt32 - 1)
	}
	return seq + n
}
