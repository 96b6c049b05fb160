package replica

import (
	"fmt"
	"math"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
)

// invalidTimestampSummary is Kafka's partition error message for a produce
// refused for its records' timestamps.
const invalidTimestampSummary = "One or more records have been rejected due to invalid timestamp"

// TimestampError is the refusal of a produced batch whose records' CreateTime
// lies outside the topic's window. It wraps ErrInvalidTimestamp.
type TimestampError struct {
	// Records are the refused records, in batch order: Kafka's record_errors.
	Records []RecordError
}

// RecordError is one refused record of a batch.
type RecordError struct {
	Index   int32 // the record's position in its batch (batch_index)
	Message string
}

// Summary is the partition's error message, as Kafka words it.
func (e *TimestampError) Summary() string { return invalidTimestampSummary }

func (e *TimestampError) Error() string { return "invalid timestamp: " + e.Records[0].Message }

func (e *TimestampError) Unwrap() error { return ErrInvalidTimestamp }

// timestampWindow is the range of CreateTime timestamps a leader accepts from
// a client at the broker time now (ms): a timestamp t other than -1 is refused
// when now-t > before or t-now > after, in wrapping int64 arithmetic as Kafka
// computes it. With LogAppendTime nothing is checked (off).
type timestampWindow struct {
	off                bool
	now, before, after int64
}

func timestampWindowOf(cfg *metadata.TopicConfig, now int64) timestampWindow {
	return timestampWindow{
		off:    cfg.MessageTimestampType != metadata.CreateTime,
		now:    now,
		before: cfg.MessageTimestampBeforeMaxMs,
		after:  cfg.MessageTimestampAfterMaxMs,
	}
}

// outside reports whether timestamp t is refused.
func (w timestampWindow) outside(t int64) bool {
	diff := w.now - t
	return t != -1 && (diff > w.before || -diff > w.after)
}

// check refuses the batch with header h and validated record section records
// (decompressed: batch.ValidateRecords) when one of its records is outside
// the window. Kafka checks every record. The header decides without reading
// records when the lower bound cannot refuse anything (before is unbounded,
// the default) and the max timestamp is inside the upper bound: no record is
// later than the batch's max timestamp. Otherwise every record's timestamp
// is read.
func (w timestampWindow) check(h batch.Header, records []byte) error {
	if w.off || w.before == math.MaxInt64 && !w.outside(h.MaxTimestamp) {
		return nil
	}
	var refused []RecordError
	i := int32(0)
	err := batch.WalkRecords(records, h.NumRecords, func(r batch.RawRecord) error {
		t := h.FirstTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			t = h.MaxTimestamp // every record of a LogAppendTime batch has it
		}
		if w.outside(t) {
			refused = append(refused, RecordError{Index: i, Message: fmt.Sprintf(
				"Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				t, h.BaseOffset+int64(r.OffsetDelta), w.now-w.before, w.now+w.after)})
		}
		i++
		return nil
	})
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return &TimestampError{Records: refused}
	}
	return nil
}

// refuseLogAppendTime refuses a batch whose sender set the LogAppendTime
// bit, whatever the topic's timestamp type: only the broker stamps it (as
// Kafka's LogValidator.validateTimestamp: "Producer should not set timestamp
// type to LogAppendTime", INVALID_TIMESTAMP). Kafka names every record of the
// batch in its record errors; this names the first (the client fails the
// whole batch either way).
func refuseLogAppendTime(h batch.Header) error {
	if !h.LogAppendTime() {
		return nil
	}
	return &TimestampError{Records: []RecordError{{Index: 0, Message: fmt.Sprintf(
		"Invalid timestamp type in message with offset %d. Producer should not set timestamp type to LogAppendTime.", h.BaseOffset)}}}
}
