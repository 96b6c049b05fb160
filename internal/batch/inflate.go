package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The bound on a compressed batch's decompressed records: the larger of
// MinDecompressedLimit and MaxDecompressionRatio times the compressed
// records. Kafka streams a batch's records and holds none of them whole;
// Strata holds them whole, so a small batch that inflates to gigabytes (a
// decompression bomb) is refused once it passes the bound, before more is
// allocated. Real records compress far less than 64 times (snappy cannot
// reach 22), and a batch under message.max.bytes' default of 1 MiB is held
// to 64 MiB.
const (
	MinDecompressedLimit  = 64 << 20
	MaxDecompressionRatio = 64
)

// decompressedLimit is the most bytes records compressed into n bytes may
// decompress to.
func decompressedLimit(n int) int { return max(MinDecompressedLimit, MaxDecompressionRatio*n) }

// A RecordsBuffer holds the decompressed records of one batch at a time (see
// Section). It is pooled with the decoders that fill it
// (GetRecordsBuffer, Release), so a steady stream of compressed batches is
// decompressed without allocating. It is not safe for concurrent use.
type RecordsBuffer struct {
	out []byte // capacity reused from batch to batch
	src bytes.Reader
	gz  gzip.Reader
	lz  *lz4.Reader
	zd  *zstd.Decoder
}

// maxPooledRecords is the largest buffer Release keeps: a rare huge batch's
// records are not held on to.
const maxPooledRecords = 8 << 20

// minRecordsBuffer is the smallest buffer decompression starts with.
const minRecordsBuffer = 64 << 10

var recordsBuffers = sync.Pool{New: func() any { return new(RecordsBuffer) }}

// GetRecordsBuffer returns a RecordsBuffer from the pool; Release gives it back.
func GetRecordsBuffer() *RecordsBuffer { return recordsBuffers.Get().(*RecordsBuffer) }

// Release returns r to the pool; the records it holds must not be used after.
func (r *RecordsBuffer) Release() {
	if cap(r.out) > maxPooledRecords {
		r.out = nil
	}
	r.src.Reset(nil)
	recordsBuffers.Put(r)
}

// Section returns the record section of the batch b (header h): b's bytes
// after the header, or, for a compressed batch, its records decompressed into
// r, valid until r is used again or released. Every reader of a compressed
// batch's records, produced or stored, goes through it: an error wraps
// ErrDecompressedTooLarge (past the bound, before more is allocated) or
// ErrDecompress.
func (r *RecordsBuffer) Section(h Header, b []byte) ([]byte, error) {
	if h.Codec() == CodecNone {
		return b[HeaderSize:], nil
	}
	src := b[HeaderSize:]
	limit := decompressedLimit(len(src))
	records, err := r.inflate(h.Codec(), src, limit)
	switch {
	case errors.Is(err, ErrDecompressedTooLarge):
		return nil, fmt.Errorf("%w: codec %d: more than %d bytes (the larger of %d and %d times the %d compressed bytes)",
			err, h.Codec(), limit, MinDecompressedLimit, MaxDecompressionRatio, len(src))
	case err != nil:
		return nil, fmt.Errorf("%w: codec %d: %v", ErrDecompress, h.Codec(), err)
	}
	return records, nil
}

// SectionWithin is Section for a reader of stored batches (the cleaner)
// that holds each record of a compressed batch to maxRecord bytes (its body,
// what its length varint counts), as Kafka's streaming record iterator holds
// it to the topic's max.decompressed.message.bytes: the first record above
// it is ErrRecordTooLarge. The records are not otherwise checked here: a
// length that does not parse is left to the walk over them.
func (r *RecordsBuffer) SectionWithin(h Header, b []byte, maxRecord int) ([]byte, error) {
	records, err := r.Section(h, b)
	if err != nil || h.Codec() == CodecNone {
		return records, err
	}
	return records, bodiesWithin(h.NumRecords, records, maxRecord)
}

// bodiesWithin returns ErrRecordTooLarge for the first of the n records in
// rest whose body is above maxBody. It reads their lengths only and stops at
// one that does not parse.
func bodiesWithin(n int32, rest []byte, maxBody int) error {
	for i := range n {
		length, k := sizeAt(rest, 0)
		switch {
		case k < 0 || length < 0:
			return nil
		case length > maxBody:
			return fmt.Errorf("%w: record %d of %d bytes, at most %d", ErrRecordTooLarge, i, length, maxBody)
		case length > len(rest)-k:
			return nil
		}
		rest = rest[k+length:]
	}
	return nil
}

// Inflate decompresses src, compressed with codec as Kafka frames a batch's
// records (xerial's framing for snappy, as Java's client writes it), into a
// new slice. Past limit bytes it is ErrDecompressedTooLarge, found before
// more than a few times limit is allocated. Other payloads Kafka's clients
// compress so (telemetry pushes) go through it.
func Inflate(codec Codec, src []byte, limit int) ([]byte, error) {
	r := GetRecordsBuffer()
	defer r.Release()
	out, err := r.inflate(codec, src, limit)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(out), nil
}

// inflate decompresses src, records compressed with codec as Kafka frames
// them, into r's buffer. Output past limit bytes is ErrDecompressedTooLarge,
// found before more than a few times limit is allocated.
func (r *RecordsBuffer) inflate(codec Codec, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		r.src.Reset(src)
		if err := r.gz.Reset(&r.src); err != nil {
			return nil, err
		}
		return r.readAll(&r.gz, limit)
	case CodecSnappy:
		return r.snappy(src, limit)
	case CodecLZ4:
		r.src.Reset(src)
		if r.lz == nil {
			r.lz = lz4.NewReader(&r.src)
		} else {
			r.lz.Reset(&r.src)
		}
		return r.readAll(r.lz, limit)
	case CodecZstd:
		return r.zstd(src, limit)
	}
	return nil, ErrBadCodec
}

// grow returns r's buffer holding b's bytes with room for n bytes in all;
// the buffer kept for the next batch is the grown one.
func (r *RecordsBuffer) grow(b []byte, n int) []byte {
	g := make([]byte, len(b), n)
	copy(g, b)
	r.out = g[:0]
	return g
}

// nextSize is the capacity after c when the output may reach limit+1
// bytes: c doubled, at least minRecordsBuffer, or limit+1 once doubling
// again would pass it.
func nextSize(c, limit int) int {
	if n := max(2*c, minRecordsBuffer); 2*n <= limit {
		return n
	}
	return limit + 1
}

// readAll reads the stream rd (gzip members or lz4 frames) into r's buffer,
// at most limit+1 bytes of it.
func (r *RecordsBuffer) readAll(rd io.Reader, limit int) ([]byte, error) {
	b := r.out[:0]
	for {
		if len(b) == cap(b) {
			if len(b) > limit {
				return nil, ErrDecompressedTooLarge
			}
			b = r.grow(b, nextSize(cap(b), limit))
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(b) > limit {
		return nil, ErrDecompressedTooLarge
	}
	return b, nil
}

// xerialMagic starts snappy in the xerial framing Kafka's Java clients
// write: the magic, then version and minimum compatible version (a 16-byte
// header), then chunks of a big-endian int32 length and a raw snappy block
// each. As franz-go does, the magic alone tells the framing.
var xerialMagic = []byte{130, 83, 78, 65, 80, 80, 89, 0}

const xerialHeaderSize = 16

// snappy decodes a raw snappy block or xerial-framed blocks. Each block
// declares its decoded length up front: the lengths are checked, summed and
// bounded before the buffer grows once to hold them.
func (r *RecordsBuffer) snappy(src []byte, limit int) ([]byte, error) {
	if len(src) <= xerialHeaderSize || !bytes.HasPrefix(src, xerialMagic) {
		n, err := snappyLen(src)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, ErrDecompressedTooLarge
		}
		b := r.out[:0]
		if cap(b) < n {
			b = r.grow(b, n)
		}
		return s2.Decode(b[:n], src)
	}
	chunks := src[xerialHeaderSize:]
	total := 0
	for rest := chunks; len(rest) > 0; {
		block, next, err := xerialChunk(rest)
		if err != nil {
			return nil, err
		}
		n, err := snappyLen(block)
		if err != nil {
			return nil, err
		}
		if total += n; total > limit {
			return nil, ErrDecompressedTooLarge
		}
		rest = next
	}
	b := r.out[:0]
	if cap(b) < total {
		b = r.grow(b, total)
	}
	for len(chunks) > 0 {
		block, next, _ := xerialChunk(chunks)
		n, _ := s2.DecodedLen(block)
		if _, err := s2.Decode(b[len(b):len(b)+n], block); err != nil {
			return nil, err
		}
		b, chunks = b[:len(b)+n], next
	}
	return b, nil
}

var (
	errXerialChunk = errors.New("malformed xerial snappy chunk")
	errSnappyLen   = errors.New("snappy block declares more than it can encode")
)

// snappyLen is the decoded length the raw snappy block b declares. No
// snappy element writes more than 64 bytes for 3 (a copy with a 2-byte
// offset), so a block declaring more than 64/3 times its size is corrupt:
// refused before a buffer of that size is allocated.
func snappyLen(b []byte) (int, error) {
	n, err := s2.DecodedLen(b)
	if err == nil && n > len(b)*64/3 {
		return 0, errSnappyLen
	}
	return n, err
}

// xerialChunk splits the xerial chunks c into the first one's snappy block
// and the chunks after it.
func xerialChunk(c []byte) (block, rest []byte, err error) {
	if len(c) < 4 {
		return nil, nil, errXerialChunk
	}
	n := binary.BigEndian.Uint32(c)
	if uint64(n) > uint64(len(c)-4) {
		return nil, nil, errXerialChunk
	}
	return c[4 : 4+n], c[4+n:], nil
}

// zstdRoom is the room past the bytes expected that a zstd decoder held to
// its buffer's capacity needs for one more block (128 KiB) and the overrun
// of its fast copies: while there is that room, a failed block is corrupt,
// not out of room.
const zstdRoom = 128<<10 + 16

// zstdMaxRatio bounds what zstd frames decode to per byte: no block decodes
// to more than 128 KiB, and a block that decodes to anything takes 4 bytes
// at least (its 3-byte header and an RLE block's byte). Frames that would
// decode to more (a frame content size that lies) are corrupt.
const zstdMaxRatio = (128 << 10) / 4

var errZstdSize = errors.New("zstd frames declare more than their bytes can decode to")

// zstd decodes src's frames whole into r's buffer, the decoder held to the
// buffer's capacity (zstd.WithDecodeAllCapLimit): when the frames pass the
// c bytes expected, c doubles, up to limit or what src's bytes can decode to
// (zstdMaxRatio), whichever is less, and they are decoded again. A pooled
// buffer sized by earlier batches decodes in one pass; a frame whose
// declared size lies costs about what its bytes could decode to, not limit.
func (r *RecordsBuffer) zstd(src []byte, limit int) ([]byte, error) {
	if r.zd == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return nil, err
		}
		r.zd = d
	}
	bound := min(limit, zstdMaxRatio*len(src))
	c := min(max(cap(r.out)-zstdRoom, 8*len(src), minRecordsBuffer), bound)
	for {
		if cap(r.out) < c+zstdRoom {
			r.out = make([]byte, 0, c+zstdRoom)
		}
		out, err := r.zd.DecodeAll(src, r.out[:0:c+zstdRoom])
		switch {
		case err == nil && len(out) <= limit:
			return out, nil
		case err != nil && !errors.Is(err, zstd.ErrDecoderSizeExceeded) && len(out) <= c:
			return nil, err
		case c < bound:
			c = nextSize(c, bound-1)
		case bound < limit && len(out) <= limit:
			return nil, errZstdSize
		default:
			return nil, ErrDecompressedTooLarge
		}
	}
}
