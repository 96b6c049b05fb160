package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
)

// The remote layout of one partition, under the tier's prefix P:
//
//	P/manifest                          the remote manifest: what counts
//	P/<base 20 digits>-<next 20>.seg    a segment object: the segment's batches,
//	                                    byte for byte, then its block index
//	P/<base 20 digits>-<next 20>.snapshot
//	                                    the producer-state snapshot as of next
//	                                    (layout 3; TierConfig.ProducerSnapshot)
//
// Manifests before layout 2 (side-file frame version 1) name two objects per
// segment instead, which stay readable; a layout-2 manifest names them too for a
// segment the store linked rather than copied (index size 0; the .log object is
// the segment file itself):
//
//	P/<base 20 digits>-<next 20>.log    the segment's batches, byte for byte
//	P/<base 20 digits>-<next 20>.index  its block index
//
// The manifest and the block index use the side-file frame (len | crc |
// version | payload); the frame's version is the manifest's layout.
//
//	manifest payload  leader epoch i32 | start i64 | end i64 | count u32, then
//	                  count x (base i64 | next i64 | size i64 | max ts i64 |
//	                           [index size i64: layouts 2 and 3] |
//	                           [snapshot size i64: layout 3] |
//	                           epochs u32, then epochs x (epoch i32 | start i64)),
//	                  then, optionally (absent in manifests written before it):
//	                  aborted u32, then aborted x (producer id i64 |
//	                                               first offset i64 | marker i64)
//	index payload     count u32, then count x (base offset i64 | pos i64 |
//	                                          size u32 | crc u32 | max ts i64)
//
// In layout 2 a segment's index size is the length of its framed block index,
// which starts at byte size of its .seg object (0: the segment was uploaded as
// two objects, .log and .index, before layout 2). One object per segment halves
// the objects an upload creates, fsyncs and names, and those retention deletes.
// Layout 3 adds a segment's snapshot size: the length of its .snapshot object,
// the replica's producer-state snapshot payload in the side-file frame (0: none,
// as for every segment uploaded before layout 3). A follower that starts over
// at its leader's local log start restores its producer state from it.
//
// A block is a run of whole batches of at least TierConfig.BlockBytes (the last
// may be shorter); its crc is CRC-32C over its bytes, checked on every remote read.
const (
	manifestKey     = "manifest"
	manifestSegSize = 8*4 + 4
	blockEntrySize  = 8 + 8 + 4 + 4 + 8
	// segObjectSuffix names a layout-2 segment object.
	segObjectSuffix = ".seg"
	// manifestLayout is the layout (side-file frame version) manifests are
	// written in; manifestLayoutOneObject and manifestLayoutTwoObjects are
	// the ones before it, which still load.
	manifestLayout           = 3
	manifestLayoutOneObject  = 2
	manifestLayoutTwoObjects = 1
)

// remoteSegment is one uploaded segment: offsets [Base, Next), Size bytes.
type remoteSegment struct {
	Base, Next, Size, MaxTimestamp int64
	// IndexSize is the length of the block index that follows the batches in
	// the segment's one object; 0 for a segment uploaded as two objects.
	IndexSize int64
	// SnapshotSize is the length of the segment's producer-state snapshot
	// object (the snapshot as of Next); 0: it has none.
	SnapshotSize int64
	// Epochs are the leader epochs that wrote into [Base, Next), the first moved
	// to Base.
	Epochs []EpochEntry
}

func (s remoteSegment) key(prefix, suffix string) string {
	return fmt.Sprintf("%s/%0*d-%0*d%s", prefix, baseDigits, s.Base, baseDigits, s.Next, suffix)
}

// dataKey is the object that holds the segment's batches from its byte 0.
func (s remoteSegment) dataKey(prefix string) string {
	if s.IndexSize > 0 {
		return s.key(prefix, segObjectSuffix)
	}
	return s.key(prefix, logSuffix)
}

// objectKeys are every object of the segment.
func (s remoteSegment) objectKeys(prefix string) []string {
	keys := []string{s.key(prefix, indexSuffix), s.key(prefix, logSuffix)}
	if s.IndexSize > 0 {
		keys = []string{s.key(prefix, segObjectSuffix)}
	}
	if s.SnapshotSize > 0 {
		keys = append(keys, s.key(prefix, snapshotSuffix))
	}
	return keys
}

// manifest is a partition's remote manifest. Offsets in [Start, End) that some
// segment holds are remote; Start moves up with remote retention and End with
// uploads (it stays when retention deletes every segment).
type manifest struct {
	LeaderEpoch int32
	Start, End  int64
	Segments    []remoteSegment // ascending, non-overlapping
	// Aborted are the aborted transactions with batches in [Start, End), by
	// marker offset (which may lie at or past End): the remote part's
	// aborted-transaction index.
	Aborted []AbortedTxn
}

// MergeAbortedTxns adds aborted transactions to list, once each (one marker,
// one transaction: an upload offers a transaction whose batches span
// segments with each of them, and a remote read merges the manifest's with
// the replica's own), keeping the lower first offset (a replica whose local
// log starts inside the transaction knows a later one), by marker offset.
func MergeAbortedTxns(list, add []AbortedTxn) []AbortedTxn {
	for _, a := range add {
		i := slices.IndexFunc(list, func(o AbortedTxn) bool { return o.ProducerID == a.ProducerID && o.LastOffset == a.LastOffset })
		if i < 0 {
			list = append(list, a)
		} else {
			list[i].FirstOffset = min(list[i].FirstOffset, a.FirstOffset)
		}
	}
	slices.SortStableFunc(list, func(a, b AbortedTxn) int { return cmp.Compare(a.LastOffset, b.LastOffset) })
	return list
}

// AbortedTxn is one aborted transaction of a partition: its producer, the
// offset of its first batch and that of its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// abortedEntrySize is the encoded size of one AbortedTxn.
const abortedEntrySize = 3 * 8

func (m *manifest) size() int64 {
	var n int64
	for _, s := range m.Segments {
		n += s.Size
	}
	return n
}

// segmentFor returns the index of the first segment ending after offset, or
// len(Segments).
func (m *manifest) segmentFor(offset int64) int {
	return sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].Next > offset })
}

func (m *manifest) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(m.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Start))
	b = binary.BigEndian.AppendUint64(b, uint64(m.End))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Segments)))
	for _, s := range m.Segments {
		for _, v := range []int64{s.Base, s.Next, s.Size, s.MaxTimestamp, s.IndexSize, s.SnapshotSize} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
		b = append(b, encodeEpochs(s.Epochs)...)
	}
	var aborted []AbortedTxn
	for _, a := range m.Aborted {
		if a.LastOffset >= m.Start { // below the start no fetch reaches them
			aborted = append(aborted, a)
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(aborted)))
	for _, a := range aborted {
		for _, v := range []int64{a.ProducerID, a.FirstOffset, a.LastOffset} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return frameSideVersion(b, manifestLayout)
}

func decodeManifest(framed []byte) (manifest, error) {
	var m manifest
	b, layout, err := unframeSideVersion(framed)
	if err != nil {
		return m, err
	}
	bad := func(what string) (manifest, error) {
		return manifest{}, fmt.Errorf("%w: remote manifest: %s", ErrCorruptSideFile, what)
	}
	segSize := manifestSegSize
	switch layout {
	case manifestLayout:
		segSize += 16
	case manifestLayoutOneObject:
		segSize += 8
	case manifestLayoutTwoObjects:
	default:
		return bad(fmt.Sprintf("layout %d", layout))
	}
	if len(b) < 24 {
		return bad("short header")
	}
	m.LeaderEpoch = int32(binary.BigEndian.Uint32(b))
	m.Start = int64(binary.BigEndian.Uint64(b[4:]))
	m.End = int64(binary.BigEndian.Uint64(b[12:]))
	n := binary.BigEndian.Uint32(b[20:])
	b = b[24:]
	if uint64(n)*uint64(segSize) > uint64(len(b)) {
		return bad("segment count past the end")
	}
	m.Segments = make([]remoteSegment, n)
	// Segments may start below Start: DeleteRecords moves Start into or past
	// the first segments, which the next retention pass deletes.
	prevNext := int64(0)
	for i := range m.Segments {
		if len(b) < segSize {
			return bad("segment cut short")
		}
		s := &m.Segments[i]
		s.Base = int64(binary.BigEndian.Uint64(b))
		s.Next = int64(binary.BigEndian.Uint64(b[8:]))
		s.Size = int64(binary.BigEndian.Uint64(b[16:]))
		s.MaxTimestamp = int64(binary.BigEndian.Uint64(b[24:]))
		e := 32 // the epochs
		if layout >= manifestLayoutOneObject {
			s.IndexSize = int64(binary.BigEndian.Uint64(b[e:]))
			e += 8
		}
		if layout >= manifestLayout {
			s.SnapshotSize = int64(binary.BigEndian.Uint64(b[e:]))
			e += 8
		}
		ne := int(binary.BigEndian.Uint32(b[e:]))
		end := e + 4 + 12*ne
		if ne < 0 || end > len(b) {
			return bad("epochs past the end")
		}
		if s.Epochs, err = decodeEpochs(b[e:end]); err != nil {
			return manifest{}, err
		}
		b = b[end:]
		if s.Base < prevNext || s.Next <= s.Base || s.Size <= 0 || s.Next > m.End || s.IndexSize < 0 || s.IndexSize > maxSidePayload+sideHeaderSize ||
			s.SnapshotSize < 0 || s.SnapshotSize > maxSidePayload+sideHeaderSize {
			return bad(fmt.Sprintf("segment %d [%d, %d) out of order", i, s.Base, s.Next))
		}
		prevNext = s.Next
	}
	if len(b) > 0 {
		if len(b) < 4 {
			return bad("aborted transactions cut short")
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n)*abortedEntrySize != uint64(len(b)) {
			return bad("aborted transactions do not fill the rest")
		}
		m.Aborted = make([]AbortedTxn, n)
		for i := range m.Aborted {
			a := &m.Aborted[i]
			a.ProducerID = int64(binary.BigEndian.Uint64(b))
			a.FirstOffset = int64(binary.BigEndian.Uint64(b[8:]))
			a.LastOffset = int64(binary.BigEndian.Uint64(b[16:]))
			b = b[abortedEntrySize:]
			if a.FirstOffset > a.LastOffset || i > 0 && a.LastOffset < m.Aborted[i-1].LastOffset {
				return bad(fmt.Sprintf("aborted transaction %d out of order", i))
			}
		}
	}
	if m.Start > m.End || m.Start < 0 {
		return bad("bad range")
	}
	return m, nil
}

// block is one checksummed run of whole batches inside a remote segment.
type block struct {
	BaseOffset   int64 // first batch's base offset
	Pos          int64
	Size         uint32
	CRC          uint32
	MaxTimestamp int64
}

func encodeBlocks(blocks []block) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(blocks)))
	for _, k := range blocks {
		b = binary.BigEndian.AppendUint64(b, uint64(k.BaseOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(k.Pos))
		b = binary.BigEndian.AppendUint32(b, k.Size)
		b = binary.BigEndian.AppendUint32(b, k.CRC)
		b = binary.BigEndian.AppendUint64(b, uint64(k.MaxTimestamp))
	}
	return frameSide(b)
}

// decodeBlocks checks a block index against the segment it belongs to: blocks
// are contiguous from position 0 and cover exactly seg.Size bytes.
func decodeBlocks(framed []byte, seg remoteSegment) ([]block, error) {
	b, err := unframeSide(framed)
	if err != nil {
		return nil, err
	}
	if len(b) < 4 || uint64(len(b)-4) != uint64(binary.BigEndian.Uint32(b))*blockEntrySize {
		return nil, fmt.Errorf("%w: remote block index of %d bytes", ErrCorruptSideFile, len(b))
	}
	blocks := make([]block, binary.BigEndian.Uint32(b))
	b = b[4:]
	var pos int64
	for i := range blocks {
		e := b[i*blockEntrySize:]
		k := block{
			BaseOffset:   int64(binary.BigEndian.Uint64(e)),
			Pos:          int64(binary.BigEndian.Uint64(e[8:])),
			Size:         binary.BigEndian.Uint32(e[16:]),
			CRC:          binary.BigEndian.Uint32(e[20:]),
			MaxTimestamp: int64(binary.BigEndian.Uint64(e[24:])),
		}
		if k.Pos != pos || k.Size == 0 || k.BaseOffset < seg.Base || k.BaseOffset >= seg.Next ||
			(i > 0 && k.BaseOffset <= blocks[i-1].BaseOffset) {
			return nil, fmt.Errorf("%w: remote block %d inconsistent", ErrCorruptSideFile, i)
		}
		pos += int64(k.Size)
		blocks[i] = k
	}
	if pos != seg.Size {
		return nil, fmt.Errorf("%w: remote blocks cover %d of %d bytes", ErrCorruptSideFile, pos, seg.Size)
	}
	return blocks, nil
}

func blockCRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
