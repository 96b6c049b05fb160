// Package batch parses and validates Kafka v2 record batch headers, and rewrites the
// few header fields a broker is allowed to change. It owns no state and does no I/O;
// every function is safe for concurrent use on distinct byte slices, and the hot-path
// functions (Validate, Iter, the setters) do not allocate.
//
// A v2 record batch, all integers big-endian:
//
//	offset  size  field                 notes
//	------  ----  --------------------  ------------------------------------------
//	     0     8  baseOffset            stamped by the leader (SetBaseOffset)
//	     8     4  batchLength           bytes after this field: len(batch) - 12
//	    12     4  partitionLeaderEpoch  stamped by the leader (SetPartitionLeaderEpoch)
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21:]
//	    21     2  attributes            bits 0-2 codec, 3 timestamp type,
//	                                    4 transactional, 5 control
//	    23     4  lastOffsetDelta       numRecords - 1
//	    27     8  firstTimestamp
//	    35     8  maxTimestamp          rewritten for LogAppendTime (SetLogAppendTime)
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  numRecords
//	    61     -  records               possibly compressed
//
// The base offset and the partition leader epoch lie before the CRC-covered range, so
// stamping them leaves the CRC valid; changing the timestamp type or max timestamp
// needs the CRC recomputed, which SetLogAppendTime does.
//
// Errors come in two classes that callers map to Kafka error codes: ErrCorrupt
// (CORRUPT_MESSAGE: the bytes are damaged or cut short) and ErrInvalid
// (INVALID_RECORD: well-formed bytes that break a rule). Every specific error below
// matches exactly one of them with errors.Is; ErrDecompress (records that do not
// decompress, which Kafka answers UNKNOWN_SERVER_ERROR) matches neither.
package batch

import (
	"encoding/binary"
	"errors"
)

// Field offsets and sizes of the v2 header.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// HeaderSize is the size of a v2 batch header, up to the records.
	HeaderSize = 61
	// LengthPrefix is the number of bytes before and including batchLength: a batch's
	// total size is LengthPrefix + batchLength.
	LengthPrefix = 12
	// crcStart is the first byte the CRC covers.
	crcStart = offAttributes
	// MaxBatchSize bounds a single batch. Kafka's own limits are far lower (message.max.bytes,
	// segment.bytes); this only rejects lengths no broker could accept.
	MaxBatchSize = 1 << 30
)

// Attribute bits.
const (
	codecMask         = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
	maxCodec          = CodecZstd
)

// Codec is the compression codec of a batch's records (attribute bits 0-2).
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

// Errors returned by this package. The first two are classes; every other error wraps
// exactly one of them (but ErrDecompress), so callers can switch on the class and still log the detail.
// None is retriable: the same bytes fail the same way every time.
var (
	// ErrCorrupt: the bytes are damaged or incomplete (bad CRC, a length that does not
	// match the bytes present). Kafka's CORRUPT_MESSAGE.
	ErrCorrupt = errors.New("batch: corrupt record batch")
	// ErrInvalid: the bytes are intact but break a rule of the format. Kafka's
	// INVALID_RECORD.
	ErrInvalid = errors.New("batch: invalid record batch")

	// ErrTruncated: fewer bytes than a header, or than batchLength promises.
	ErrTruncated = classed(ErrCorrupt, "batch: truncated record batch")
	// ErrBadLength: batchLength is below the header size, above MaxBatchSize, or does
	// not match the bytes given to Validate.
	ErrBadLength = classed(ErrCorrupt, "batch: bad batch length")
	// ErrBadCRC: the CRC-32C over bytes [21:] does not match the crc field.
	ErrBadCRC = classed(ErrCorrupt, "batch: crc mismatch")
	// ErrBadMagic: magic is not 2.
	ErrBadMagic = classed(ErrInvalid, "batch: unsupported magic")
	// ErrBadCodec: the compression codec is above zstd (4).
	ErrBadCodec = classed(ErrInvalid, "batch: unknown compression codec")
	// ErrBadRecordCount: numRecords is not positive or lastOffsetDelta != numRecords-1
	// (ValidateStored: numRecords is negative or above lastOffsetDelta+1).
	ErrBadRecordCount = classed(ErrInvalid, "batch: record count does not match last offset delta")
	// ErrBadRecord: a record inside an uncompressed batch does not parse (Records).
	ErrBadRecord = classed(ErrCorrupt, "batch: malformed record")
)

// classedError is a specific error that belongs to a class.
type classedError struct {
	class error
	msg   string
}

func classed(class error, msg string) error { return &classedError{class: class, msg: msg} }

func (e *classedError) Error() string { return e.msg }
func (e *classedError) Unwrap() error { return e.class }

// Header is a decoded v2 batch header.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the batch's total size in bytes, length prefix included.
func (h Header) Size() int { return LengthPrefix + int(h.Length) }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset just past the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec.
func (h Header) Codec() Codec { return Codec(h.Attributes & codecMask) }

// LogAppendTime reports whether the timestamp type bit says LogAppendTime.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports the transactional bit.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports the control bit (transaction markers).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// Idempotent reports whether the batch carries a producer id.
func (h Header) Idempotent() bool { return h.ProducerID >= 0 }

// ParseHeader decodes the header at the start of b without validating it. It fails
// only with ErrTruncated when b is shorter than HeaderSize.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrTruncated
	}
	b = b[:HeaderSize]
	return Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}, nil
}

// FrameSize returns the total size of the batch starting at b as its length field
// says, checking only that the length is plausible. It needs LengthPrefix bytes;
// with fewer it returns ErrTruncated. It lets a reader learn how much to read before
// it has the whole batch.
func FrameSize(b []byte) (int, error) {
	if len(b) < LengthPrefix {
		return 0, ErrTruncated
	}
	n := int32(binary.BigEndian.Uint32(b[offLength:]))
	if n < HeaderSize-LengthPrefix || n > MaxBatchSize-LengthPrefix {
		return 0, ErrBadLength
	}
	return LengthPrefix + int(n), nil
}

// Validate checks that b is exactly one well-formed v2 batch and returns its header.
// Checks, in order: enough bytes for a header, batchLength == len(b)-12 and sane,
// magic 2, CRC-32C, codec <= zstd, numRecords > 0 and lastOffsetDelta ==
// numRecords-1. It does not judge the control or transactional bits or the producer
// fields: whether a client may send them is the caller's rule.
func Validate(b []byte) (Header, error) { return validate(b, false, true) }

// ValidateStored is Validate for a batch read back from a log, which compaction may
// have thinned: a rewritten batch keeps its original lastOffsetDelta (so its offset
// range, and its producer's last sequence, survive) while holding fewer records, and
// the last batch of an idempotent producer may be kept with none at all. It accepts
// 0 <= numRecords <= lastOffsetDelta+1; every other check is Validate's.
func ValidateStored(b []byte) (Header, error) { return validate(b, true, true) }

func validate(b []byte, stored, checkCRC bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Length < HeaderSize-LengthPrefix || int64(h.Length) > MaxBatchSize-LengthPrefix {
		return h, ErrBadLength
	}
	if int64(len(b)) != LengthPrefix+int64(h.Length) {
		if len(b) < h.Size() {
			return h, ErrTruncated
		}
		return h, ErrBadLength
	}
	if h.Magic != 2 {
		return h, ErrBadMagic
	}
	if checkCRC && crc(b[crcStart:]) != h.CRC {
		return h, ErrBadCRC
	}
	if h.Codec() > maxCodec {
		return h, ErrBadCodec
	}
	if stored {
		if h.LastOffsetDelta < 0 || h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
			return h, ErrBadRecordCount
		}
	} else if h.NumRecords <= 0 || h.LastOffsetDelta != h.NumRecords-1 {
		return h, ErrBadRecordCount
	}
	return h, nil
}

// SetBaseOffset stamps the base offset in place. b must hold at least a header. The
// CRC stays valid.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:offBaseOffset+8], uint64(offset))
}

// SetPartitionLeaderEpoch stamps the partition leader epoch in place. b must hold at
// least a header. The CRC stays valid.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:offLeaderEpoch+4], uint32(epoch))
}

// SetLogAppendTime marks the whole batch b as LogAppendTime with timestamp ts: it
// sets the timestamp-type bit, writes ts as the max timestamp and recomputes the CRC.
// Kafka leaves firstTimestamp and the record deltas alone; readers of a
// LogAppendTime batch use the max timestamp for every record. b must be one whole
// batch (as accepted by Validate).
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:offAttributes+2], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:offMaxTimestamp+8], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:offCRC+4], crc(b[crcStart:]))
}

// Checksum returns the CRC-32C the crc field of the whole batch b should hold.
func Checksum(b []byte) uint32 { return crc(b[crcStart:]) }
