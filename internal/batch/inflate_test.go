package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// bombSize is what TestDecompressionBomb's batches inflate to: eight times
// the limit on them.
const bombSize = 8 * MinDecompressedLimit

// concatenated returns n copies of the compressed stream c: gzip members, lz4
// and zstd frames that their readers read on as one stream.
func concatenated(c []byte, n int) []byte { return bytes.Repeat(c, n) }

// gzipped, lz4ed and zstdStreamed compress p with one stream each (zstd's
// frame does not declare its size, as a streaming producer's does not).
func gzipped(t testing.TB, p []byte) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func lz4ed(t testing.TB, p []byte) []byte {
	var b bytes.Buffer
	w := lz4.NewWriter(&b)
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstdStreamed(t testing.TB, p []byte) []byte {
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// snappyClaiming is a raw snappy block whose header claims n decoded bytes,
// and xerialClaiming the same block in Kafka's xerial framing.
func snappyClaiming(n int) []byte {
	return append(binary.AppendUvarint(nil, uint64(n)), 0, 0, 0, 0)
}

func xerialClaiming(n int) []byte {
	block := snappyClaiming(n)
	x := []byte{130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1}
	return append(binary.BigEndian.AppendUint32(x, uint32(len(block))), block...)
}

// TestDecompressionBomb: a small batch whose records inflate to bombSize
// (eight times the limit) is refused as ErrDecompressedTooLarge
// (INVALID_RECORD), naming the limit, for gzip, lz4 and zstd (snappy
// cannot compress 64 times: TestSizeThatLies), and the leader
// allocates a few times the limit at most (the buffer doubling up to it;
// zstd decodes again into a doubled buffer, its decoder overshooting by a
// quarter), not the bomb's size. Before the limit, these allocated 2-3 GiB.
func TestDecompressionBomb(t *testing.T) {
	mib := make([]byte, 1<<20)
	b, _ := recordsOf(t, []Record{{Value: []byte("v")}})
	for _, tc := range []struct {
		name    string
		codec   Codec
		section []byte
	}{
		{"gzip", CodecGzip, concatenated(gzipped(t, mib), bombSize>>20)},
		{"lz4", CodecLZ4, concatenated(lz4ed(t, mib), bombSize>>20)},
		{"zstd", CodecZstd, concatenated(zstdStreamed(t, mib), bombSize>>20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bomb := withSection(b, tc.codec, tc.section, 1)
			h, err := Validate(bomb)
			if err != nil {
				t.Fatalf("header: %v", err)
			}
			limit := decompressedLimit(len(tc.section))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err = validateRecords(h, bomb)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrDecompressedTooLarge) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%d compressed bytes: err = %v, want %v (INVALID_RECORD)", len(tc.section), err, ErrDecompressedTooLarge)
			} else if !bytes.Contains([]byte(err.Error()), []byte(strconv.Itoa(limit))) {
				t.Errorf("err = %v: does not name the limit %d", err, limit)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 5*uint64(limit) {
				t.Errorf("%d bytes allocated for %d compressed bytes inflating to %d, limit %d", grown, len(tc.section), bombSize, limit)
			}
		})
	}
}

// xerialed frames p as Kafka's Java producer does: the xerial header, then
// 32 KiB chunks, each a big-endian length and a raw snappy block.
func xerialed(p []byte) []byte {
	x := []byte{130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for c := range slices.Chunk(p, 32<<10) {
		block := s2.EncodeSnappy(nil, c)
		x = append(binary.BigEndian.AppendUint32(x, uint32(len(block))), block...)
	}
	return x
}

// TestInflateLimit: records that decompress to exactly the limit are taken
// and one byte more is ErrDecompressedTooLarge, for every codec and framing,
// from an empty buffer that grows (zstd decoding again) and from a buffer
// already grown; bytes no codec wrote do not decompress.
func TestInflateLimit(t *testing.T) {
	p := make([]byte, 300<<10)
	for i := range p {
		p[i] = byte(i * i >> 7)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte("these bytes are no codec's output, only plain text.")
	for _, tc := range []struct {
		name  string
		codec Codec
		src   []byte
	}{
		{"gzip", CodecGzip, gzipped(t, p)},
		{"gzip members", CodecGzip, append(gzipped(t, p[:len(p)/2]), gzipped(t, p[len(p)/2:])...)},
		{"snappy", CodecSnappy, s2.EncodeSnappy(nil, p)},
		{"snappy xerial", CodecSnappy, xerialed(p)},
		{"lz4", CodecLZ4, lz4ed(t, p)},
		{"zstd", CodecZstd, zstdStreamed(t, p)},
		{"zstd declared size", CodecZstd, enc.EncodeAll(p, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r RecordsBuffer
			for _, warm := range []string{"empty buffer", "grown buffer"} {
				out, err := r.inflate(tc.codec, tc.src, len(p))
				if err != nil || !bytes.Equal(out, p) {
					t.Fatalf("%s, limit the records' size: %d bytes, err %v", warm, len(out), err)
				}
				if _, err := r.inflate(tc.codec, tc.src, len(p)-1); !errors.Is(err, ErrDecompressedTooLarge) {
					t.Fatalf("%s, limit a byte short: err = %v, want %v", warm, err, ErrDecompressedTooLarge)
				}
			}
			if _, err := r.inflate(tc.codec, garbage, len(p)); err == nil || errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("garbage: err = %v, want one of the codec's", err)
			}
		})
	}
}

// zstdClaiming is a zstd frame that declares n decoded bytes (a single
// segment, its 8-byte frame content size) and holds one RLE block of 16.
func zstdClaiming(n uint64) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}
	f = binary.LittleEndian.AppendUint64(f, n)
	const last, rle, size = 1, 1, 16
	h := uint32(last | rle<<1 | size<<3)
	return append(f, byte(h), byte(h>>8), byte(h>>16), 'x')
}

// TestSizeThatLies: a snappy block or a zstd frame declaring more than its
// bytes can decode to, above the limit or below it, does not decompress
// (UNKNOWN_SERVER_ERROR, as Kafka's codec stream throws), and nothing like
// the size it declares is allocated. A snappy block encodes 64 bytes for 3
// at most, raw or in xerial framing: nothing of its length is allocated. A
// zstd block takes 4 bytes at least and decodes to 128 KiB at most: about
// what those bytes could decode to is allocated, not the limit (a 22-byte
// section allocated twice the limit, the decoder's buffer doubling up to it).
func TestSizeThatLies(t *testing.T) {
	b, _ := recordsOf(t, []Record{{Value: []byte("v")}})
	for _, tc := range []struct {
		name    string
		codec   Codec
		section []byte
		most    uint64 // bytes it may allocate
	}{
		{"snappy above the limit", CodecSnappy, snappyClaiming(bombSize), 1 << 20},
		{"snappy below the limit", CodecSnappy, snappyClaiming(MinDecompressedLimit / 2), 1 << 20},
		{"xerial above the limit", CodecSnappy, xerialClaiming(bombSize), 1 << 20},
		{"xerial below the limit", CodecSnappy, xerialClaiming(MinDecompressedLimit / 2), 1 << 20},
		{"zstd above the limit", CodecZstd, zstdClaiming(bombSize), 4 << 20},
		{"zstd below the limit", CodecZstd, zstdClaiming(MinDecompressedLimit / 2), 4 << 20},
		{"zstd after a frame", CodecZstd, append(zstdStreamed(t, []byte("records")), zstdClaiming(MinDecompressedLimit/2)...), 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := withSection(b, tc.codec, tc.section, 1)
			h, err := Validate(batch)
			if err != nil {
				t.Fatalf("header: %v", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err = validateRecords(h, batch)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrDecompress) {
				t.Errorf("err = %v, want %v", err, ErrDecompress)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > tc.most {
				t.Errorf("%d bytes allocated for a %d-byte section", grown, len(tc.section))
			}
		})
	}
}

// TestSectionWithin: the records of a compressed batch whose bodies are at
// most the limit are returned decompressed; a body one byte above it is
// ErrRecordTooLarge naming the record, as Kafka's streaming iterator
// refuses a record above max.decompressed.message.bytes; an uncompressed
// batch's records are not held to it; the bound of Section still applies.
func TestSectionWithin(t *testing.T) {
	recs := []Record{{Value: []byte("a")}, {Value: bytes.Repeat([]byte("b"), 300)}, {Value: []byte("c")}}
	plain, _ := recordsOf(t, recs)
	largest := 0
	for rest := plain[HeaderSize:]; len(rest) > 0; {
		n, k := binary.Varint(rest)
		largest = max(largest, int(n))
		rest = rest[k+int(n):]
	}
	gz, err := Build(BuildOptions{Codec: CodecGzip}, recs)
	if err != nil {
		t.Fatal(err)
	}
	bomb := withSection(plain, CodecSnappy, snappyClaiming(bombSize), 1)
	for _, tc := range []struct {
		name      string
		b         []byte
		maxRecord int
		want      error
	}{
		{"at the limit", gz, largest, nil},
		{"a byte above", gz, largest - 1, ErrRecordTooLarge},
		{"uncompressed", plain, 1, nil},
		{"declares too much", bomb, largest, ErrDecompress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Validate(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			buf := GetRecordsBuffer()
			defer buf.Release()
			records, err := buf.SectionWithin(h, tc.b, tc.maxRecord)
			switch {
			case !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case err == nil && !bytes.Equal(records, plain[HeaderSize:]):
				t.Fatalf("records differ from the batch's: %d bytes, want %d", len(records), len(plain)-HeaderSize)
			case errors.Is(err, ErrRecordTooLarge) && !strings.Contains(err.Error(), "record 1 "):
				t.Fatalf("err = %v: does not name record 1", err)
			}
		})
	}
}
