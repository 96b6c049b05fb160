package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Compression is a codec and the level to compress at, in Kafka's terms (the
// topic configs compression.gzip.level: -1 or 1-9; compression.lz4.level:
// 1-17; compression.zstd.level: -131072-22; snappy has no level).
type Compression struct {
	Codec Codec
	Level int
}

// DefaultLevel is Kafka's default level for codec (0 for none and snappy).
func DefaultLevel(codec Codec) int {
	switch codec {
	case CodecGzip:
		return -1
	case CodecLZ4:
		return 9
	case CodecZstd:
		return 3
	}
	return 0
}

// kgoCodec is c in franz-go's terms (lz4 is compressLZ4's). Zstd levels
// are mapped to the encoder's four speeds as zstd's own levels are (0 being
// zstd's default level, 3).
func (c Compression) kgoCodec() (kgo.CompressionCodec, error) {
	switch c.Codec {
	case CodecGzip:
		return kgo.GzipCompression().WithLevel(c.Level), nil
	case CodecSnappy:
		return kgo.SnappyCompression(), nil
	case CodecZstd:
		level := c.Level
		if level == 0 { // zstd's "default level" (ZSTD_CLEVEL_DEFAULT), as zstd-jni reads 0
			level = DefaultLevel(CodecZstd)
		}
		return kgo.ZstdCompression().WithLevel(int(zstd.EncoderLevelFromZstd(level))), nil
	}
	return kgo.CompressionCodec{}, ErrBadCodec
}

// lz4Level is an lz4 level in the library's terms. Kafka compresses its
// default level (9) with lz4's fast compressor and every other level with
// the high compressor at that level, which the library takes up to 9.
func lz4Level(level int) lz4.CompressionLevel {
	if level == DefaultLevel(CodecLZ4) {
		return lz4.Fast
	}
	return lz4.CompressionLevel(1 << (8 + min(max(level, 1), 9))) // Level1 (1<<9) .. Level9 (1<<17)
}

// lz4Writers pools lz4 frame writers by level.
var lz4Writers = struct {
	sync.Mutex
	m map[lz4.CompressionLevel]*sync.Pool
}{m: map[lz4.CompressionLevel]*sync.Pool{}}

// compressLZ4 appends records compressed at level as Kafka frames lz4:
// independent 64 KiB blocks, no content checksum. (franz-go's compressor
// writes 4 MiB blocks, with which JSON events compressed a third slower
// here: docs/benchmarks.md, session 43.)
func compressLZ4(dst *bytes.Buffer, records []byte, level int) ([]byte, error) {
	l := lz4Level(level)
	lz4Writers.Lock()
	pool, ok := lz4Writers.m[l]
	if !ok {
		pool = &sync.Pool{New: func() any {
			w := lz4.NewWriter(nil)
			if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1), lz4.CompressionLevelOption(l)); err != nil {
				panic(err) // the options are constants the library takes
			}
			return w
		}}
		lz4Writers.m[l] = pool
	}
	lz4Writers.Unlock()
	w := pool.Get().(*lz4.Writer)
	defer pool.Put(w)
	w.Reset(dst)
	if _, err := w.Write(records); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	w.Reset(nil)
	return dst.Bytes(), nil
}

// compressors holds one franz-go compressor per Compression, made on first
// use; a compressor is safe for concurrent use (its encoders are pooled).
var compressors = struct {
	sync.Mutex
	m map[Compression]kgo.Compressor
}{m: map[Compression]kgo.Compressor{}}

// Compress appends the compression of records by c to dst and returns it.
func Compress(dst *bytes.Buffer, records []byte, c Compression) ([]byte, error) {
	if c.Codec == CodecLZ4 {
		return compressLZ4(dst, records, c.Level)
	}
	compressors.Lock()
	comp, ok := compressors.m[c]
	if !ok {
		cc, err := c.kgoCodec()
		if err == nil {
			comp, err = kgo.DefaultCompressor(cc)
		}
		if err != nil {
			compressors.Unlock()
			return nil, err
		}
		compressors.m[c] = comp
	}
	compressors.Unlock()
	out, used := comp.Compress(dst, records)
	if used != kgo.CompressionCodecType(c.Codec) {
		return nil, fmt.Errorf("batch: compressing with codec %d failed", c.Codec)
	}
	return out, nil
}

// compressBuffers hold Recompress's compressed records; renumberBuffers its
// renumbered ones (a rare case: clients number records 0, 1, ...).
var (
	compressBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	renumberBuffers = sync.Pool{New: func() any { return new([]byte) }}
)

// Recompress rebuilds produced batch b (header h, records its record section,
// decompressed, as ValidateRecords returned it) with its records compressed
// by c (or uncompressed, codec none), as Kafka's LogValidator rebuilds a batch
// whose codec is not the one the topic's compression.type names. The batch
// keeps its producer id, epoch, base sequence, transactional bit, first
// timestamp and records; records whose offset deltas are not 0, 1, ... are
// renumbered so (Kafka assigns offsets of its own then too), and the max
// timestamp is taken from the records. The base offset and leader epoch are
// the leader's to set at append. The batch returned is newly allocated; the
// scratch buffers are pooled.
//
// A rebuilt batch whose records would decompress past the bound every reader
// holds a stored batch to (the larger of MinDecompressedLimit and
// MaxDecompressionRatio times its compressed size) is refused with
// ErrDecompressedTooLarge: stored, no reader could read it back.
func Recompress(b []byte, h Header, records []byte, c Compression) ([]byte, error) {
	maxDelta, numbered, err := scanRecords(records, h.NumRecords)
	if err != nil {
		return nil, err
	}
	body := records
	if !numbered {
		scratch := renumberBuffers.Get().(*[]byte)
		body = renumbered((*scratch)[:0], records, h.NumRecords)
		if cap(body) <= maxPooledRecords { // a rare huge batch's buffer is not kept
			*scratch = body[:0]
		}
		defer renumberBuffers.Put(scratch)
	}
	if c.Codec != CodecNone {
		zbuf := compressBuffers.Get().(*bytes.Buffer)
		defer compressBuffers.Put(zbuf)
		zbuf.Reset()
		n := len(body)
		if body, err = Compress(zbuf, body, c); err != nil {
			return nil, err
		}
		if limit := decompressedLimit(len(body)); n > limit {
			return nil, fmt.Errorf("%w: codec %d: %d bytes of records compress to %d, past the %d-byte bound of a stored batch",
				ErrDecompressedTooLarge, c.Codec, n, len(body), limit)
		}
	}
	out := make([]byte, HeaderSize, HeaderSize+len(body))
	copy(out, b[:HeaderSize])
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-LengthPrefix))
	attrs := h.Attributes&^codecMask | int16(c.Codec)
	binary.BigEndian.PutUint16(out[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(out[offLastOffsetDelta:], uint32(h.NumRecords-1))
	binary.BigEndian.PutUint64(out[offMaxTimestamp:], uint64(h.FirstTimestamp+maxDelta))
	binary.BigEndian.PutUint32(out[offCRC:], crc(out[crcStart:]))
	return out, nil
}

// scanRecords returns the largest timestamp delta of the n records of
// records, and whether their offset deltas are 0, 1, ... already.
func scanRecords(records []byte, n int32) (maxDelta int64, numbered bool, err error) {
	numbered = true
	i := int32(0)
	err = WalkRecords(records, n, func(r RawRecord) error {
		if i == 0 || r.TimestampDelta > maxDelta {
			maxDelta = r.TimestampDelta
		}
		numbered = numbered && r.OffsetDelta == i
		i++
		return nil
	})
	return maxDelta, numbered, err
}

// renumbered appends the n records of records (which scanRecords took) to
// dst, each with offset delta equal to its index.
func renumbered(dst, records []byte, n int32) []byte {
	i := int32(0)
	_ = WalkRecords(records, n, func(r RawRecord) error {
		dst = appendWithOffsetDelta(dst, r.Bytes, i)
		i++
		return nil
	})
	return dst
}

// appendWithOffsetDelta appends record rec (length varint included, as
// WalkRecords gives it) with its offset delta replaced by delta.
func appendWithOffsetDelta(dst, rec []byte, delta int32) []byte {
	_, k := binary.Varint(rec)
	body := rec[k:]
	_, t := binary.Varint(body[1:]) // after the attributes byte
	head := body[:1+t]              // attributes and timestamp delta
	_, o := binary.Varint(body[len(head):])
	tail := body[len(head)+o:]
	var d [binary.MaxVarintLen32]byte
	dn := binary.PutVarint(d[:], int64(delta))
	dst = binary.AppendVarint(dst, int64(len(head)+dn+len(tail)))
	dst = append(dst, head...)
	dst = append(dst, d[:dn]...)
	return append(dst, tail...)
}
