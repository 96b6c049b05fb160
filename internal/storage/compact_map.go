package storage

import (
	"math"

	"github.com/strata-stream/strata/internal/batch"
)

// offsetMap maps each key of the dirty section to the offset of its latest record.
// Keys are kept whole (Kafka keeps 16-byte hashes), so two keys never collide. The
// map holds positions in latest, so that updating a known key is a lookup, which
// does not allocate, rather than an assignment, which copies the key.
type offsetMap struct {
	index  map[string]int
	latest []int64
	bytes  int64 // estimated memory held
}

func newOffsetMap() offsetMap { return offsetMap{index: make(map[string]int)} }

// mapEntryOverhead estimates a key's memory besides its bytes: the string header,
// the position, the offset and the map's own bookkeeping.
const mapEntryOverhead = 56

// put records that key's latest record is at offset.
func (m *offsetMap) put(key []byte, offset int64) {
	if i, ok := m.index[string(key)]; ok {
		m.latest[i] = offset
		return
	}
	m.index[string(key)] = len(m.latest)
	m.latest = append(m.latest, offset)
	m.bytes += int64(len(key)) + mapEntryOverhead
}

// get returns the offset of key's latest record.
func (m *offsetMap) get(key []byte) (int64, bool) {
	i, ok := m.index[string(key)]
	if !ok {
		return 0, false
	}
	return m.latest[i], true
}

// passRecords reads the records of a pass's batches into one pooled buffer,
// each record of a compressed batch held to maxRecord bytes
// (CompactOptions.MaxRecordBytes), as Kafka's cleaner holds it to
// max.decompressed.message.bytes: a larger one fails the pass.
type passRecords struct {
	buf       *batch.RecordsBuffer
	maxRecord int
}

func newPassRecords(opts CompactOptions) passRecords {
	r := passRecords{buf: batch.GetRecordsBuffer(), maxRecord: opts.MaxRecordBytes}
	if r.maxRecord == 0 {
		r.maxRecord = math.MaxInt
	}
	return r
}

// of returns the record section of the batch b (header h), valid until the
// next call; an error is not wrapped (recordsFailure).
func (r passRecords) of(b []byte, h *batch.Header) ([]byte, error) {
	return r.buf.SectionWithin(*h, b, r.maxRecord)
}

// scanWindow is the read window of the cleaner's full scans.
const scanWindow = 1 << 20

// buildOffsetMap reads the dirty section, from the plan's first dirty offset
// through its cleanable segments, into an offset map. Before each segment after
// the first it checks the budget: once the map holds budget bytes the section ends
// at that segment's base, so the map may exceed the budget by one segment's keys.
// It returns the map and the end of the section it covers (the first dirty offset
// itself when no cleanable segment is dirty). Control batches, batches of aborted
// transactions and keyless records are skipped.
func buildOffsetMap(p *compactPlan, budget int64, aborted map[int64]bool, recs passRecords) (offsetMap, int64, error) {
	m := newOffsetMap()
	started := false
	for i := range p.cleanable {
		if p.upper(i) <= p.firstDirty {
			continue
		}
		v := p.all[i]
		if started && m.bytes >= budget {
			return m, v.s.base, nil
		}
		started = true
		if err := m.addSegment(v, p.firstDirty, aborted, recs); err != nil {
			return m, 0, err
		}
	}
	if !started {
		return m, p.firstDirty, nil
	}
	return m, p.upper(p.cleanable - 1), nil
}

// addSegment adds the records at or after from of one segment.
func (m *offsetMap) addSegment(v segmentView, from int64, aborted map[int64]bool, recs passRecords) error {
	sc := fullScanner(v.s.log, v.s.lookup(from), v.size, scanWindow)
	defer sc.done()
	for sc.next() {
		h := sc.h
		if h.Control() || h.NumRecords == 0 || h.LastOffset() < from || aborted[h.BaseOffset] {
			continue
		}
		records, err := recs.of(sc.b, &h)
		if err != nil {
			return recordsFailure(v.s.log.Name(), sc.bpos, err)
		}
		err = batch.WalkRecords(records, h.NumRecords, func(r batch.RawRecord) error {
			offset := h.BaseOffset + int64(r.OffsetDelta)
			if r.Key == nil || offset < from {
				return nil
			}
			m.put(r.Key, offset)
			return nil
		})
		if err != nil {
			return corrupt(v.s.log.Name(), sc.bpos, err)
		}
	}
	if sc.err != nil {
		return corrupt(v.s.log.Name(), sc.pos, sc.err)
	}
	return nil
}

// producerScan is what a pass learns from the headers of the whole log.
type producerScan struct {
	// last maps each idempotent producer to the base offset of its last data batch.
	last map[int64]int64
	// lastBatch is last with transaction markers included.
	lastBatch map[int64]int64
	// aborted holds the base offsets of the data batches of aborted transactions:
	// their records neither supersede others nor stay (Kafka's cleaner discards
	// them), so an aborted write can never hide a committed one.
	aborted map[int64]bool
}

// scanProducers reads the headers of every batch in views (and the record of each
// transaction marker) in offset order.
func scanProducers(views []segmentView) (producerScan, error) {
	ps := producerScan{last: make(map[int64]int64), lastBatch: make(map[int64]int64), aborted: make(map[int64]bool)}
	open := make(map[int64][]int64) // producer id -> its open transaction's batches
	var body []byte
	for _, v := range views {
		sc := headerScanner(v.s.log, 0, v.size)
		for sc.next() {
			h := &sc.h
			switch {
			case h.Control():
				var err error
				if body, err = readBatchAt(v.s.log, sc.bpos, h.Size(), body); err != nil {
					sc.done()
					return ps, err
				}
				typ, err := batch.ParseControl(body)
				if err != nil || (typ != batch.ControlAbort && typ != batch.ControlCommit) {
					continue // not a transaction marker
				}
				ps.lastBatch[h.ProducerID] = h.BaseOffset
				if typ == batch.ControlAbort {
					for _, base := range open[h.ProducerID] {
						ps.aborted[base] = true
					}
				}
				delete(open, h.ProducerID)
			case h.Idempotent():
				ps.last[h.ProducerID] = h.BaseOffset
				ps.lastBatch[h.ProducerID] = h.BaseOffset
				if h.Transactional() {
					open[h.ProducerID] = append(open[h.ProducerID], h.BaseOffset)
				}
			}
		}
		sc.done()
		if sc.err != nil {
			return ps, corrupt(v.s.log.Name(), sc.pos, sc.err)
		}
	}
	return ps, nil
}
