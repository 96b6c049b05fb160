package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The aborted-transaction index (Kafka's .txnindex). Every segment has one: the
// aborted transactions whose abort marker lies in the segment, by marker
// offset, each with the last stable offset once its marker was written. A
// read_committed fetch collects the transactions overlapping its range from
// the index of the segment holding its start and of later ones, stopping at
// the first entry whose last stable offset reaches the range's end: every
// transaction open then started at or after that offset, so no later marker
// can end one the range holds (Kafka's collectAbortedTransactions). Only the
// active segment's entries are held in memory; a sealed segment's are read
// from its file when a fetch needs them, and its entry count is kept so that
// segments without aborts cost nothing.
//
// The log does not parse transactions: the partition, which tracks them, hands
// it each abort as the marker is appended (AddAbortedTxn), and after Open
// rebuilds the indexes StaleAbortIndex names from the log (RebuildAbortIndex).
// The index of the active segment is written with the segment's other indexes
// when it is sealed (roll, Close), fsynced as they are. Open checks each file:
// one missing (a directory written before the index existed), torn or damaged,
// or written for a different segment size (a crash after appends, or an older
// build that appended to or compacted the segment) makes that segment stale.
// Truncation cuts the entries with the log and rewrites the file durably;
// compaction writes the cleaned segment's file from the entries of the segments
// it replaces, less those whose marker it removed; retention and truncation
// delete the file with its segment.
//
// <base>.txnindex is a side-file frame (len | crc | version | payload) of
// version abortIndexVersion; the payload, big-endian:
//
//	segment base i64 | segment size i64 | count u32, then count x
//	  (producer id i64 | first offset i64 | marker offset i64 | last stable offset i64)
//
// by marker offset. The base and size say which segment, in which state, the
// entries are for.
const (
	abortIndexSuffix  = ".txnindex"
	abortIndexVersion = 1
	abortHeaderSize   = 8 + 8 + 4
	abortEntrySize    = 4 * 8
)

// ErrAbortIndexStale: a read_committed read met a segment whose aborted-
// transaction index is not rebuilt yet (RebuildAbortIndex was not called after
// Open). The partition rebuilds it when it opens the log, so this is a bug.
var ErrAbortIndexStale = errors.New("storage: aborted-transaction index not rebuilt")

// AbortEntry is one entry of the aborted-transaction index: the transaction and
// the partition's last stable offset once its abort marker was written, not
// counting the high-water mark (Kafka's lastStableOffset): the first offset of
// the oldest transaction still open then, or the marker's offset + 1.
type AbortEntry struct {
	AbortedTxn
	LastStableOffset int64
}

// abortIndex is a segment's aborted-transaction index state; segment.mu guards
// it.
type abortIndex struct {
	entries []AbortEntry // held: every entry (the active segment)
	held    bool
	count   int  // entries in the index (len(entries) when held)
	stale   bool // to be rebuilt from the log (RebuildAbortIndex)
}

func encodeAbortIndex(base, size int64, entries []AbortEntry) []byte {
	b := make([]byte, 0, abortHeaderSize+len(entries)*abortEntrySize)
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastStableOffset))
	}
	return frameSideVersion(b, abortIndexVersion)
}

// decodeAbortIndex checks the index file b of a segment at base of size bytes
// and returns its entries.
func decodeAbortIndex(b []byte, base, size int64) ([]AbortEntry, error) {
	payload, v, err := unframeSideVersion(b)
	if err != nil {
		return nil, err
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: aborted-transaction index: %s", ErrCorruptSideFile, why)
	}
	switch {
	case v != abortIndexVersion:
		return nil, bad(fmt.Sprintf("version %d", v))
	case len(payload) < abortHeaderSize:
		return nil, bad("cut short")
	case int64(binary.BigEndian.Uint64(payload)) != base:
		return nil, bad(fmt.Sprintf("written for the segment at %d, not %d", binary.BigEndian.Uint64(payload), base))
	case int64(binary.BigEndian.Uint64(payload[8:])) != size:
		return nil, bad(fmt.Sprintf("written for %d bytes of segment, it has %d", binary.BigEndian.Uint64(payload[8:]), size))
	}
	n := binary.BigEndian.Uint32(payload[16:])
	payload = payload[abortHeaderSize:]
	if uint64(n)*abortEntrySize != uint64(len(payload)) {
		return nil, bad(fmt.Sprintf("%d entries in %d bytes", n, len(payload)))
	}
	entries := make([]AbortEntry, n)
	for i := range entries {
		p := payload[i*abortEntrySize:]
		e := AbortEntry{
			AbortedTxn: AbortedTxn{
				ProducerID:  int64(binary.BigEndian.Uint64(p)),
				FirstOffset: int64(binary.BigEndian.Uint64(p[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(p[16:])),
			},
			LastStableOffset: int64(binary.BigEndian.Uint64(p[24:])),
		}
		if e.LastOffset < base || e.FirstOffset > e.LastOffset || e.LastStableOffset > e.LastOffset+1 ||
			i > 0 && e.LastOffset <= entries[i-1].LastOffset {
			return nil, bad(fmt.Sprintf("entry %d out of order or range", i))
		}
		entries[i] = e
	}
	return entries, nil
}

// readAbortIndex returns the entries of the segment's index file, which must
// have been written for size bytes of segment.
func (s *segment) readAbortIndex(size int64) ([]AbortEntry, error) {
	b, err := s.readIndexFile(abortIndexSuffix)
	if err != nil {
		return nil, err
	}
	return decodeAbortIndex(b, s.base, size)
}

// writeAbortIndex replaces the segment's index file with entries for size
// bytes of segment, fsynced with sync. A crash during the write leaves a file
// Open finds torn: the segment is then rebuilt.
func (s *segment) writeAbortIndex(size int64, entries []AbortEntry, sync bool) error {
	f, err := s.fsys.Create(s.path(abortIndexSuffix))
	if err != nil {
		return err
	}
	_, err = f.Write(encodeAbortIndex(s.base, size, entries))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// holdAborts makes the segment's index the in-memory one of an active
// segment, with entries.
func (s *segment) holdAborts(entries []AbortEntry) {
	s.setAborts(abortIndex{entries: entries, held: true, count: len(entries)})
}

// setAborts replaces the segment's index state.
func (s *segment) setAborts(x abortIndex) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.aborts = x
}

// abortState returns the segment's index state. Its held entries are the
// segment's: appendMu must be held to use them after the call.
func (s *segment) abortState() abortIndex {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.aborts
}

// abortSnapshot returns the segment's index state with a copy of its held
// entries.
func (s *segment) abortSnapshot() abortIndex {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.mu.aborts
	if x.held {
		x.entries = slices.Clone(x.entries)
	}
	return x
}

// sealAbortIndex writes the segment's held index to its file for size bytes
// of segment and, with drop (a roll), lets the entries go: they are read from
// the file from now on. A stale index writes nothing (Open finds it stale
// again). appendMu is held.
func (s *segment) sealAbortIndex(size int64, sync, drop bool) error {
	x := s.abortState()
	if x.stale || !x.held {
		return nil
	}
	if err := s.writeAbortIndex(size, x.entries, sync); err != nil {
		return err
	}
	if drop {
		s.setAborts(abortIndex{count: len(x.entries)})
	}
	return nil
}

// abortEntries returns the segment's entries: a copy of the held ones, or its
// file's; none without reading when it has none.
func (s *segment) abortEntries(size int64) ([]AbortEntry, error) {
	x := s.abortSnapshot()
	switch {
	case x.stale:
		return nil, fmt.Errorf("%w: segment %d", ErrAbortIndexStale, s.base)
	case x.held || x.count == 0:
		return x.entries, nil
	}
	entries, err := s.readAbortIndex(size)
	if err != nil && s.deleted.Load() {
		return nil, nil // retention took the segment meanwhile: nothing to read there
	}
	return entries, err
}

// loadAbortIndexes reads every segment's index file at Open: the active
// segment's entries are held, a sealed one's counted, and a segment whose file
// is missing or does not match it is stale. An empty segment has no aborts,
// whatever its file.
func (l *Log) loadAbortIndexes() {
	segs := l.mu.segments
	for i, s := range segs {
		var entries []AbortEntry
		var err error
		if s.size > 0 {
			entries, err = s.readAbortIndex(s.size)
		}
		switch {
		case err != nil:
			s.mu.aborts = abortIndex{stale: true, held: i == len(segs)-1}
		case i == len(segs)-1:
			s.mu.aborts = abortIndex{entries: entries, held: true, count: len(entries)}
		default:
			s.mu.aborts = abortIndex{count: len(entries)}
		}
	}
}

// AddAbortedTxn records an aborted transaction whose abort marker (at
// e.LastOffset) was just appended, in the index of the segment holding the
// marker: the active segment's, held, unless a roll (retention's) came between
// the append and this call, which rewrites the sealed segment's file. A marker
// retention already deleted needs no entry. The caller adds a partition's
// aborts in marker order. A failure makes the log fail-stop: the index would
// miss the transaction, and the next Open rebuilds it (a file being rewritten
// is torn or removed, so stale).
func (l *Log) AddAbortedTxn(e AbortEntry) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	s, size, end := l.segmentWithEnd(e.LastOffset)
	if e.LastOffset < s.base {
		return nil // below the log start: retention took the segment
	}
	if e.LastOffset >= end {
		return l.fail(fmt.Errorf("%w: abort marker at %d past the log end %d", ErrOffsetOutOfRange, e.LastOffset, end))
	}
	if held, err := s.addHeldAbort(e); held {
		if err != nil {
			return l.fail(err)
		}
		return nil
	}
	entries, err := s.abortEntries(size)
	if err == nil {
		err = s.writeAbortIndex(size, append(entries, e), true)
	}
	if err != nil {
		_ = l.fsys.Remove(s.path(abortIndexSuffix))
		return l.fail(err)
	}
	s.countAbort()
	return nil
}

// segmentWithEnd returns the segment holding offset, with its size and the
// offset it ends before (the next segment's base, or the log end offset).
func (l *Log) segmentWithEnd(offset int64) (s *segment, size, end int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s = l.segmentForLocked(offset)
	end = l.mu.leo.Load()
	if i := slices.Index(l.mu.segments, s); i+1 < len(l.mu.segments) {
		end = l.mu.segments[i+1].base
	}
	return s, s.size, end
}

// addHeldAbort adds e to the segment's held entries, after the last one; held
// is false, and nothing added, when the segment's entries are in its file.
func (s *segment) addHeldAbort(e AbortEntry) (held bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.mu.aborts
	if !x.held {
		return false, nil
	}
	if n := len(x.entries); n > 0 && x.entries[n-1].LastOffset >= e.LastOffset {
		return true, fmt.Errorf("%w: abort marker at %d after one at %d", ErrOffsetOutOfRange, e.LastOffset, x.entries[n-1].LastOffset)
	}
	s.mu.aborts.entries = append(x.entries, e)
	s.mu.aborts.count = len(s.mu.aborts.entries)
	return true, nil
}

// countAbort counts an entry written to the segment's index file.
func (s *segment) countAbort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.aborts.count++
}

// AbortedTxns returns the aborted transactions that touch [from, to): marker at
// or after from, first batch before to, oldest marker first (Kafka's
// collectAbortedTransactions). It reads the index of the segment holding from
// and of later ones until an entry's last stable offset reaches to. An index not
// rebuilt since Open is ErrAbortIndexStale; a file that cannot be read, its
// error.
func (l *Log) AbortedTxns(from, to int64) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for _, v := range l.segmentSizesFrom(from) {
		entries, err := v.s.abortEntries(v.size)
		if err != nil {
			return out, err
		}
		for _, e := range entries {
			if e.LastOffset >= from && e.FirstOffset < to {
				out = append(out, e.AbortedTxn)
			}
			if e.LastStableOffset >= to {
				return out, nil
			}
		}
	}
	return out, nil
}

// segmentSize is a segment with the size it had when it was listed.
type segmentSize struct {
	s    *segment
	size int64
}

// segmentSizesFrom lists, with their sizes, the segment holding from and the
// later ones.
func (l *Log) segmentSizesFrom(from int64) []segmentSize {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.mu.segments) == 0 {
		return nil
	}
	first := l.segmentForLocked(from)
	var sizes []segmentSize
	for _, s := range l.mu.segments[slices.Index(l.mu.segments, first):] {
		sizes = append(sizes, segmentSize{s, s.size})
	}
	return sizes
}

// StaleAbortIndex returns the base offset of the first segment whose
// aborted-transaction index must be rebuilt from the log (ok false when none):
// the partition then scans the log from a state at or before it and hands
// RebuildAbortIndex every abort whose marker lies at or after it.
func (l *Log) StaleAbortIndex() (base int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.mu.segments {
		if s.abortState().stale {
			return s.base, true
		}
	}
	return 0, false
}

// RebuildAbortIndex installs entries, every aborted transaction whose marker
// lies at or after from in marker order, in the stale indexes: a sealed
// segment's file is written (not fsynced: a crash that tears it makes it stale
// again), the active segment's entries are held.
func (l *Log) RebuildAbortIndex(from int64, entries []AbortEntry) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	segs := l.segmentList()
	for i, s := range segs {
		if !s.abortState().stale {
			continue
		}
		if s.base < from {
			return fmt.Errorf("%w: rebuilding the aborted-transaction index from %d, segment %d is stale", ErrOffsetOutOfRange, from, s.base)
		}
		end := l.mu.leo.Load()
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		var mine []AbortEntry
		for _, e := range entries {
			if e.LastOffset >= s.base && e.LastOffset < end {
				mine = append(mine, e)
			}
		}
		if i == len(segs)-1 {
			s.holdAborts(mine)
			continue
		}
		if err := s.writeAbortIndex(s.size, mine, false); err != nil {
			return l.fail(err)
		}
		s.setAborts(abortIndex{count: len(mine)})
	}
	return nil
}

// segmentList returns the published segment list, which is never modified in
// place.
func (l *Log) segmentList() []*segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.segments
}

// truncateAbortIndex cuts s's index at newLEO, s being cut from oldSize to
// cutPos bytes, holds what is left (s becomes the active segment) and writes it durably, so
// that a crash cannot bring back entries of the cut tail for a segment appended
// back to the same size. A stale index stays stale. appendMu is held.
func (s *segment) truncateAbortIndex(oldSize, cutPos, newLEO int64) error {
	x := s.abortState()
	if x.stale {
		x.held = true
		s.setAborts(x)
		return nil
	}
	entries := x.entries
	if !x.held {
		var err error
		if entries, err = s.readAbortIndex(oldSize); err != nil {
			return err
		}
	}
	i, _ := slices.BinarySearchFunc(entries, newLEO, func(e AbortEntry, off int64) int {
		switch {
		case e.LastOffset < off:
			return -1
		case e.LastOffset > off:
			return 1
		}
		return 0
	})
	entries = slices.Clone(entries[:i])
	s.holdAborts(entries)
	if err := s.writeAbortIndex(cutPos, entries, true); err != nil {
		return err
	}
	return s.fsys.SyncDir(s.dir) // the file's name, if Close created it
}
