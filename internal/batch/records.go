package batch

import (
	"encoding/binary"
	"fmt"
)

// FindTimestamp returns the offset and timestamp of the first record in a batch
// whose timestamp is >= ts and whose offset is >= minOffset. records is the batch's
// record section (the bytes after the header), already decompressed if the batch is
// compressed. In a LogAppendTime batch every record carries the max timestamp;
// its records are still walked, for the first offset a record holds (compaction
// may have removed the others, or all: an empty batch holds none). A record
// that does not parse gives ErrBadRecord. A record of a compressed batch
// whose body is above maxRecord bytes, reached before the answer, gives
// ErrRecordTooLarge: Kafka's timestamp lookups stream the records, holding
// each to the topic's max.decompressed.message.bytes.
//
// Each record starts with varint length, int8 attributes, varlong timestampDelta
// (relative to firstTimestamp) and varint offsetDelta; the rest is skipped.
func FindTimestamp(h *Header, records []byte, ts, minOffset int64, maxRecord int) (offset, timestamp int64, ok bool, err error) {
	if h.LogAppendTime() && (h.MaxTimestamp < ts || h.LastOffset() < minOffset) {
		return 0, 0, false, nil
	}
	held := h.Codec() != CodecNone
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(records)
		switch {
		case n <= 0 || length < 0:
			return 0, 0, false, ErrBadRecord
		case held && length > int64(maxRecord):
			return 0, 0, false, fmt.Errorf("%w: record %d of %d bytes, at most %d", ErrRecordTooLarge, i, length, maxRecord)
		case length > int64(len(records)-n):
			return 0, 0, false, ErrBadRecord
		}
		rec := records[n : n+int(length)]
		records = records[n+int(length):]
		if len(rec) < 1 {
			return 0, 0, false, ErrBadRecord
		}
		rec = rec[1:] // attributes
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return 0, 0, false, ErrBadRecord
		}
		offDelta, m := binary.Varint(rec[n:])
		if m <= 0 {
			return 0, 0, false, ErrBadRecord
		}
		o, t := h.BaseOffset+offDelta, h.FirstTimestamp+tsDelta
		if h.LogAppendTime() {
			t = h.MaxTimestamp
		}
		if t >= ts && o >= minOffset {
			return o, t, true, nil
		}
	}
	return 0, 0, false, nil
}
