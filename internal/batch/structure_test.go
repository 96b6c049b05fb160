package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordsOf builds an uncompressed batch of recs (headers, null keys and
// values included) and returns it with its header.
func recordsOf(t *testing.T, recs []Record) ([]byte, Header) {
	t.Helper()
	return codecRecordsOf(t, CodecNone, recs)
}

// codecRecordsOf is recordsOf with the records compressed by codec.
func codecRecordsOf(t *testing.T, codec Codec, recs []Record) ([]byte, Header) {
	t.Helper()
	b, err := Build(BuildOptions{Codec: codec}, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// withRecords returns b (one batch) with its records replaced by body and its
// record count set to n, batch length and CRC fixed: only the records are wrong.
func withRecords(b []byte, body []byte, n int32) []byte {
	return withSection(b, CodecNone, body, n)
}

// withSection is withRecords for a section of records compressed with codec
// (codec's attribute bits set, section taken as it is).
func withSection(b []byte, codec Codec, section []byte, n int32) []byte {
	c := append(append([]byte(nil), b[:HeaderSize]...), section...)
	binary.BigEndian.PutUint16(c[offAttributes:], binary.BigEndian.Uint16(c[offAttributes:])&^codecMask|uint16(codec))
	binary.BigEndian.PutUint32(c[offLength:], uint32(len(c)-LengthPrefix))
	binary.BigEndian.PutUint32(c[offLastOffsetDelta:], uint32(n-1))
	binary.BigEndian.PutUint32(c[offNumRecords:], uint32(n))
	binary.BigEndian.PutUint32(c[offCRC:], Checksum(c))
	return c
}

// validateRecords is ValidateRecords with a buffer of its own.
func validateRecords(h Header, b []byte) error {
	buf := GetRecordsBuffer()
	defer buf.Release()
	_, err := ValidateRecords(h, b, buf, math.MaxInt32)
	return err
}

// TestValidateRecords: ValidateRecords takes the records Kafka's record
// iterator reads (exactly numRecords of them, each field inside its record's
// length, nothing left over) and refuses, as ErrInvalid (INVALID_RECORD), a
// batch with fewer records than its count, bytes after its last record, a
// record whose length points past the batch or whose fields do not fill its
// length exactly.
func TestValidateRecords(t *testing.T) {
	good := []Record{
		{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}, {Key: "n"}}},
		{Value: nil, TimestampDelta: -5},
		{Key: []byte{}, Value: make([]byte, 300), TimestampDelta: 1 << 40},
	}
	b, h := recordsOf(t, good)
	if err := validateRecords(h, b); err != nil {
		t.Fatalf("well-formed batch: %v", err)
	}
	body := b[HeaderSize:]
	one, _ := recordsOf(t, good[:1])
	oneBody := one[HeaderSize:]

	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"count above the records held", withRecords(b, body, 4), ErrRecordsShort},
		{"count below the records held", withRecords(b, body, 2), ErrRecordsTrailing},
		{"bytes after the last record", withRecords(b, append(append([]byte(nil), body...), 0, 0, 0), 3), ErrRecordsTrailing},
		{"length past the batch", withRecords(one, append([]byte{0x7e}, oneBody[1:]...), 1), ErrRecordsShort},
		{"negative length", withRecords(one, append([]byte{0x01}, oneBody[1:]...), 1), ErrRecordStructure},
		{"length varint cut short", withRecords(one, []byte{0x80}, 1), ErrRecordStructure},
		{"zero length", withRecords(one, []byte{0x00}, 1), ErrRecordStructure},
		// the record's length one more than its fields, with a byte to cover it
		{"bytes left inside a record", withRecords(one, append(append([]byte{oneBody[0] + 2}, oneBody[1:]...), 0), 1), ErrRecordStructure},
		// the record's length one less than its fields: its last header's value runs past it
		{"field past its record", withRecords(one, append([]byte{oneBody[0] - 2}, oneBody[1:]...), 1), ErrRecordStructure},
		// attributes, ts 0, offset -1 (below the base: found by FuzzValidate), key null, value null, no header
		{"negative offset delta", withRecords(one, []byte{0x0c, 0, 0, 0x01, 0x01, 0x01, 0x00}, 1), ErrRecordStructure},
		// attributes, ts 0, offset 0, key null, value null, header count -1
		{"negative header count", withRecords(one, []byte{0x0c, 0, 0, 0, 0x01, 0x01, 0x01}, 1), ErrRecordStructure},
		// ... header count 1, header key null
		{"null header key", withRecords(one, []byte{0x10, 0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01}, 1), ErrRecordStructure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Validate(tc.b)
			if err != nil {
				t.Fatalf("header: %v", err)
			}
			err = validateRecords(h, tc.b)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want %v (INVALID_RECORD)", err, tc.want)
			}
		})
	}
}

// TestValidateRecordsMaxBody: a record of a compressed batch whose body
// (its length varint's value) is above maxRecordBody is refused
// ErrRecordTooLarge, INVALID_RECORD, as Kafka's decompressing record iterator
// refuses one over max.decompressed.message.bytes; at the limit it passes,
// and an uncompressed batch is never held to it (Kafka does not read one
// through that iterator).
func TestValidateRecordsMaxBody(t *testing.T) {
	recs := []Record{{Value: make([]byte, 50)}, {Value: make([]byte, 500)}}
	plain, _ := recordsOf(t, recs)
	body, k := sizeAt(plain[HeaderSize:], 0) // the records' bodies
	second, _ := sizeAt(plain[HeaderSize:], k+body)
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b, h := codecRecordsOf(t, codec, recs)
		for _, tc := range []struct {
			max  int
			fail bool
		}{
			{math.MaxInt32 - 8, false},
			{second, false},
			{second - 1, true},
			{body, true},
			{1, true},
		} {
			buf := GetRecordsBuffer()
			_, err := ValidateRecords(h, b, buf, tc.max)
			buf.Release()
			want := tc.fail && codec != CodecNone
			if want != (err != nil) || want && (!errors.Is(err, ErrRecordTooLarge) || !errors.Is(err, ErrInvalid)) {
				t.Errorf("codec %d, max %d (bodies %d, %d): %v, want refused %v", codec, tc.max, body, second, err, want)
			}
		}
	}
}

// TestValidateCompressedRecords: the records of a compressed batch are
// decompressed and walked as an uncompressed batch's are, for every codec,
// as Kafka's LogValidator reads them through its decompressing record
// iterator: a count above or below the records held, bytes after the last
// record and a broken record are INVALID_RECORD (InvalidRecordException);
// records that do not decompress are ErrDecompress (a KafkaException, which
// Kafka answers UNKNOWN_SERVER_ERROR).
func TestValidateCompressedRecords(t *testing.T) {
	b, _ := recordsOf(t, []Record{
		{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{Value: bytes.Repeat([]byte("value "), 200), TimestampDelta: 3},
		{Key: []byte("k2")},
	})
	body := b[HeaderSize:]
	// attributes, ts 0, offset 0, key null, value null, header count -1:
	// Kafka's "Found invalid number of record headers -1"
	broken := []byte{0x0c, 0, 0, 0, 0x01, 0x01, 0x01}
	garbage := []byte("these bytes are no codec's output, only plain text.")
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		zip := func(p []byte) []byte {
			c, err := compress(p, codec)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		for _, tc := range []struct {
			name string
			b    []byte
			want error // nil: taken
		}{
			{"well formed", withSection(b, codec, zip(body), 3), nil},
			{"count above the records held", withSection(b, codec, zip(body), 4), ErrRecordsShort},
			{"count below the records held", withSection(b, codec, zip(body), 2), ErrRecordsTrailing},
			{"bytes after the last record", withSection(b, codec, zip(append(bytes.Clone(body), 0, 0, 0)), 3), ErrRecordsTrailing},
			{"broken record", withSection(b, codec, zip(broken), 1), ErrRecordStructure},
			{"records that do not decompress", withSection(b, codec, garbage, 3), ErrDecompress},
		} {
			t.Run(fmt.Sprintf("codec=%d/%s", codec, tc.name), func(t *testing.T) {
				h, err := Validate(tc.b)
				if err != nil {
					t.Fatalf("header: %v", err)
				}
				err = validateRecords(h, tc.b)
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("err = %v, want nil", err)
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Fatalf("err = %v, want %v", err, tc.want)
				case tc.want == ErrDecompress && (errors.Is(err, ErrInvalid) || errors.Is(err, ErrCorrupt)):
					t.Fatalf("err = %v: of a class, want UNKNOWN_SERVER_ERROR's", err)
				}
			})
		}
	}
}

// TestValidateRecordsVarints: varints are read as Kafka reads them, an int32
// in at most 5 bytes and a long in at most 10.
func TestValidateRecordsVarints(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		v    int32
		n    int
		long int
	}{
		{[]byte{0x00}, 0, 1, 1},
		{[]byte{0x01}, -1, 1, 1},
		{[]byte{0x02}, 1, 1, 1},
		{[]byte{0xac, 0x02}, 150, 2, 2},
		{[]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, 1<<31 - 1, 5, 5},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, -1 << 31, 5, 5},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, 0, 6},
		{[]byte{0x80, 0x80}, 0, 0, 0},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, 0, 10},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, 0, 0},
		{nil, 0, 0, 0},
	} {
		if v, n := varint32(tc.b); v != tc.v || n != tc.n {
			t.Errorf("varint32(% x) = %d, %d; want %d, %d", tc.b, v, n, tc.v, tc.n)
		}
		if n := varlongLen(tc.b); n != tc.long {
			t.Errorf("varlongLen(% x) = %d, want %d", tc.b, n, tc.long)
		}
	}
}

// TestValidateRecordsZeroAllocs: the produce path's record walk does not
// allocate for a well-formed batch, and a compressed batch's decompression,
// with a pooled buffer and decoders, does not either once they are warm.
func TestValidateRecordsZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{Key: []byte("key"), Value: fmt.Appendf(nil, "value %d %0100d", i, i), Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}}
	}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b, h := codecRecordsOf(t, codec, recs)
		if allocs := testing.AllocsPerRun(100, func() {
			if err := validateRecords(h, b); err != nil {
				panic(err)
			}
		}); allocs != 0 {
			t.Errorf("codec %d: ValidateRecords allocates %.1f times per batch", codec, allocs)
		}
	}
}

// BenchmarkValidateRecords measures the produce path's record walk over a
// batch of about 64 KiB: 64 records of 1 KiB, 640 of 100 B.
//
//	go test -run '^$' -bench BenchmarkValidateRecords ./internal/batch/
func BenchmarkValidateRecords(b *testing.B) {
	for _, size := range []struct{ n, value int }{{64, 1024}, {640, 100}} {
		b.Run(fmt.Sprintf("value=%d", size.value), func(b *testing.B) {
			recs := make([]Record, size.n)
			for i := range recs {
				recs[i] = Record{TimestampDelta: int64(i), Value: make([]byte, size.value)}
			}
			batch, err := Build(BuildOptions{FirstTimestamp: 1700000000000}, recs)
			if err != nil {
				b.Fatal(err)
			}
			h, err := Validate(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if err := validateRecords(h, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
