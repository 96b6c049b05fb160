package storage

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// blockCutter cuts the bytes of a chunk of whole batches, fed in order in
// pieces of any size, into blocks of whole batches of at least blockBytes (the
// last may be shorter), checksumming each block as its bytes go by. It checks
// what a header scan checks: a plausible length, magic 2, a last offset delta
// of at least 0, and that the last batch ends where the chunk does.
type blockCutter struct {
	blockBytes int64
	size       int64 // bytes in the chunk
	fed        int64 // bytes fed so far

	hdr  [batch.HeaderSize]byte // the current batch's header, as far as fed
	hdrN int                    // bytes of hdr fed; 0 in a batch's body
	left int64                  // bytes of the current batch's body still to come
	at   int64                  // chunk position of the current batch

	cur    block  // the block being cut
	curN   int64  // its bytes so far
	crc    uint32 // their CRC-32C
	blocks []block
}

func newBlockCutter(size int64, blockBytes int) blockCutter {
	return blockCutter{blockBytes: int64(blockBytes), size: size}
}

// feed takes the chunk's next bytes. An error (the batch at the position it
// names does not parse, or runs past the chunk) is final.
func (c *blockCutter) feed(b []byte) (at int64, err error) {
	for len(b) > 0 {
		if c.left == 0 && c.hdrN == 0 { // a batch starts
			c.at = c.fed
			if c.curN == 0 {
				c.cur = block{Pos: c.fed, MaxTimestamp: -1}
			}
		}
		if c.left == 0 { // in the header
			k := copy(c.hdr[c.hdrN:], b)
			c.take(b[:k])
			b, c.hdrN = b[k:], c.hdrN+k
			if c.hdrN < batch.HeaderSize {
				continue
			}
			c.hdrN = 0
			frame, err := batch.FrameSize(c.hdr[:])
			if err != nil {
				return c.at, err
			}
			h, _ := batch.ParseHeader(c.hdr[:])
			if h.Magic != 2 || h.LastOffsetDelta < 0 {
				return c.at, batch.ErrBadMagic
			}
			if c.at+int64(frame) > c.size {
				return c.at, errTornTail
			}
			if c.cur.Pos == c.at {
				c.cur.BaseOffset = h.BaseOffset
			}
			c.cur.MaxTimestamp = max(c.cur.MaxTimestamp, h.MaxTimestamp)
			if c.left = int64(frame - batch.HeaderSize); c.left == 0 {
				c.batchDone()
			}
			continue
		}
		k := min(c.left, int64(len(b)))
		c.take(b[:k])
		b, c.left = b[k:], c.left-k
		if c.left == 0 {
			c.batchDone()
		}
	}
	return 0, nil
}

func (c *blockCutter) take(b []byte) {
	c.crc = crc32.Update(c.crc, castagnoli, b)
	c.curN += int64(len(b))
	c.fed += int64(len(b))
}

// batchDone closes the block when it is big enough or the chunk ends.
func (c *blockCutter) batchDone() {
	if c.curN >= c.blockBytes || c.fed == c.size {
		c.cur.Size, c.cur.CRC = uint32(c.curN), c.crc
		c.blocks = append(c.blocks, c.cur)
		c.curN, c.crc = 0, 0
	}
}

// finish returns the blocks once the whole chunk was fed; a chunk that ends
// inside a batch is torn.
func (c *blockCutter) finish() ([]block, error) {
	if c.fed != c.size || c.hdrN != 0 || c.left != 0 {
		return nil, errTornTail
	}
	return c.blocks, nil
}

// segmentFor returns the remote segment of chunk ch with its blocks.
func segmentFor(ch *Chunk, blocks []block) remoteSegment {
	seg := remoteSegment{Base: ch.FirstOffset, Next: ch.NextOffset, Size: int64(ch.Size), MaxTimestamp: -1}
	for _, b := range blocks {
		seg.MaxTimestamp = max(seg.MaxTimestamp, b.MaxTimestamp)
	}
	return seg
}

// uploadReadBytes is the read size of an upload's scan of a segment.
const uploadReadBytes = 1 << 20

// uploadBufs keeps the read windows of upload scans: a free list rather than a
// sync.Pool, which every garbage collection empties, so that a broker's upload
// passes (one at a time on its tiering goroutine) do not allocate a new 1 MiB
// window after each collection.
var uploadBufs = make(chan []byte, 2)

func getUploadBuf() []byte {
	select {
	case b := <-uploadBufs:
		return b
	default:
		return make([]byte, uploadReadBytes)
	}
}

func putUploadBuf(b []byte) {
	select {
	case uploadBufs <- b:
	default:
	}
}

// scanBlocks reads a chunk of one closed segment once, in reads of
// uploadReadBytes, and cuts it into blocks: for an upload that does not read
// the bytes through the tier (a linked segment, a kernel copy).
func (t *Tier) scanBlocks(c *Chunk) (remoteSegment, []block, error) {
	buf := getUploadBuf()
	defer putUploadBuf(buf)
	cut := newBlockCutter(int64(c.Size), t.cfg.BlockBytes)
	for off := int64(0); off < int64(c.Size); {
		b := buf[:min(int64(len(buf)), int64(c.Size)-off)]
		if err := readFullAt(c.File, b, c.Pos+off); err != nil {
			return remoteSegment{}, nil, corrupt(c.File.Name(), c.Pos+off, err)
		}
		if at, err := cut.feed(b); err != nil {
			return remoteSegment{}, nil, corrupt(c.File.Name(), c.Pos+at, err)
		}
		off += int64(len(b))
	}
	blocks, err := cut.finish()
	if err != nil {
		return remoteSegment{}, nil, corrupt(c.File.Name(), c.Pos+int64(c.Size), err)
	}
	return segmentFor(c, blocks), blocks, nil
}

// readFullAt reads len(b) bytes at off; a file that ends first is torn.
func readFullAt(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errTornTail
	}
	return err
}

// segmentBody is a segment object (layout 2) as a stream for a store that reads
// the body itself (S3): the chunk's batches, read from the file once, into the
// store's own buffers, and cut into blocks as they go by; then the block index,
// followed by zeros up to indexRoom. The padding lets the object's size be
// declared before the scan has counted the blocks; the manifest records the
// index's own length, and no reader reads past it.
type segmentBody struct {
	ch   *Chunk
	off  int64 // bytes of the object read so far
	cut  blockCutter
	tail []byte // the index and its padding, once the batches are read
	idx  int    // the index's length in tail
	err  error  // a scan failure: the upload must not count
}

func newSegmentBody(ch *Chunk, blockBytes int) *segmentBody {
	return &segmentBody{ch: ch, cut: newBlockCutter(int64(ch.Size), blockBytes)}
}

// indexRoom is the most bytes a framed block index of a chunk of size bytes
// can take: every block but the last holds at least blockBytes, so there are
// at most ceil(size / blockBytes) of them.
func indexRoom(size int64, blockBytes int) int64 {
	n := (size + int64(blockBytes) - 1) / int64(blockBytes)
	return sideHeaderSize + 4 + n*blockEntrySize
}

// Size is the object's length.
func (b *segmentBody) Size() int64 {
	return int64(b.ch.Size) + indexRoom(int64(b.ch.Size), int(b.cut.blockBytes))
}

func (b *segmentBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	size := int64(b.ch.Size)
	if b.off < size {
		p = p[:min(int64(len(p)), size-b.off)]
		if err := readFullAt(b.ch.File, p, b.ch.Pos+b.off); err != nil {
			b.err = corrupt(b.ch.File.Name(), b.ch.Pos+b.off, err)
			return 0, b.err
		}
		if at, err := b.cut.feed(p); err != nil {
			b.err = corrupt(b.ch.File.Name(), b.ch.Pos+at, err)
			return 0, b.err
		}
		b.off += int64(len(p))
		return len(p), nil
	}
	if b.tail == nil {
		blocks, err := b.cut.finish()
		if err != nil {
			b.err = corrupt(b.ch.File.Name(), b.ch.Pos+size, err)
			return 0, b.err
		}
		idx := encodeBlocks(blocks)
		room := b.Size() - size
		if int64(len(idx)) > room {
			b.err = fmt.Errorf("storage: block index of %d bytes past its room of %d", len(idx), room)
			return 0, b.err
		}
		b.tail = append(idx, make([]byte, room-int64(len(idx)))...)
		b.idx = len(idx)
	}
	if b.off-size >= int64(len(b.tail)) {
		return 0, io.EOF
	}
	n := copy(p, b.tail[b.off-size:])
	b.off += int64(n)
	return n, nil
}

// segment returns the uploaded segment and its blocks once the store has read
// the whole body; ok is false before.
func (b *segmentBody) segment() (seg remoteSegment, blocks []block, ok bool) {
	if b.err != nil || b.tail == nil {
		return remoteSegment{}, nil, false
	}
	seg = segmentFor(b.ch, b.cut.blocks)
	seg.IndexSize = int64(b.idx)
	return seg, b.cut.blocks, true
}
