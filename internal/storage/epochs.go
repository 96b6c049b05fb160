package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// UndefinedEpoch and UndefinedOffset are what EndOffsetForEpoch returns when it has
// no answer (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// EpochEntry says that leader epoch Epoch wrote its first record at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the leader-epoch cache (KIP-101/279): entries strictly increasing in
// both epoch and start offset. It is pure; the Log guards it with its mutex and
// persists it in the leader-epoch checkpoint.
type epochCache struct {
	entries []EpochEntry
}

func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at start. As in Kafka, it is a no-op when the
// latest entry already has this epoch at an earlier or equal offset; otherwise it
// first drops every entry that the new one contradicts (epoch >= epoch or start >=
// start), so the entries stay monotonic. It reports whether anything changed.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 || start < 0 {
		return false
	}
	if l, ok := c.latest(); ok && l.Epoch == epoch && l.StartOffset <= start {
		return false
	}
	n := 0
	for _, e := range c.entries {
		if e.Epoch < epoch && e.StartOffset < start {
			c.entries[n] = e
			n++
		}
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: start})
	return true
}

// endOffsetFor answers OffsetsForLeaderEpoch for requested: the largest epoch <=
// requested that the log knows, and the start offset of the first epoch after it
// (or logEndOffset when requested is the latest epoch).
func (c *epochCache) endOffsetFor(requested int32, logEndOffset int64) (int32, int64) {
	if requested == UndefinedEpoch {
		return UndefinedEpoch, UndefinedOffset
	}
	if l, ok := c.latest(); ok && l.Epoch == requested {
		return requested, logEndOffset
	}
	// higher: first entry with epoch > requested; floor: last entry with epoch <= requested.
	higher := -1
	for i, e := range c.entries {
		if e.Epoch > requested {
			higher = i
			break
		}
	}
	switch {
	case higher < 0:
		// Requested is above every known epoch (or the cache is empty).
		return UndefinedEpoch, UndefinedOffset
	case higher == 0:
		// Requested is below every known epoch: its data is gone; send the follower
		// to the start of the first epoch we know.
		return requested, c.entries[0].StartOffset
	default:
		return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
	}
}

// epochAt is the epoch of the entry that holds offset (the last starting at
// or below it), or UndefinedEpoch when none does.
func (c *epochCache) epochAt(offset int64) int32 {
	i, found := slices.BinarySearchFunc(c.entries, offset, func(e EpochEntry, o int64) int { return cmp.Compare(e.StartOffset, o) })
	if !found {
		i--
	}
	if i < 0 {
		return UndefinedEpoch
	}
	return c.entries[i].Epoch
}

// truncateFromEnd drops entries starting at or after end (the log was truncated to
// end). It reports whether anything changed.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries wholly below start (the log start offset moved
// to start): the last entry at or below start is kept, moved to start.
func (c *epochCache) truncateFromStart(start int64) bool {
	k := 0 // entries[:k] start at or below start
	for k < len(c.entries) && c.entries[k].StartOffset <= start {
		k++
	}
	if k == 0 || (k == 1 && c.entries[0].StartOffset == start) {
		return false
	}
	kept := EpochEntry{Epoch: c.entries[k-1].Epoch, StartOffset: start}
	c.entries = append(c.entries[:0], c.entries[k-1:]...)
	c.entries[0] = kept
	return true
}

// epochsMatchFrom reports whether a checkpoint holding saved, cut at the log
// start as Open cuts it, gives the cache cur.
func epochsMatchFrom(saved, cur []EpochEntry, logStart int64) bool {
	c := epochCache{entries: slices.Clone(saved)}
	c.truncateFromStart(logStart)
	return slices.Equal(c.entries, cur)
}

func (c *epochCache) clone() []EpochEntry { return append([]EpochEntry(nil), c.entries...) }

// The leader-epoch checkpoint payload: count u32, then count entries of
// epoch i32 | startOffset i64.
func encodeEpochs(entries []EpochEntry) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return b
}

func decodeEpochs(b []byte) ([]EpochEntry, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: epoch checkpoint of %d bytes", ErrCorruptSideFile, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(len(b)) != uint64(n)*12 {
		return nil, fmt.Errorf("%w: %d epoch entries in %d bytes", ErrCorruptSideFile, n, len(b))
	}
	entries := make([]EpochEntry, n)
	for i := range entries {
		entries[i] = EpochEntry{
			Epoch:       int32(binary.BigEndian.Uint32(b[12*i:])),
			StartOffset: int64(binary.BigEndian.Uint64(b[12*i+4:])),
		}
		if entries[i].Epoch < 0 || entries[i].StartOffset < 0 ||
			(i > 0 && (entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset)) {
			return nil, fmt.Errorf("%w: epoch entries not increasing", ErrCorruptSideFile)
		}
	}
	return entries, nil
}
