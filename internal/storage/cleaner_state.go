package storage

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Side-file names of the cleaner.
const (
	cleanerCheckpointName = "cleaner-offset.checkpoint"
	swapManifestName      = "cleaner-swap"
)

// maxCleanRanges bounds the clean-time history a cleaner checkpoint keeps.
const maxCleanRanges = 256

// maxMarkerClocks bounds the transaction-marker clocks a cleaner checkpoint keeps.
const maxMarkerClocks = 1024

// Versions of the cleaner checkpoint's frame (and of the swap manifest's, which
// holds a cleaner state): version 1, the previous build's, has no marker
// clocks. A state without marker clocks is written as version 1, so that build
// still reads it.
const (
	cleanerStateV1 = 1
	cleanerStateV2 = 2
)

// cleanerState is what the cleaner remembers between passes: firstDirty, the end of
// the clean section (every offset below it went through a pass), when each part of
// the clean section was first cleaned, which starts its tombstones' clock, and
// whether it still holds tombstones, so that one expiring calls for a pass even
// when nothing is dirty.
//
// ranges[i] says the offsets in [ranges[i-1].upTo, ranges[i].upTo) (from the start
// of the log for i == 0) became clean at ranges[i].atMs. upTo strictly increases and
// the last upTo is firstDirty; ranges is empty exactly when firstDirty is 0. Keeping
// the time here rather than in the batches (Kafka's KIP-534 writes a delete horizon
// into each batch) leaves kept batches byte for byte as produced.
//
// markers holds the clocks of the transaction markers whose transaction lost
// its last batch after the marker became clean: such a marker waits out the
// retention from then, not from its range's time (Kafka gives it a delete
// horizon in the first pass that finds its transaction empty).
//
// It is pure; the Log guards it with appendMu and persists it in the cleaner
// checkpoint.
type cleanerState struct {
	firstDirty int64
	ranges     []cleanRange
	markers    []markerClock
}

type cleanRange struct {
	upTo       int64
	atMs       int64
	tombstones bool // the last pass kept a tombstone (or a marker that may go) in the range
}

// markerClock: the transaction markers in [from, to] whose transaction is empty
// wait out the retention from atMs at the earliest, when their transactions lost
// their last batch (capMarkers may make it later). Clocks are disjoint and in
// offset order.
type markerClock struct {
	from, to int64
	atMs     int64
	due      bool // one of the markers is not its producer's last batch: a pass is due once atMs expires
}

// markerClock returns the clock of the marker at offset if one is kept.
func (c *cleanerState) markerClock(offset int64) (int64, bool) {
	i := sort.Search(len(c.markers), func(i int) bool { return c.markers[i].to >= offset })
	if i < len(c.markers) && c.markers[i].from <= offset {
		return c.markers[i].atMs, true
	}
	return 0, false
}

// markersFrom returns the marker clocks at or above offset, the first cut to
// start there, none due: a pass that cannot reach them (they lie past the
// compaction lag or the high-water mark) would otherwise run again and again,
// as a range's tombstones are not due then either.
func (c *cleanerState) markersFrom(offset int64) []markerClock {
	i := sort.Search(len(c.markers), func(i int) bool { return c.markers[i].to >= offset })
	out := slices.Clone(c.markers[i:])
	for j := range out {
		out[j].due = false
	}
	if len(out) > 0 {
		out[0].from = max(out[0].from, offset)
	}
	return out
}

// rangeOf returns the index of the range holding offset, or false while offset is
// dirty.
func (c *cleanerState) rangeOf(offset int64) (int, bool) {
	if offset >= c.firstDirty {
		return 0, false
	}
	i := sort.Search(len(c.ranges), func(i int) bool { return c.ranges[i].upTo > offset })
	return i, i < len(c.ranges)
}

// expiredTombstones reports whether a range holding tombstones has been clean for
// longer than retention, or a marker clock that is due has expired.
func (c *cleanerState) expiredTombstones(nowMs int64, retention time.Duration) bool {
	for _, r := range c.ranges {
		if r.tombstones && nowMs-r.atMs > retention.Milliseconds() {
			return true
		}
	}
	for _, m := range c.markers {
		if m.due && nowMs-m.atMs > retention.Milliseconds() {
			return true
		}
	}
	return false
}

// clone returns a copy that shares nothing with c.
func (c cleanerState) clone() cleanerState {
	c.ranges = append([]cleanRange(nil), c.ranges...)
	c.markers = append([]markerClock(nil), c.markers...)
	return c
}

// capMarkers merges neighbouring marker clocks while there are more than
// maxMarkerClocks, lowest offsets first. A merge keeps the later time, so a
// marker may be kept longer than it had to be, never removed early.
func (c *cleanerState) capMarkers() {
	for len(c.markers) > maxMarkerClocks {
		excess := len(c.markers) - maxMarkerClocks
		out := c.markers[:0]
		for i := 0; i < len(c.markers); i++ {
			m := c.markers[i]
			if excess > 0 && i+1 < len(c.markers) {
				n := c.markers[i+1]
				m = markerClock{from: m.from, to: n.to, atMs: max(m.atMs, n.atMs), due: m.due || n.due}
				i++
				excess--
			}
			out = append(out, m)
		}
		c.markers = out
	}
}

// record notes a pass at nowMs that cleaned everything below upTo, keeping
// tombstones in the new range if tombstones, then shortens the history: the
// longest prefix of ranges whose tombstones have all expired under retention
// merges into one, and the oldest ranges merge pairwise while there are more than
// maxCleanRanges. A merge keeps the later time and either range's tombstones, so a
// tombstone may be kept longer than it had to be, never dropped early.
func (c *cleanerState) record(upTo, nowMs int64, retention time.Duration, tombstones bool) {
	if upTo > c.firstDirty {
		c.ranges = append(c.ranges, cleanRange{upTo: upTo, atMs: nowMs, tombstones: tombstones})
		c.firstDirty = upTo
	}
	expired := 0
	for expired < len(c.ranges) && nowMs-c.ranges[expired].atMs > retention.Milliseconds() {
		expired++
	}
	if expired > 1 {
		c.mergeFirst(expired)
	}
	for len(c.ranges) > maxCleanRanges {
		c.mergeFirst(2)
	}
}

// mergeFirst merges the first n ranges into one with the last one's end and time.
func (c *cleanerState) mergeFirst(n int) {
	for _, r := range c.ranges[:n-1] {
		c.ranges[n-1].tombstones = c.ranges[n-1].tombstones || r.tombstones
	}
	c.ranges = append(c.ranges[:0], c.ranges[n-1:]...)
}

// clamp forgets that anything at or above offset is clean (the log was truncated
// there) and reports whether that changed the state.
func (c *cleanerState) clamp(offset int64) bool {
	if c.firstDirty <= offset {
		return false
	}
	offset = max(offset, 0)
	n := 0
	for n < len(c.ranges) && (n == 0 || c.ranges[n-1].upTo < offset) {
		n++
	}
	c.ranges = c.ranges[:n]
	if offset == 0 {
		c.ranges = c.ranges[:0]
	} else {
		c.ranges[n-1].upTo = offset
	}
	c.firstDirty = offset
	c.markers = slices.DeleteFunc(c.markers, func(m markerClock) bool { return m.from >= offset })
	if n := len(c.markers); n > 0 {
		c.markers[n-1].to = min(c.markers[n-1].to, offset-1)
	}
	return true
}

// Encoded sizes of a cleanRange and a markerClock.
const (
	cleanRangeSize  = 17
	markerClockSize = 25
)

// version is the frame version encode's payload needs.
func (c *cleanerState) version() uint16 {
	if len(c.markers) == 0 {
		return cleanerStateV1
	}
	return cleanerStateV2
}

// Payload of version 1: firstDirty i64 | count u32 | count x (upTo i64 | atMs i64 |
// tombstones u8). Version 2 goes on with count u32 | count x (from i64 | to i64 |
// atMs i64 | due u8), the marker clocks.
func (c *cleanerState) encode() []byte {
	b := make([]byte, 0, 16+cleanRangeSize*len(c.ranges)+markerClockSize*len(c.markers))
	b = binary.BigEndian.AppendUint64(b, uint64(c.firstDirty))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.ranges)))
	for _, r := range c.ranges {
		b = binary.BigEndian.AppendUint64(b, uint64(r.upTo))
		b = binary.BigEndian.AppendUint64(b, uint64(r.atMs))
		b = append(b, flagByte(r.tombstones))
	}
	if c.version() == cleanerStateV1 {
		return b
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.markers)))
	for _, m := range c.markers {
		b = binary.BigEndian.AppendUint64(b, uint64(m.from))
		b = binary.BigEndian.AppendUint64(b, uint64(m.to))
		b = binary.BigEndian.AppendUint64(b, uint64(m.atMs))
		b = append(b, flagByte(m.due))
	}
	return b
}

func flagByte(f bool) byte {
	if f {
		return 1
	}
	return 0
}

// decodeCleanerState parses a payload of the given version and returns the
// bytes after it.
func decodeCleanerState(b []byte, version uint16) (cleanerState, []byte, error) {
	c, b, err := decodeCleanRanges(b)
	switch {
	case err != nil || version == cleanerStateV1:
		return c, b, err
	case version != cleanerStateV2:
		return cleanerState{}, nil, fmt.Errorf("%w: cleaner state version %d", ErrCorruptSideFile, version)
	case len(b) < 4:
		return cleanerState{}, nil, fmt.Errorf("%w: no marker clocks in %d bytes", ErrCorruptSideFile, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n)*markerClockSize > uint64(len(b)) {
		return cleanerState{}, nil, fmt.Errorf("%w: %d marker clocks in %d bytes", ErrCorruptSideFile, n, len(b))
	}
	if n > 0 {
		c.markers = make([]markerClock, n)
	}
	prev := int64(-1)
	for i := range c.markers {
		m := markerClock{from: int64(binary.BigEndian.Uint64(b)), to: int64(binary.BigEndian.Uint64(b[8:])),
			atMs: int64(binary.BigEndian.Uint64(b[16:])), due: b[24] == 1}
		if m.from <= prev || m.to < m.from || m.to >= c.firstDirty || b[24] > 1 {
			return cleanerState{}, nil, fmt.Errorf("%w: marker clock %d on [%d, %d] after %d", ErrCorruptSideFile, i, m.from, m.to, prev)
		}
		c.markers[i], prev = m, m.to
		b = b[markerClockSize:]
	}
	return c, b, nil
}

// decodeCleanRanges parses the first dirty offset and the ranges.
func decodeCleanRanges(b []byte) (cleanerState, []byte, error) {
	var c cleanerState
	if len(b) < 12 {
		return c, nil, fmt.Errorf("%w: cleaner state of %d bytes", ErrCorruptSideFile, len(b))
	}
	c.firstDirty = int64(binary.BigEndian.Uint64(b))
	n := binary.BigEndian.Uint32(b[8:])
	b = b[12:]
	if uint64(n)*cleanRangeSize > uint64(len(b)) {
		return c, nil, fmt.Errorf("%w: cleaner state of %d ranges in %d bytes", ErrCorruptSideFile, n, len(b))
	}
	if n > 0 {
		c.ranges = make([]cleanRange, n)
	}
	prev := int64(0)
	for i := range c.ranges {
		r := cleanRange{upTo: int64(binary.BigEndian.Uint64(b)), atMs: int64(binary.BigEndian.Uint64(b[8:])), tombstones: b[16] == 1}
		if r.upTo <= prev || b[16] > 1 {
			return cleanerState{}, nil, fmt.Errorf("%w: cleaner range %d ends at %d after %d", ErrCorruptSideFile, i, r.upTo, prev)
		}
		c.ranges[i], prev = r, r.upTo
		b = b[cleanRangeSize:]
	}
	if c.firstDirty < 0 || prev != c.firstDirty {
		return cleanerState{}, nil, fmt.Errorf("%w: cleaner ranges end at %d, first dirty offset %d", ErrCorruptSideFile, prev, c.firstDirty)
	}
	return c, b, nil
}

// swapManifest is the commit record of a compaction swap: the offset ranges
// [base, end) whose old segments each group's cleaned segment replaces, and the
// cleaner state to persist once they have.
type swapManifest struct {
	groups []swapGroup
	state  cleanerState
}

type swapGroup struct{ base, end int64 }

// Payload: count u32 | count x (base i64 | end i64) | cleaner state payload.
func (m *swapManifest) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(m.groups)))
	for _, g := range m.groups {
		b = binary.BigEndian.AppendUint64(b, uint64(g.base))
		b = binary.BigEndian.AppendUint64(b, uint64(g.end))
	}
	return append(b, m.state.encode()...)
}

// decodeSwapManifest parses a payload whose cleaner state is of the given version.
func decodeSwapManifest(b []byte, version uint16) (swapManifest, error) {
	var m swapManifest
	if len(b) < 4 {
		return m, fmt.Errorf("%w: swap manifest of %d bytes", ErrCorruptSideFile, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n)*16 > uint64(len(b)) {
		return m, fmt.Errorf("%w: swap manifest of %d groups in %d bytes", ErrCorruptSideFile, n, len(b))
	}
	prevEnd := int64(0)
	for range n {
		g := swapGroup{base: int64(binary.BigEndian.Uint64(b)), end: int64(binary.BigEndian.Uint64(b[8:]))}
		if g.base < prevEnd || g.end <= g.base {
			return m, fmt.Errorf("%w: swap group [%d, %d) after %d", ErrCorruptSideFile, g.base, g.end, prevEnd)
		}
		m.groups = append(m.groups, g)
		prevEnd = g.end
		b = b[16:]
	}
	st, rest, err := decodeCleanerState(b, version)
	if err != nil {
		return m, err
	}
	if len(rest) != 0 {
		return m, fmt.Errorf("%w: %d bytes after the swap manifest", ErrCorruptSideFile, len(rest))
	}
	m.state = st
	return m, nil
}
