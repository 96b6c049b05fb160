package storage

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// Chunk is a range of whole batches in one segment file, returned by Read. Send it
// with positional sendfile(2) from File (use vfs.OSFile; never the file's seek
// offset: the descriptor is shared by every reader), or copy it with Bytes or
// ReadInto. The segment file stays open until Release, even if retention or
// truncation deletes the segment meanwhile, so the descriptor is never reused
// under the reader. An empty Chunk (Size 0) holds nothing and needs no Release,
// though calling it is harmless.
type Chunk struct {
	File vfs.File
	Pos  int64 // position of the first batch in File
	Size int   // bytes of whole batches
	// FirstOffset is the base offset of the first batch (below the offset asked
	// for when that lies inside the batch; above it when compaction removed the
	// offsets in between); NextOffset is the offset just past the last batch, where
	// the next Read should start.
	FirstOffset int64
	NextOffset  int64

	seg *segment
}

// Release lets the segment file be closed. Call it exactly once per non-empty
// Chunk, after the bytes were sent; it is a no-op on an empty or released Chunk
// (released through this same variable).
func (c *Chunk) Release() {
	if c.seg != nil {
		c.seg.release()
		c.seg = nil
	}
}

// Bytes returns a copy of the chunk's bytes.
func (c *Chunk) Bytes() ([]byte, error) {
	b := make([]byte, c.Size)
	n, err := c.ReadInto(b)
	return b[:n], err
}

// ReadInto copies the chunk's bytes into dst, which must hold Size bytes, and
// returns Size.
func (c *Chunk) ReadInto(dst []byte) (int, error) {
	if len(dst) < c.Size {
		return 0, io.ErrShortBuffer
	}
	if c.Size == 0 {
		return 0, nil
	}
	n, err := c.File.ReadAt(dst[:c.Size], c.Pos)
	if n == c.Size {
		return n, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Read returns the whole batches starting with the one that holds offset (or, when
// compaction removed offset, the first batch after it), within one segment, ending before the batch that holds maxOffset (the high-water mark:
// batches are never split), and at most maxBytes long unless the first batch alone
// is larger, in which case it is exactly that batch (Kafka's "at least one batch",
// so a consumer can always make progress). Reading at the log end offset, or with
// maxOffset <= offset, gives an empty Chunk. An offset below the log start offset
// or above the log end offset gives ErrOffsetOutOfRange. A non-empty Chunk must be
// released. Read does not allocate.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Chunk, error) {
	v, err := l.acquireReadStart(offset, maxOffset)
	if err != nil {
		return Chunk{}, err
	}
	// The segment is read holding a reference to it but no lock: readSegment
	// does I/O.
	for v.s != nil {
		c, err := l.readView(v, offset, maxBytes, maxOffset)
		if err != errNoBatch {
			return c, err
		}
		// Compaction removed every batch of the segment at or after offset:
		// read on from the next one.
		v = l.acquireSegmentAfter(v.s.base)
	}
	return Chunk{FirstOffset: offset, NextOffset: offset}, nil
}

// readView reads within the acquired segment of v. The chunk keeps the
// reference when it holds bytes; otherwise, and when the read panics, the
// segment is released.
func (l *Log) readView(v segmentView, offset int64, maxBytes int, maxOffset int64) (c Chunk, err error) {
	kept := false
	defer func() {
		if !kept {
			v.s.release()
		}
	}()
	c, err = l.readSegment(v.s, v.size, v.next, offset, maxBytes, maxOffset)
	if err != nil || c.Size == 0 {
		c.seg = nil
		return c, err
	}
	kept = true
	return c, nil
}

// acquireReadStart returns, acquired, the segment holding offset with its
// extent, or no segment when Read answers an empty Chunk without reading, or
// the error Read returns.
func (l *Log) acquireReadStart(offset, maxOffset int64) (segmentView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return segmentView{}, ErrClosed
	}
	logStart, leo := l.mu.logStart.Load(), l.mu.leo.Load()
	if offset < logStart || offset > leo {
		return segmentView{}, fmt.Errorf("%w: offset %d, log is [%d, %d]", ErrOffsetOutOfRange, offset, logStart, leo)
	}
	if offset == leo || maxOffset <= offset {
		return segmentView{}, nil
	}
	return acquireViewLocked(l.segmentForLocked(offset)), nil
}

// acquireSegmentAfter returns, acquired, the first segment whose base is above
// base, with its extent, or no segment when there is none or the log is closed.
func (l *Log) acquireSegmentAfter(base int64) segmentView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segmentAfterLocked(base)
	if s == nil || l.mu.closed {
		return segmentView{}
	}
	return acquireViewLocked(s)
}

// errNoBatch (internal): a segment holds no batch at or after the offset sought.
var errNoBatch = errors.New("storage: no batch at or after offset in segment")

// segmentAfterLocked returns the first segment whose base is above base, or nil;
// mu must be held.
func (l *Log) segmentAfterLocked(base int64) *segment {
	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > base })
	if i == len(segs) {
		return nil
	}
	return segs[i]
}

// segmentFor returns the segment holding offset, which must be within the log.
func (l *Log) segmentFor(offset int64) *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segmentForLocked(offset)
}

// segmentForLocked returns the segment holding offset (the last one whose base is
// <= offset); mu must be held and offset must be within the log.
func (l *Log) segmentForLocked(offset int64) *segment {
	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return segs[max(i-1, 0)]
}

// readSegment does Read's work within one segment of the given extent. It returns
// errNoBatch when every batch of the segment ends before offset.
func (l *Log) readSegment(s *segment, size, next, offset int64, maxBytes int, maxOffset int64) (Chunk, error) {
	empty := Chunk{FirstOffset: offset, NextOffset: offset}
	if err := s.ensureIndexes(size, next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
		return empty, err
	}
	sc := headerScanner(s.log, s.lookup(offset), size)
	defer sc.done()
	if !sc.seek(offset) {
		if sc.err != nil {
			return empty, corrupt(s.log.Name(), sc.pos, sc.err)
		}
		return empty, errNoBatch
	}
	first, start := sc.h, sc.bpos
	if first.LastOffset() >= maxOffset {
		return empty, nil
	}
	c := Chunk{File: s.log, Pos: start, FirstOffset: first.BaseOffset, NextOffset: next, seg: s}
	limit := size
	if maxOffset < next {
		// Stop before the batch holding maxOffset.
		if p := s.lookup(maxOffset); p > sc.pos {
			sc.pos = p
		}
		if sc.seek(maxOffset) {
			// The batch holding maxOffset, or the first after it if compaction
			// removed maxOffset: then the offsets up to it are empty.
			limit, c.NextOffset = sc.bpos, min(sc.h.BaseOffset, maxOffset)
		} else if sc.err != nil {
			return empty, corrupt(s.log.Name(), sc.pos, sc.err)
		} else {
			// Compaction removed the segment's batches from maxOffset on.
			limit, c.NextOffset = size, maxOffset
		}
	}
	if want := start + int64(max(maxBytes, 0)); want < limit {
		// Keep the batches that end by want, and at least the first. Start from the
		// last index entry at or before want, if it is past the first batch.
		end, nextOff := start+int64(first.Size()), first.NextOffset()
		e := s.lookupPos(want)
		if p := int64(e.pos); p > end {
			end, nextOff = p, s.base+int64(e.rel)
		}
		sc.pos = end
		for sc.next() && sc.pos <= want {
			end, nextOff = sc.pos, sc.h.NextOffset()
		}
		if sc.err != nil {
			return empty, corrupt(s.log.Name(), sc.bpos, sc.err)
		}
		limit, c.NextOffset = end, nextOff
	}
	c.Size = int(limit - start)
	return c, nil
}

// lookup returns the position of the last indexed batch at or before offset.
func (s *segment) lookup(offset int64) int64 {
	rel, ok := relOffset(offset, s.base)
	if !ok {
		return 0
	}
	return int64(s.entry(func(x *offsetIndex) int { return x.find(rel) }).pos)
}

// lookupPos returns the last index entry at or before position pos.
func (s *segment) lookupPos(pos int64) indexEntry {
	return s.entry(func(x *offsetIndex) int { return x.findPos(uint32(pos)) })
}

// entry returns the offset-index entry find picks, or the zero entry (the
// segment's first batch) when it picks none. An entry read from the index
// file is checked the first time (checkEntry).
func (s *segment) entry(find func(*offsetIndex) int) indexEntry {
	if e, trusted, _ := s.pickEntry(find); trusted {
		return e
	}
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.checkEntry(find)
}

// pickEntry returns the entry find picks (the zero entry for none), whether
// it needs no check, and the log size the entries read from the file were
// loaded with.
func (s *segment) pickEntry(find func(*offsetIndex) int) (e indexEntry, trusted bool, fileLogSize int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := &s.mu.index
	i := find(x)
	if i < 0 {
		return indexEntry{}, true, x.fileLogSize
	}
	return x.entries[i], x.trusted(i), x.fileLogSize
}

// checkEntry returns the entry find picks, first checking an entry read from
// the index file against the log (batchStartsAt). If the check fails, the
// file was damaged though it decoded, and both indexes are rebuilt from the
// log (one scan, as for a missing index file); the zero entry is returned,
// from which any scan is right. checkMu must be held; the log is read without
// mu.
func (s *segment) checkEntry(find func(*offsetIndex) int) indexEntry {
	e, trusted, limit := s.pickEntry(find)
	if trusted {
		return e
	}
	if s.batchStartsAt(int64(e.pos), s.base+int64(e.rel), limit) {
		s.markEntryChecked(find, e)
		return e
	}
	// A failed rebuild leaves indexes that a later ensureIndexes rebuilds
	// again; the reads meanwhile scan from the segment's start. The entries
	// read from the file cover the log as it was loaded, limit bytes; a
	// segment changed since is rebuilt up to what it indexed (rebuild).
	_ = s.rebuildAside(limit, s.indexInterval)
	return indexEntry{}
}

// markEntryChecked records that entry e, which find picked, starts a batch,
// unless a truncation or a rebuild replaced it meanwhile.
func (s *segment) markEntryChecked(find func(*offsetIndex) int, e indexEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := &s.mu.index
	if i := find(x); i >= 0 && !x.trusted(i) && x.entries[i] == e {
		x.markChecked(i)
	}
}

// batchStartsAt reports whether the segment's batch at pos starts at offset:
// its header says so, its length ends it inside the first size bytes, and
// there either those end or the next batch's header follows with a later
// offset. A position inside a batch passes only if the bytes there imitate
// all of it.
func (s *segment) batchStartsAt(pos, offset, size int64) bool {
	h, n, ok := s.headerAt(pos)
	if !ok || h.BaseOffset != offset || pos+int64(n) > size {
		return false
	}
	if end := pos + int64(n); end < size {
		next, _, ok := s.headerAt(end)
		return ok && next.BaseOffset > h.LastOffset()
	}
	return true
}

// headerAt reads the header of the batch at pos, with its frame size.
func (s *segment) headerAt(pos int64) (h batch.Header, size int, ok bool) {
	var hdr [batch.HeaderSize]byte
	if n, _ := s.log.ReadAt(hdr[:], pos); n != len(hdr) {
		return h, 0, false
	}
	h, err := batch.ParseHeader(hdr[:])
	if err != nil || h.Magic != 2 || h.LastOffsetDelta < 0 {
		return h, 0, false
	}
	size, err = batch.FrameSize(hdr[:])
	return h, size, err == nil
}

// seek advances the scanner to the batch holding offset (the first whose last
// offset is >= offset) and reports whether it found one.
func (sc *scanner) seek(offset int64) bool {
	for sc.next() {
		if sc.h.LastOffset() >= offset {
			return true
		}
	}
	return false
}

// scanFailure explains why a seek inside a segment's published extent failed.
func (s *segment) scanFailure(sc *scanner, offset int64) error {
	if sc.err != nil {
		return corrupt(s.log.Name(), sc.pos, sc.err)
	}
	return fmt.Errorf("%w: %s: offset %d not found", ErrCorruptSegment, s.log.Name(), offset)
}

// segmentsFrom returns, acquired, the segments that may hold offsets >= from, with
// their extents. Release each.
func (l *Log) segmentsFrom(from int64) ([]segmentView, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, 0, ErrClosed
	}
	var views []segmentView
	for _, s := range l.mu.segments {
		if s.next <= from || s.size == 0 {
			continue
		}
		views = append(views, acquireViewLocked(s))
	}
	return views, l.mu.logStart.Load(), nil
}

// segmentView is a segment with the extent it had when it was acquired.
type segmentView struct {
	s          *segment
	size, next int64
}

// acquireViewLocked acquires s and returns it with its extent; the log's mu
// must be held.
func acquireViewLocked(s *segment) segmentView {
	s.acquire()
	return segmentView{s, s.size, s.next}
}

func releaseViews(views []segmentView) {
	for _, v := range views {
		v.s.release()
	}
}

// ScanBatches calls fn with the header of every batch whose last offset is >= from,
// in offset order, up to the log end offset at the time of the call (the producer
// state rebuild on restart). For control batches (transaction markers) body is the
// whole batch, so the marker type can be read; otherwise it is nil. body is only
// valid during the call. An error from fn stops the scan and is returned.
func (l *Log) ScanBatches(from int64, fn func(h batch.Header, body []byte) error) error {
	views, _, err := l.segmentsFrom(from)
	if err != nil {
		return err
	}
	defer releaseViews(views)
	var body []byte
	for _, v := range views {
		s := v.s
		if err := s.ensureIndexes(v.size, v.next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
			return err
		}
		sc := headerScanner(s.log, s.lookup(from), v.size)
		for sc.next() {
			h := sc.h
			if h.LastOffset() < from {
				continue
			}
			var b []byte
			if h.Control() {
				if body, err = readBatchAt(s.log, sc.bpos, h.Size(), body); err != nil {
					sc.done()
					return err
				}
				b = body
			}
			if err := fn(h, b); err != nil {
				sc.done()
				return err
			}
		}
		sc.done()
		if sc.err != nil {
			return corrupt(s.log.Name(), sc.pos, sc.err)
		}
	}
	return nil
}

// readBatchAt reads the size-byte batch at pos into buf (grown as needed) and
// validates it.
func readBatchAt(f vfs.File, pos int64, size int, buf []byte) ([]byte, error) {
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if n, err := f.ReadAt(buf, pos); n != size {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if _, err := batch.ValidateStored(buf); err != nil {
		return nil, corrupt(f.Name(), pos, err)
	}
	return buf, nil
}

// A timestampLookup looks for the first record whose timestamp is >= ts and
// whose offset is >= minOffset, batch by batch, decompressing each into one
// pooled buffer (release returns it). As in Kafka, each record of a
// compressed batch read is held to maxRecord bytes (the topic's
// max.decompressed.message.bytes): a larger one before the answer fails the
// lookup, INVALID_RECORD.
type timestampLookup struct {
	ts, minOffset int64
	maxRecord     int
	records       *batch.RecordsBuffer
}

func newTimestampLookup(ts, minOffset int64, maxRecord int) *timestampLookup {
	return &timestampLookup{ts: ts, minOffset: minOffset, maxRecord: maxRecord, records: batch.GetRecordsBuffer()}
}

func (q *timestampLookup) release() { q.records.Release() }

// in returns the answer in the batch b (header h), if b holds it.
func (q *timestampLookup) in(b []byte, h *batch.Header) (int64, int64, bool, error) {
	records, err := q.records.Section(*h, b)
	if err != nil {
		return 0, 0, false, err
	}
	return batch.FindTimestamp(h, records, q.ts, q.minOffset, q.maxRecord)
}

// inBatchAt is in for the batch at pos of f; a LogAppendTime batch that
// cannot hold the answer is not read.
func (q *timestampLookup) inBatchAt(f vfs.File, pos int64, h *batch.Header) (int64, int64, bool, error) {
	if h.LogAppendTime() && (h.MaxTimestamp < q.ts || h.LastOffset() < q.minOffset) {
		return 0, 0, false, nil
	}
	b, err := readBatchAt(f, pos, h.Size(), nil)
	if err != nil {
		return 0, 0, false, err
	}
	off, t, ok, err := q.in(b, h)
	if err != nil {
		err = recordsFailure(f.Name(), pos, err)
	}
	return off, t, ok, err
}

// limitFailure wraps err, from the records of the batch at where, if it
// refuses them for their size: a record above the topic's
// max.decompressed.message.bytes (batch.ErrRecordTooLarge) or records
// decompressing past the bound (batch.ErrDecompressedTooLarge). Neither is
// corrupt data: Kafka answers INVALID_RECORD. It is nil for other errors.
func limitFailure(where string, err error) error {
	switch {
	case errors.Is(err, batch.ErrRecordTooLarge):
		return fmt.Errorf("%s: %w (max.decompressed.message.bytes)", where, err)
	case errors.Is(err, batch.ErrDecompressedTooLarge):
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// recordsFailure wraps err, from reading the records of the batch at pos in
// the segment file name: a limitFailure, or else a corrupt segment.
func recordsFailure(name string, pos int64, err error) error {
	if lf := limitFailure(fmt.Sprintf("%s at %d", name, pos), err); lf != nil {
		return lf
	}
	return corrupt(name, pos, err)
}

// OffsetForTimestamp answers ListOffsets for a timestamp: the offset and timestamp
// of the first record at or after the log start offset whose timestamp is >= ts.
// ok is false when every record is older. Compressed batches are decompressed to
// find the exact record, their records held to maxRecord bytes (the topic's
// max.decompressed.message.bytes; see timestampLookup).
func (l *Log) OffsetForTimestamp(ts int64, maxRecord int) (offset, timestamp int64, ok bool, err error) {
	views, logStart, err := l.segmentsFrom(0)
	if err != nil {
		return 0, 0, false, err
	}
	defer releaseViews(views)
	q := newTimestampLookup(ts, logStart, maxRecord)
	defer q.release()
	for _, v := range views {
		s := v.s
		if v.next <= logStart {
			continue
		}
		if err := s.ensureIndexes(v.size, v.next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
			return 0, 0, false, err
		}
		maxTS, from, err := s.timestampBounds(ts, &l.stats)
		if err != nil {
			return 0, 0, false, err
		}
		if maxTS < ts {
			continue
		}
		from = max(from, logStart)
		sc := headerScanner(s.log, s.lookup(from), v.size)
		for sc.next() {
			h := sc.h
			if h.LastOffset() < from || h.MaxTimestamp < ts {
				continue
			}
			offset, timestamp, ok, err = q.inBatchAt(s.log, sc.bpos, &h)
			if err != nil || ok {
				sc.done()
				return offset, timestamp, ok, err
			}
		}
		sc.done()
		if sc.err != nil {
			return 0, 0, false, corrupt(s.log.Name(), sc.pos, sc.err)
		}
	}
	return 0, 0, false, nil
}

// timestampBounds returns the segment's largest timestamp (maxTimestamp) and
// the offset its time index says a search for ts starts at: that of the last
// entry older than ts.
func (s *segment) timestampBounds(ts int64, stats *statCounters) (maxTS, from int64, err error) {
	if maxTS, _, err = s.maxTimestamp(stats); err != nil {
		return -1, 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maxTS, s.base + int64(s.mu.tindex.lookupBelow(ts)), nil
}

// MaxTimestamp answers ListOffsets with timestamp -3 (KIP-734): the offset and
// timestamp of the first record holding the largest timestamp in the log, or
// (-1, -1) for a log without timestamps. Records are held to maxRecord as by
// OffsetForTimestamp.
func (l *Log) MaxTimestamp(maxRecord int) (offset, timestamp int64, err error) {
	views, logStart, err := l.segmentsFrom(0)
	if err != nil {
		return -1, -1, err
	}
	defer releaseViews(views)
	var best *segmentView
	bestTS, bestOff := int64(-1), int64(-1)
	for i := range views {
		v := &views[i]
		if v.next <= logStart {
			continue
		}
		if err := v.s.ensureIndexes(v.size, v.next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
			return -1, -1, err
		}
		ts, off, err := v.s.maxTimestamp(&l.stats)
		if err != nil {
			return -1, -1, err
		}
		if ts > bestTS {
			best, bestTS, bestOff = v, ts, off
		}
	}
	if best == nil {
		return -1, -1, nil
	}
	s := best.s
	sc := headerScanner(s.log, s.lookup(bestOff), best.size)
	defer sc.done()
	if !sc.seek(bestOff) {
		return -1, -1, s.scanFailure(&sc, bestOff)
	}
	h := sc.h
	q := newTimestampLookup(bestTS, 0, maxRecord)
	defer q.release()
	off, ts, ok, err := q.inBatchAt(s.log, sc.bpos, &h)
	if err != nil || !ok {
		// A batch whose records disagree with its header: report the batch.
		return max(bestOff, logStart), bestTS, err
	}
	return max(off, logStart), ts, nil
}
