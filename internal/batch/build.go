package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record to build a batch from, or one decoded from a batch.
type Record struct {
	Key, Value []byte // nil is null
	Headers    []kmsg.Header
	// TimestampDelta is relative to the batch's FirstTimestamp; OffsetDelta to its
	// BaseOffset (Build numbers records 0, 1, ... itself).
	TimestampDelta int64
	OffsetDelta    int32
}

// BuildOptions describe a batch to build. The zero value is an uncompressed batch
// at offset 0 with CreateTime 0 and no producer id.
type BuildOptions struct {
	BaseOffset     int64
	FirstTimestamp int64
	Codec          Codec // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
	// ProducerID, ProducerEpoch and BaseSequence are -1 for a non-idempotent batch
	// when Idempotent is false.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// KeepOffsetDeltas keeps each Record's OffsetDelta (a rewritten batch with gaps);
	// otherwise records are numbered 0..n-1.
	KeepOffsetDeltas bool
	// LastOffsetDelta overrides the batch's last offset delta when >= 0 and
	// KeepOffsetDeltas is set (a compacted batch keeps its original offset range).
	LastOffsetDelta int32
	// Transactional and Control set the attribute bits of a transactional batch and
	// of a transaction marker (see BuildControl).
	Transactional, Control bool
}

// Build encodes records as one v2 batch, with kmsg doing the encoding and Build
// filling in record lengths, batch length, max timestamp and CRC.
func Build(o BuildOptions, records []Record) ([]byte, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: a batch needs at least one record", ErrInvalid)
	}
	var body []byte
	maxDelta := records[0].TimestampDelta
	last := int32(len(records) - 1)
	for i, r := range records {
		delta := int32(i)
		if o.KeepOffsetDeltas {
			delta = r.OffsetDelta
		}
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: delta, Key: r.Key, Value: r.Value, Headers: r.Headers}
		// Length counts what follows the length varint: encode once with a zero
		// length (one varint byte) to measure it.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		body = kr.AppendTo(body)
		maxDelta = max(maxDelta, r.TimestampDelta)
		last = delta
	}
	if o.KeepOffsetDeltas && o.LastOffsetDelta >= last {
		last = o.LastOffsetDelta
	}
	if o.Codec != 0 {
		var err error
		if body, err = compress(body, o.Codec); err != nil {
			return nil, err
		}
	}
	kb := kmsg.RecordBatch{
		FirstOffset:     o.BaseOffset,
		Length:          int32(HeaderSize - LengthPrefix + len(body)),
		Magic:           2,
		Attributes:      int16(o.Codec),
		LastOffsetDelta: last,
		FirstTimestamp:  o.FirstTimestamp,
		MaxTimestamp:    o.FirstTimestamp + maxDelta,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(records)),
		Records:         body,
	}
	if o.Idempotent {
		kb.ProducerID, kb.ProducerEpoch, kb.FirstSequence = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	if o.Transactional {
		kb.Attributes |= attrTransactional
	}
	if o.Control {
		kb.Attributes |= attrControl
	}
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[crcStart:], castagnoli))
	return b, nil
}

// compress compresses b with codec at Kafka's default level for it.
func compress(b []byte, codec Codec) ([]byte, error) {
	return Compress(new(bytes.Buffer), b, Compression{Codec: codec, Level: DefaultLevel(codec)})
}

// Records decodes the records of one validated batch b (decompressing it when
// needed, bounded: RecordsBuffer.Section) and calls fn for each, in order. Key,
// Value and header slices alias a buffer that is only valid during fn.
func Records(b []byte, fn func(h Header, r Record) error) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	buf := GetRecordsBuffer()
	defer buf.Release()
	body, err := buf.Section(h, b)
	if err != nil {
		return err
	}
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(body)
		if n <= 0 || length < 0 || length > int64(len(body)-n) {
			return ErrBadRecord
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(body[:n+int(length)]); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRecord, err)
		}
		body = body[n+int(length):]
		r := Record{Key: kr.Key, Value: kr.Value, Headers: kr.Headers, TimestampDelta: kr.TimestampDelta64, OffsetDelta: kr.OffsetDelta}
		if err := fn(h, r); err != nil {
			return err
		}
	}
	return nil
}
