package batch

import (
	"errors"
	"fmt"
	"math"
)

// Errors of ValidateRecords, all of class ErrInvalid (Kafka's record iterator
// throws InvalidRecordException for each, and the produce is answered
// INVALID_RECORD).
var (
	// ErrRecordsShort: the records end before numRecords of them were read, or
	// a record's length points past the batch (Kafka: "Incorrect declared
	// batch size, premature EOF reached").
	ErrRecordsShort = classed(ErrInvalid, "batch: fewer records than the batch's record count")
	// ErrRecordsTrailing: bytes are left after the last of numRecords records.
	ErrRecordsTrailing = classed(ErrInvalid, "batch: bytes left after the batch's last record")
	// ErrRecordStructure: a record's fields do not fill exactly its length (a
	// varint cut short or too long, a negative size, a key, value or header
	// running past the record, bytes left inside it). Kafka: "Found invalid
	// record structure" / "Invalid record size".
	ErrRecordStructure = classed(ErrInvalid, "batch: invalid record structure")
	// ErrDecompressedTooLarge: a compressed batch's records decompress to
	// more than decompressedLimit allows; decompression stops there. Kafka
	// refuses a record over max.decompressed.message.bytes with
	// InvalidRecordException.
	ErrDecompressedTooLarge = classed(ErrInvalid, "batch: records decompress past the limit")
	// ErrRecordTooLarge: a record of a compressed batch is larger, once
	// decompressed, than ValidateRecords' maxRecordBody (the topic's
	// max.decompressed.message.bytes). Kafka: "Invalid record size".
	ErrRecordTooLarge = classed(ErrInvalid, "batch: decompressed record above the limit")
)

// ErrDecompress: a compressed batch's records do not decompress. It is of
// neither class: Kafka's decompressing stream throws a plain KafkaException,
// which its produce path answers UNKNOWN_SERVER_ERROR.
var ErrDecompress = errors.New("batch: records do not decompress")

// ValidateRecords checks that the records of batch b (header h, as Validate
// returned them) are exactly h.NumRecords well-formed records filling the
// rest of the batch, as Kafka's record iterator reads them when its
// LogValidator walks a produced batch. The records of a compressed batch are
// decompressed into buf first (Kafka's LogValidator decompresses every
// produced batch) and must fill the decompressed bytes so. Each record is
// varint length, then within that length int8 attributes, varlong
// timestampDelta, varint offsetDelta (>= 0), varint key length (-1: null)
// and key, varint value length (-1: null) and value, varint header count
// (>= 0) and per header varint key length (>= 0), key, varint value length
// (-1: null) and value; the fields must use up the length exactly. Varints
// are Kafka's: at most 5 bytes for an int32, 10 for a long.
//
// It returns the batch's record section for further checks: b's own bytes,
// or the decompressed records in buf, valid until buf is used again or
// released. The walk neither allocates nor copies, except for the error it
// returns; errors wrap ErrRecordsShort, ErrRecordsTrailing or
// ErrRecordStructure and name the record's index in the batch, or wrap
// ErrDecompress.
//
// A record of a compressed batch whose body (the value of its length varint)
// is above maxRecordBody is refused with ErrRecordTooLarge, as Kafka's
// decompressing iterator refuses one above max.decompressed.message.bytes; an
// uncompressed batch's records are not held to it (Kafka reads them without
// that iterator).
func ValidateRecords(h Header, b []byte, buf *RecordsBuffer, maxRecordBody int) ([]byte, error) {
	records, err := buf.Section(h, b)
	if err != nil {
		return nil, err
	}
	if h.Codec() == CodecNone {
		maxRecordBody = math.MaxInt
	}
	if err := checkRecords(h.NumRecords, records, maxRecordBody); err != nil {
		return nil, err
	}
	return records, nil
}

// checkRecords is ValidateRecords' walk of the n records of a record section,
// none of whose bodies may be above maxBody.
func checkRecords(n int32, rest []byte, maxBody int) error {
	for i := range n {
		length, k := sizeAt(rest, 0)
		switch {
		case k < 0:
			if len(rest) == 0 {
				return fmt.Errorf("%w: %d records held, %d declared", ErrRecordsShort, i, n)
			}
			return fmt.Errorf("%w: record %d: bad length varint", ErrRecordStructure, i)
		case length < 0:
			return fmt.Errorf("%w: record %d: negative length %d", ErrRecordStructure, i, length)
		case length > maxBody:
			return fmt.Errorf("%w: record %d of %d bytes, at most %d", ErrRecordTooLarge, i, length, maxBody)
		case length > len(rest)-k:
			return fmt.Errorf("%w: record %d of %d bytes, %d left in the batch", ErrRecordsShort, i, length, len(rest)-k)
		}
		if !recordFits(rest[k : k+length]) {
			return fmt.Errorf("%w: record %d", ErrRecordStructure, i)
		}
		rest = rest[k+length:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after record %d", ErrRecordsTrailing, len(rest), n-1)
	}
	return nil
}

// recordFits reports whether the record body r (after its length varint)
// holds exactly its fields. It is the produce path's per-record cost: the
// varints it only skips are not decoded, and sizes of one or two bytes (up
// to 8 KiB) are decoded without a loop.
func recordFits(r []byte) bool {
	i := skipVarint(r, 1, 10) // attributes, timestampDelta
	if i < 0 {
		return false
	}
	var n int
	if n, i = sizeAt(r, i); i < 0 || n < 0 { // offsetDelta: no record below the base offset
		return false
	}
	if n, i = sizeAt(r, i); i < 0 || n < -1 || n > len(r)-i { // key
		return false
	}
	i += max(n, 0)
	if n, i = sizeAt(r, i); i < 0 || n < -1 || n > len(r)-i { // value
		return false
	}
	i += max(n, 0)
	headers, i := sizeAt(r, i)
	if i < 0 || headers < 0 {
		return false
	}
	for range headers {
		if n, i = sizeAt(r, i); i < 0 || n < 0 || n > len(r)-i { // key: never null
			return false
		}
		i += n
		if n, i = sizeAt(r, i); i < 0 || n < -1 || n > len(r)-i { // value
			return false
		}
		i += max(n, 0)
	}
	return i == len(r)
}

// skipVarint returns the index after the varint of at most maxLen bytes at
// b[i:], or -1 when b holds none there. i must be >= 0.
func skipVarint(b []byte, i, maxLen int) int {
	for k := i; k < len(b) && k < i+maxLen; k++ {
		if b[k] < 0x80 {
			return k + 1
		}
	}
	return -1
}

// sizeAt decodes the int32 varint at b[i:] (a size or a count) and returns
// the index after it, or -1 when b holds none there. i must be >= 0.
func sizeAt(b []byte, i int) (int, int) {
	if i < len(b) {
		u := int(b[i])
		if u < 0x80 {
			return u>>1 ^ -(u & 1), i + 1
		}
		if i+1 < len(b) && b[i+1] < 0x80 {
			u = u&0x7f | int(b[i+1])<<7
			return u>>1 ^ -(u & 1), i + 2
		}
	}
	return sizeAtSlow(b, i)
}

func sizeAtSlow(b []byte, i int) (int, int) {
	var u uint32
	for k := i; k < len(b) && k < i+5; k++ {
		u |= uint32(b[k]&0x7f) << (7 * (k - i))
		if b[k] < 0x80 {
			return int(int32(u>>1) ^ -int32(u&1)), k + 1
		}
	}
	return 0, -1
}

// varint32 decodes a zig-zag varint of at most 5 bytes into an int32, as
// Kafka's ByteUtils.readVarint does (a fifth byte's high bits drop). n is 0
// when b holds none.
func varint32(b []byte) (v int32, n int) {
	x, n := sizeAt(b, 0)
	return int32(x), max(n, 0)
}

// varlongLen returns the length of a varint of at most 10 bytes (a varlong,
// as Kafka's ByteUtils.readVarlong) at the start of b, 0 when b holds none.
func varlongLen(b []byte) int { return max(skipVarint(b, 0, 10), 0) }
