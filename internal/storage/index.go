package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// Index entry sizes on disk (see the package doc for the layouts).
const (
	indexEntrySize = 8  // relative offset u32 | position u32
	timeEntrySize  = 12 // timestamp i64 | relative offset u32
)

// indexEntry maps the base offset of a batch (relative to the segment's base) to
// the batch's position in the .log file.
type indexEntry struct {
	rel uint32
	pos uint32
}

// offsetIndex is a segment's sparse offset index, held in memory. Entries strictly
// increase in both fields. It is not safe for concurrent use; segment.mu guards it.
type offsetIndex struct {
	entries []indexEntry
	max     int // capacity in entries: IndexMaxBytes / indexEntrySize
	// The first fromFile entries were read from the segment's .index file,
	// which can decode and still point into the middle of a batch (a damaged
	// disk block); segment.entry checks each against the log the first time a
	// lookup picks it and records it in checked. Entries the appender adds
	// are trusted.
	fromFile int
	checked  []uint64 // a bit per entry below fromFile
	// fileLogSize is the size of the log the entries read from the file
	// were loaded with (truncated with it): their batches lie below it.
	fileLogSize int64
}

// load takes entries read from the .index file of a segment whose log is
// logSize bytes.
func (x *offsetIndex) load(entries []indexEntry, logSize int64) {
	x.entries, x.fromFile, x.checked = entries, len(entries), make([]uint64, (len(entries)+63)/64)
	x.fileLogSize = logSize
}

// trusted reports whether entry i needs no check against the log.
func (x *offsetIndex) trusted(i int) bool {
	return i >= x.fromFile || x.checked[i/64]&(1<<(i%64)) != 0
}

func (x *offsetIndex) markChecked(i int) { x.checked[i/64] |= 1 << (i % 64) }

func (x *offsetIndex) full() bool { return len(x.entries) >= x.max }

func (x *offsetIndex) add(rel, pos uint32) { x.entries = append(x.entries, indexEntry{rel, pos}) }

// find returns the index of the last entry whose offset is <= rel, or -1 (the
// segment's first batch at position 0).
func (x *offsetIndex) find(rel uint32) int {
	return sort.Search(len(x.entries), func(i int) bool { return x.entries[i].rel > rel }) - 1
}

// findPos returns the index of the last entry whose position is <= pos, or -1.
func (x *offsetIndex) findPos(pos uint32) int {
	return sort.Search(len(x.entries), func(i int) bool { return x.entries[i].pos > pos }) - 1
}

// truncate drops the entries for offsets >= rel.
func (x *offsetIndex) truncate(rel uint32) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].rel >= rel })
	x.entries = x.entries[:i]
	x.fromFile = min(x.fromFile, i)
}

func (x *offsetIndex) encode() []byte {
	b := make([]byte, 0, len(x.entries)*indexEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

// decodeOffsetIndex parses and checks an .index file of a segment whose log is
// logSize bytes and holds offsets below base+span.
func decodeOffsetIndex(b []byte, logSize int64, span int64) ([]indexEntry, error) {
	if len(b)%indexEntrySize != 0 {
		return nil, fmt.Errorf("offset index size %d is not a multiple of %d", len(b), indexEntrySize)
	}
	entries := make([]indexEntry, len(b)/indexEntrySize)
	for i := range entries {
		e := indexEntry{
			rel: binary.BigEndian.Uint32(b[i*indexEntrySize:]),
			pos: binary.BigEndian.Uint32(b[i*indexEntrySize+4:]),
		}
		if int64(e.pos) >= logSize || int64(e.rel) >= span ||
			(i > 0 && (e.rel <= entries[i-1].rel || e.pos <= entries[i-1].pos)) || (i == 0 && e.pos == 0) {
			return nil, fmt.Errorf("offset index entry %d (%d, %d) out of order or range", i, e.rel, e.pos)
		}
		entries[i] = e
	}
	return entries, nil
}

// timeEntry says that the largest timestamp in the segment up to some point is ts,
// first reached in the batch whose base offset is rel (relative to the segment).
type timeEntry struct {
	ts  int64
	rel uint32
}

// timeIndex is a segment's sparse time index, held in memory. Timestamps strictly
// increase, offsets do not decrease. segment.mu guards it.
type timeIndex struct {
	entries []timeEntry
	max     int
}

func (x *timeIndex) full() bool { return len(x.entries) >= x.max }

// maybeAdd appends (ts, rel) if ts is newer than the last entry.
func (x *timeIndex) maybeAdd(ts int64, rel uint32) {
	if n := len(x.entries); n > 0 && ts <= x.entries[n-1].ts {
		return
	}
	x.entries = append(x.entries, timeEntry{ts, rel})
}

func (x *timeIndex) last() (timeEntry, bool) {
	if len(x.entries) == 0 {
		return timeEntry{ts: -1}, false
	}
	return x.entries[len(x.entries)-1], true
}

// lookupBelow returns the offset of the last entry with a timestamp < ts, or 0.
// Every record before that offset has a timestamp < ts.
func (x *timeIndex) lookupBelow(ts int64) uint32 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return x.entries[i-1].rel
}

// truncate drops entries for offsets >= rel.
func (x *timeIndex) truncate(rel uint32) { x.entries = x.entries[:x.below(rel)] }

// lastBelow returns the last entry for an offset < rel.
func (x *timeIndex) lastBelow(rel uint32) (timeEntry, bool) {
	i := x.below(rel)
	if i == 0 {
		return timeEntry{ts: -1}, false
	}
	return x.entries[i-1], true
}

// below returns the number of entries for offsets < rel.
func (x *timeIndex) below(rel uint32) int {
	return sort.Search(len(x.entries), func(i int) bool { return x.entries[i].rel >= rel })
}

func (x *timeIndex) encode() []byte {
	b := make([]byte, 0, len(x.entries)*timeEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

// decodeTimeIndex parses and checks a .timeindex file of a segment holding offsets
// below base+span.
func decodeTimeIndex(b []byte, span int64) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("time index size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	entries := make([]timeEntry, len(b)/timeEntrySize)
	for i := range entries {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])),
			rel: binary.BigEndian.Uint32(b[i*timeEntrySize+8:]),
		}
		if e.ts < 0 || int64(e.rel) >= span || (i > 0 && (e.ts <= entries[i-1].ts || e.rel < entries[i-1].rel)) {
			return nil, fmt.Errorf("time index entry %d (%d, %d) out of order or range", i, e.ts, e.rel)
		}
		entries[i] = e
	}
	return entries, nil
}

// relOffset returns offset relative to base if it fits an index entry.
func relOffset(offset, base int64) (uint32, bool) {
	d := offset - base
	if d < 0 || d > math.MaxUint32 {
		return 0, false
	}
	return uint32(d), true
}
