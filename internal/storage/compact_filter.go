package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
)

// recordFate is what a pass does with one record.
type recordFate uint8

const (
	keepRecord     recordFate = iota
	dropSuperseded            // a later record has the same key
	dropTombstone             // a tombstone past DeleteRetention since it became clean
	dropKeyless               // compaction needs a key (Kafka rejects keyless records at produce)
)

func (f recordFate) String() string {
	switch f {
	case keepRecord:
		return "keep"
	case dropSuperseded:
		return "superseded"
	case dropTombstone:
		return "expired tombstone"
	case dropKeyless:
		return "keyless"
	}
	return fmt.Sprintf("recordFate(%d)", f)
}

// recordFacts is what decide needs to know about one record.
type recordFacts struct {
	offset    int64
	keyless   bool
	tombstone bool
	// latest is the offset of the key's latest record in the offset map, -1 when
	// the key is not in it (none of the dirty section's records has it).
	latest int64
	// clean reports whether the record was already clean when the pass began, and
	// cleanedAtMs since when.
	clean       bool
	cleanedAtMs int64
}

// decide applies the compaction rules to one record: a record without a key goes;
// a record whose key has a later record goes; a tombstone goes once it has been
// clean for longer than deleteRetention; everything else stays. A record is never
// judged against a later record outside the offset map, so a pass that maps only
// part of the dirty section keeps what the rest might supersede.
func decide(r recordFacts, nowMs int64, deleteRetention time.Duration) recordFate {
	switch {
	case r.keyless:
		return dropKeyless
	case r.latest > r.offset:
		return dropSuperseded
	case r.tombstone && r.clean && nowMs-r.cleanedAtMs > deleteRetention.Milliseconds():
		return dropTombstone
	}
	return keepRecord
}

// cleaner filters the batches of one pass. It is used by one goroutine.
type cleaner struct {
	keys      offsetMap
	producers map[int64]int64 // producer id -> base offset of its last data batch in the log
	lastBatch map[int64]int64 // producer id -> base offset of its last batch, markers included
	aborted   map[int64]bool  // base offsets of aborted transactions' batches
	// txnKept notes the producers whose transaction (since their previous
	// marker) has a batch this pass keeps: its marker must stay. txnRead
	// notes those whose transaction has a batch this pass reads: if it
	// keeps none, the transaction becomes empty now.
	txnKept, txnRead map[int64]bool
	// markersRemoved holds the offsets of the transaction markers this pass
	// removes: their aborted-transaction index entries go with them.
	markersRemoved  map[int64]bool
	state           *cleanerState // as it was when the pass began
	nowMs           int64
	deleteRetention time.Duration
	stats           *CompactStats
	// tombstones[i] records that a tombstone, or a transaction marker that
	// may go once the retention passes, was kept in state.ranges[i]; the extra
	// last element stands for the dirty section.
	tombstones []bool
	// markers are the marker clocks of the next state, in offset order;
	// runEnded: a marker the last one would cover has an earlier clock.
	markers  []markerClock
	runEnded bool

	records passRecords // the records of the batch being filtered
	kept    []byte      // surviving records of the batch being filtered
	out     []byte      // the rewritten batch
	zbuf    bytes.Buffer
}

// filter returns what becomes of the validated batch b: b itself, with copied set,
// when every record stays; a rewritten batch; or nil when the batch goes. A
// rewritten batch keeps the base offset, lastOffsetDelta (so its offset range and
// its producer's last sequence survive, as in Kafka), leader epoch, attributes,
// producer id, epoch and base sequence, first timestamp and codec; the kept records
// are copied unchanged (their deltas stay valid), recompressed with the batch's
// codec, and the max timestamp is recomputed from them (a LogAppendTime batch keeps
// its own). Every record of an aborted transaction goes. A transaction marker
// goes (filterControl) DeleteRetention after its transaction lost its last batch,
// unless it is its producer's last batch; other control batches are copied. A
// batch that loses every record stays as an empty batch (no records,
// uncompressed) when it is its idempotent producer's last batch in the log, so
// the producer's sequence state survives a restart; otherwise it goes. The
// returned slice is valid until the next call.
func (c *cleaner) filter(b []byte, h *batch.Header) (out []byte, copied bool, err error) {
	c.stats.RecordsRead += int64(h.NumRecords)
	if h.Control() {
		return c.filterControl(b, h)
	}
	out, copied, err = c.filterData(b, h)
	if err == nil && h.Transactional() {
		c.txnRead[h.ProducerID] = true
		if out != nil {
			c.txnKept[h.ProducerID] = true
		}
	}
	return out, copied, err
}

// filterControl decides on a control batch, as Kafka's cleaner does with
// transaction markers: a marker stays while any batch of its transaction is
// left below it (even one kept empty: without the marker a replica scanning
// the log would find that transaction open), and then for DeleteRetention
// from when its transaction became empty: the pass that removed its last
// batch, or, if the transaction was empty by then, the pass that cleaned the
// marker (a reader that fetched the transaction's batches before they went
// still needs the marker). A marker that is its producer's last batch stays
// too, so the producer's epoch survives (Kafka keeps such a batch empty).
// Other control batches stay.
func (c *cleaner) filterControl(b []byte, h *batch.Header) ([]byte, bool, error) {
	typ, err := batch.ParseControl(b)
	if err != nil || (typ != batch.ControlAbort && typ != batch.ControlCommit) {
		c.stats.BatchesCopied++
		return b, true, nil
	}
	kept, read := c.txnKept[h.ProducerID], c.txnRead[h.ProducerID]
	delete(c.txnKept, h.ProducerID)
	delete(c.txnRead, h.ProducerID)
	last := c.lastBatch[h.ProducerID] == h.BaseOffset
	ri, clean := c.state.rangeOf(h.BaseOffset)
	switch {
	case kept:
	case !clean:
		// Its clock starts now, with its range's.
		if !last {
			c.tombstones[len(c.state.ranges)] = true
		}
	default:
		rangeMs := c.state.ranges[ri].atMs
		atMs := rangeMs
		if read {
			atMs = c.nowMs // its transaction's last batches go in this pass
		} else if ms, ok := c.state.markerClock(h.BaseOffset); ok {
			atMs = max(atMs, ms)
		}
		expired := c.nowMs-atMs > c.deleteRetention.Milliseconds()
		switch {
		case expired && !last:
			c.stats.MarkersRemoved++
			c.stats.BatchesRemoved++
			c.markersRemoved[h.BaseOffset] = true
			return nil, false, nil
		case expired || atMs == rangeMs:
			// Its range's clock serves.
			if !expired && !last {
				c.tombstones[ri] = true // a pass is due once the retention passes
			}
			c.waitFrom(h.BaseOffset, atMs, false, false)
		default:
			c.waitFrom(h.BaseOffset, atMs, true, !last)
		}
	}
	c.stats.BatchesCopied++
	return b, true, nil
}

// emptiedUnreached reports whether a transaction lost its last batch in this
// pass while the pass has not reached its marker.
func (c *cleaner) emptiedUnreached() bool {
	for pid := range c.txnRead {
		if !c.txnKept[pid] {
			return true
		}
	}
	return false
}

// waitFrom notes a clean marker kept at offset that waits since atMs: a marker
// clock of the next state if own (its range's clock does not serve), which
// extends the last one if that has the same time and nothing ended it. A
// marker without a clock of its own ends the last clock if that is later (it
// would cover the marker and move its clock); others leave it be.
func (c *cleaner) waitFrom(offset, atMs int64, own, due bool) {
	n := len(c.markers)
	switch {
	case !own:
		c.runEnded = c.runEnded || n > 0 && c.markers[n-1].atMs > atMs
	case n > 0 && !c.runEnded && c.markers[n-1].atMs == atMs:
		c.markers[n-1].to = offset
		c.markers[n-1].due = c.markers[n-1].due || due
	default:
		c.markers = append(c.markers, markerClock{from: offset, to: offset, atMs: atMs, due: due})
		c.runEnded = false
	}
}

// filterData is filter for a batch that is not a control batch.
func (c *cleaner) filterData(b []byte, h *batch.Header) (out []byte, copied bool, err error) {
	switch {
	case h.NumRecords == 0:
		// Kept empty by an earlier pass: only while it is still the producer's last.
		if c.isProducersLast(h) {
			c.stats.BatchesCopied++
			return b, true, nil
		}
		c.stats.BatchesRemoved++
		return nil, false, nil
	case c.aborted[h.BaseOffset]:
		// An aborted transaction's records go whatever their keys.
		c.stats.AbortedRemoved += int64(h.NumRecords)
		if c.isProducersLast(h) {
			c.stats.EmptyBatchesKept++
			c.kept = c.kept[:0]
			out, err = c.rebuild(h, 0, 0)
			return out, false, err
		}
		c.stats.BatchesRemoved++
		return nil, false, nil
	}
	records, err := c.records.of(b, h)
	if err != nil {
		return nil, false, err
	}
	c.kept = c.kept[:0]
	var n int32
	var maxDelta int64
	err = batch.WalkRecords(records, h.NumRecords, func(r batch.RawRecord) error {
		f := recordFacts{offset: h.BaseOffset + int64(r.OffsetDelta), keyless: r.Key == nil, tombstone: r.NullValue, latest: -1}
		if !f.keyless {
			if o, ok := c.keys.get(r.Key); ok {
				f.latest = o
			}
		}
		ri, clean := c.state.rangeOf(f.offset)
		if clean {
			f.clean, f.cleanedAtMs = true, c.state.ranges[ri].atMs
		} else {
			ri = len(c.state.ranges)
		}
		switch decide(f, c.nowMs, c.deleteRetention) {
		case keepRecord:
			if f.tombstone {
				c.tombstones[ri] = true
			}
			if n == 0 || r.TimestampDelta > maxDelta {
				maxDelta = r.TimestampDelta
			}
			c.kept = append(c.kept, r.Bytes...)
			n++
		case dropSuperseded:
			c.stats.Superseded++
		case dropTombstone:
			c.stats.TombstonesRemoved++
		case dropKeyless:
			c.stats.KeylessRemoved++
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	switch {
	case n == h.NumRecords:
		c.stats.BatchesCopied++
		return b, true, nil
	case n == 0 && c.isProducersLast(h):
		c.stats.EmptyBatchesKept++
		out, err = c.rebuild(h, 0, 0)
		return out, false, err
	case n == 0:
		c.stats.BatchesRemoved++
		return nil, false, nil
	}
	c.stats.BatchesRewritten++
	out, err = c.rebuild(h, n, maxDelta)
	return out, false, err
}

// isProducersLast reports whether h is its idempotent producer's last batch.
func (c *cleaner) isProducersLast(h *batch.Header) bool {
	last, ok := c.producers[h.ProducerID]
	return h.Idempotent() && ok && last == h.BaseOffset
}

// codecBits are the attribute bits holding the compression codec.
const codecBits = 0x07

// rebuild encodes a batch with h's header fields holding the n records in c.kept
// (none: an empty, uncompressed batch with h's timestamps).
func (c *cleaner) rebuild(h *batch.Header, n int32, maxDelta int64) ([]byte, error) {
	attrs, body, maxTS := h.Attributes, c.kept, h.MaxTimestamp
	if n == 0 {
		attrs &^= codecBits
		body = nil
	} else {
		if !h.LogAppendTime() {
			maxTS = h.FirstTimestamp + maxDelta
		}
		if codec := h.Codec(); codec != batch.CodecNone {
			var err error
			if body, err = c.compress(codec, body); err != nil {
				return nil, err
			}
		}
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          h.BaseOffset,
		Length:               int32(batch.HeaderSize - batch.LengthPrefix + len(body)),
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      h.LastOffsetDelta,
		FirstTimestamp:       h.FirstTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           n,
		Records:              body,
	}
	c.out = rb.AppendTo(c.out[:0])
	binary.BigEndian.PutUint32(c.out[17:21], batch.Checksum(c.out))
	return c.out, nil
}

// compress compresses records with codec.
func (c *cleaner) compress(codec batch.Codec, records []byte) ([]byte, error) {
	c.zbuf.Reset()
	return batch.Compress(&c.zbuf, records, batch.Compression{Codec: codec, Level: batch.DefaultLevel(codec)})
}
