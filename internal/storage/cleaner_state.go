package storage

import (
	"encoding/binary"
	"fmt"
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
// It is pure; the Log guards it with appendMu and persists it in the cleaner
// checkpoint.
type cleanerState struct {
	firstDirty int64
	ranges     []cleanRange
}

type cleanRange struct {
	upTo       int64
	atMs       int64
	tombstones bool // the last pass kept a tombstone (or a marker that may go) in the range
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
// longer than retention.
func (c *cleanerState) expiredTombstones(nowMs int64, retention time.Duration) bool {
	for _, r := range c.ranges {
		if r.tombstones && nowMs-r.atMs > retention.Milliseconds() {
			return true
		}
	}
	return false
}

// clone returns a copy that shares nothing with c.
func (c cleanerState) clone() cleanerState {
	c.ranges = append([]cleanRange(nil), c.ranges...)
	return c
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
	return true
}

// cleanRangeSize is the encoded size of a cleanRange.
const cleanRangeSize = 17

// Payload: firstDirty i64 | count u32 | count x (upTo i64 | atMs i64 | tombstones u8).
func (c *cleanerState) encode() []byte {
	b := make([]byte, 0, 12+cleanRangeSize*len(c.ranges))
	b = binary.BigEndian.AppendUint64(b, uint64(c.firstDirty))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.ranges)))
	for _, r := range c.ranges {
		b = binary.BigEndian.AppendUint64(b, uint64(r.upTo))
		b = binary.BigEndian.AppendUint64(b, uint64(r.atMs))
		var t byte
		if r.tombstones {
			t = 1
		}
		b = append(b, t)
	}
	return b
}

// decodeCleanerState parses a payload and returns the bytes after it.
func decodeCleanerState(b []byte) (cleanerState, []byte, error) {
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

func decodeSwapManifest(b []byte) (swapManifest, error) {
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
	st, rest, err := decodeCleanerState(b)
	if err != nil {
		return m, err
	}
	if len(rest) != 0 {
		return m, fmt.Errorf("%w: %d bytes after the swap manifest", ErrCorruptSideFile, len(rest))
	}
	m.state = st
	return m, nil
}
