package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/strata-stream/strata/internal/batch"
)

// Producer-state snapshots (Kafka's <offset>.snapshot files). The idempotent-
// producer and transaction state is a function of the batch headers and
// markers in the log, so a partition can always rebuild it by scanning the log
// from its start; on a long log that scan is most of a restart's work. A
// snapshot holds the state as of an offset (every batch below it applied), so
// that opening scans only the batches from that offset on:
//
//  1. After an append that rolled the log's active segment, and when the
//     partition closes with at least closeSnapshotMinBytes of log or with
//     producers and records deleted at its start (the records left may not
//     name them), the partition encodes its state and stores it at its log
//     end offset (storage.Log.WriteProducerSnapshot, under appendMu).
//  2. rebuildProducerState (open, truncation) takes the newest snapshot at an
//     offset within [log start, log end] that decodes (at or below the first
//     segment whose aborted-transaction index it rebuilds, if an abort marker
//     lies between the two), and scans from there.
//     A missing, torn or damaged snapshot is skipped for an older one, and
//     with none the whole log is scanned, as before snapshots existed.
//  3. The log removes snapshots that a crash or a truncation made stale.
//
// The payload (big-endian), inside storage's framed side file:
//
//	version u16 (4)
//	producers u32, then per producer:
//	  producer id i64 | epoch i16 | coordinator epoch i32 | last timestamp i64 |
//	  batches u8 (at most producerBatchesKept), then per batch, oldest first:
//	    first sequence i32 | last sequence i32 | first offset i64 | last offset i64 |
//	    (version 4) max timestamp i64
//	open transactions u32, then per transaction: producer id i64 | first offset i64
//	(versions 1 and 2) aborted transactions u32, then per transaction, by
//	  marker offset: producer id i64 | first offset i64 | marker offset i64
//	(versions 2 to 4) ended transactions whose marker the high-water mark had
//	not passed u32, then per transaction, by marker offset:
//	  first offset i64 | marker offset i64
//
// Versions 1 to 3 still load. Their batches have no max timestamp: a
// producer's last batch takes the producer's last timestamp, the others -1.
// Version 1 has no ended transactions: its markers were written before
// markers held the last stable offset, so none is held. The aborted
// transactions of versions 1 and 2 are skipped: the log's per-segment
// aborted-transaction index holds them now (storage.AbortEntry), rebuilt from
// the log where a segment has none. A decoder refuses any other version, so a
// format change must bump it; an older broker then finds no snapshot it can
// read and scans the log.
const snapshotVersion = 4

// errBadSnapshot: a snapshot payload that does not decode.
var errBadSnapshot = errors.New("malformed producer-state snapshot")

// encodeSnapshot returns the snapshot payload of the state.
func encodeSnapshot(producers *producerState, txns *txnState) []byte {
	b := binary.BigEndian.AppendUint16(nil, snapshotVersion)
	// In producer id order, so equal states give equal files.
	b = binary.BigEndian.AppendUint32(b, uint32(len(producers.entries)))
	for _, pid := range slices.Sorted(maps.Keys(producers.entries)) {
		e := producers.entries[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.timestamp))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(txns.open)))
	for _, pid := range slices.Sorted(maps.Keys(txns.open)) {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint64(b, uint64(txns.open[pid]))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(txns.unreplicated)))
	for _, e := range txns.unreplicated {
		b = binary.BigEndian.AppendUint64(b, uint64(e.first))
		b = binary.BigEndian.AppendUint64(b, uint64(e.marker))
	}
	return b
}

// snapReader decodes big-endian fields with a sticky error.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: %d bytes short", errBadSnapshot, n-len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *snapReader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *snapReader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *snapReader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *snapReader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// count reads an element count and checks that that many elements of at
// least minSize bytes can follow, so a damaged count cannot make the decoder
// allocate without bound.
func (r *snapReader) count(minSize int) int {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: %d elements in %d bytes", errBadSnapshot, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// decodeSnapshot returns the state a snapshot payload holds.
func decodeSnapshot(b []byte) (*producerState, *txnState, error) {
	r := &snapReader{b: b}
	version := r.u16()
	if r.err == nil && (version < 1 || version > snapshotVersion) {
		return nil, nil, fmt.Errorf("%w: version %d", errBadSnapshot, version)
	}
	producers, txns := newProducerState(), newTxnState()
	const producerSize, openSize, abortedSize, endedSize = 8 + 2 + 4 + 8 + 1, 8 + 8, 8 + 8 + 8, 8 + 8
	for range r.count(producerSize) {
		pid := int64(r.u64())
		e := &producerEntry{epoch: int16(r.u16()), coordinatorEpoch: int32(r.u32()), lastTimestamp: int64(r.u64())}
		n := int(r.u8())
		if n > producerBatchesKept {
			return nil, nil, fmt.Errorf("%w: %d batches for producer %d", errBadSnapshot, n, pid)
		}
		e.batches = make([]batchMeta, n, producerBatchesKept)
		for i := range e.batches {
			m := batchMeta{firstSeq: int32(r.u32()), lastSeq: int32(r.u32()), firstOffset: int64(r.u64()), lastOffset: int64(r.u64()), timestamp: -1}
			switch {
			case version >= 4:
				m.timestamp = int64(r.u64())
			case i == n-1:
				m.timestamp = e.lastTimestamp
			}
			e.batches[i] = m
		}
		if _, dup := producers.entries[pid]; dup && r.err == nil {
			return nil, nil, fmt.Errorf("%w: producer %d twice", errBadSnapshot, pid)
		}
		put(&producers.entries, pid, e)
	}
	for range r.count(openSize) {
		pid := int64(r.u64())
		put(&txns.open, pid, int64(r.u64()))
	}
	if version < 3 {
		r.take(r.count(abortedSize) * abortedSize)
	}
	if version >= 2 {
		for range r.count(endedSize) {
			txns.unreplicated = append(txns.unreplicated, endedTxn{first: int64(r.u64()), marker: int64(r.u64())})
		}
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	if len(r.b) != 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes after the state", errBadSnapshot, len(r.b))
	}
	if !sort.SliceIsSorted(txns.unreplicated, func(i, j int) bool { return txns.unreplicated[i].marker < txns.unreplicated[j].marker }) {
		return nil, nil, fmt.Errorf("%w: ended transactions out of order", errBadSnapshot)
	}
	return producers, txns, nil
}

// loadSnapshot returns the state of the newest usable snapshot at or below
// limit and its offset (ok), or empty state and the log start offset (scan
// everything) when there is none. The state leaves out the producers expired
// by now (p.expiry), as Kafka's loadFromSnapshot does; producers the scan from
// the snapshot meets wait for the cleaner, as in Kafka.
func (p *Partition) loadSnapshot(limit int64) (producers *producerState, txns *txnState, from int64, ok bool) {
	start, end := p.log.LogStartOffset(), min(limit, p.log.LogEndOffset())
	for _, off := range p.log.ProducerSnapshots() {
		if off < start || off > end {
			// Below the start, batches between it and the start are gone
			// (retention), and with them markers the state needs.
			continue
		}
		payload, err := p.log.ReadProducerSnapshot(off)
		if err != nil {
			continue // torn or damaged: an older one, or the full scan
		}
		producers, txns, err := decodeSnapshot(payload)
		if err != nil {
			continue
		}
		if cutoff, ok := p.expiry.cutoff(); ok {
			producers.expire(cutoff, txns.inTxn)
		}
		return producers, txns, off, true
	}
	return newProducerState(), newTxnState(), start, false
}

// producerSnapshotAt is the tier's storage.SnapshotFunc: the snapshot payload
// of the producer and transaction state as of offset at, for the object store
// (uploaded with the segment that ends there). It starts from prev, the state
// as of prevAt, or from the newest local snapshot at or below at when that is
// newer or prev is not usable (nil, or below the log start), and applies the
// batches from there to at.
func (p *Partition) producerSnapshotAt(prev []byte, prevAt, at int64) ([]byte, error) {
	producers, txns, from, ok := p.loadSnapshot(at)
	if prev != nil && (!ok || from < prevAt) && prevAt >= p.log.LogStartOffset() && prevAt <= at {
		if pp, pt, err := decodeSnapshot(prev); err == nil {
			producers, txns, from = pp, pt, prevAt
		}
	}
	err := p.log.ScanBatches(from, func(h batch.Header, body []byte) error {
		if h.BaseOffset >= at {
			return errStopScan
		}
		replayBatch(producers, txns, h, body)
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return nil, fmt.Errorf("producer state of %s-%d at %d: %w", p.Topic, p.Index, at, err)
	}
	txns.lastStable(at) // forget the ended transactions below it
	return encodeSnapshot(producers, txns), nil
}

// closeSnapshotMinBytes: a partition whose log is smaller writes no snapshot
// when it closes; reading its batch headers on the next open costs about what
// reading a snapshot would, and a broker with many small partitions would
// otherwise create a file for each at every stop. (A variable for tests.)
var closeSnapshotMinBytes int64 = 1 << 20

// maybeSnapshot writes a snapshot when the log rolled a segment since the
// last one. appendMu must be held.
func (p *Partition) maybeSnapshot() {
	if r := p.log.Rolls(); r != p.snapshotRolls {
		p.snapshotRolls = r
		p.writeSnapshot()
	}
}

// encodeSnapshot encodes the producer and transaction state; appendMu must be
// held.
func (p *Partition) encodeSnapshot() []byte {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.txns.lastStable(p.HighWatermark()) // forget the ended transactions it has passed
	return encodeSnapshot(p.producers, p.txns)
}

// writeSnapshot stores the state at the log end, unless the newest snapshot is
// there already. A failed write is not an error of the partition: the
// snapshot is a shortcut for the next open, which scans instead, and a failing
// disk fails the log's own writes. appendMu must be held.
func (p *Partition) writeSnapshot() {
	end := p.log.LogEndOffset()
	if end == p.snapshotOffset {
		return
	}
	if p.log.WriteProducerSnapshot(end, p.encodeSnapshot()) == nil {
		p.snapshotOffset = end
	}
}
