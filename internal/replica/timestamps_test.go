package replica

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
)

// TestTimestampWindow: a CreateTime topic refuses a batch with a record more
// than message.timestamp.before.max.ms behind or after.max.ms ahead of the
// broker's clock, exactly at a bound is accepted, and LogAppendTime checks
// nothing. The deltas put the refused record in second place (behind a first
// record inside the window) and compress some batches, so the per-record pass
// is what decides.
func TestTimestampWindow(t *testing.T) {
	const now = int64(1_800_000_000_000)
	const hour = int64(3_600_000)
	defaults := metadata.DefaultTopicConfig()
	withBefore := defaults
	withBefore.MessageTimestampBeforeMaxMs = hour
	logAppend := withBefore
	logAppend.MessageTimestampType = metadata.LogAppendTime
	logAppend.MessageTimestampAfterMaxMs = 0

	two := func(codec int8, first, second int64) []byte {
		return batchtest.Build(batchtest.Options{FirstTimestamp: first, Codec: codec, Records: []batchtest.Record{
			{Value: []byte("a")}, {Value: []byte("b"), TimestampDelta: second - first},
		}})
	}
	for _, tc := range []struct {
		name  string
		cfg   metadata.TopicConfig
		batch []byte
		want  string // the refused record's message; "" accepts
	}{
		{"default: an hour ahead", defaults, two(0, now, now+hour), ""},
		{"default: an hour and 1 ms ahead", defaults, two(0, now, now+hour+1),
			"Timestamp 1800003600001 of message with offset 1 is out of range. The timestamp should be within [-9223370236854775807, 1800003600000]"},
		{"default: years behind", defaults, two(0, now, 0), ""},
		{"default: no timestamp", defaults, two(0, -1, -1), ""},
		{"before set: an hour behind", withBefore, two(0, now, now-hour), ""},
		{"before set: an hour and 1 ms behind", withBefore, two(0, now, now-hour-1),
			"Timestamp 1799996399999 of message with offset 1 is out of range. The timestamp should be within [1799996400000, 1800003600000]"},
		{"before set, lz4: an hour and 1 ms behind", withBefore, two(3, now, now-hour-1),
			"Timestamp 1799996399999 of message with offset 1 is out of range. The timestamp should be within [1799996400000, 1800003600000]"},
		{"before set, zstd: an hour and 1 ms ahead", withBefore, two(4, now, now+hour+1),
			"Timestamp 1800003600001 of message with offset 1 is out of range. The timestamp should be within [1799996400000, 1800003600000]"},
		{"before set: inside both bounds", withBefore, two(0, now-hour, now+hour), ""},
		{"after 0: 1 ms ahead", metadata.TopicConfig{MessageTimestampBeforeMaxMs: math.MaxInt64}, two(0, now, now+1),
			"Timestamp 1800000000001 of message with offset 1 is out of range. The timestamp should be within [-9223370236854775807, 1800000000000]"},
		{"LogAppendTime: a day either way", logAppend, two(0, now-24*hour, now+24*hour), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := batch.Validate(tc.batch)
			if err != nil {
				t.Fatal(err)
			}
			buf := batch.GetRecordsBuffer()
			defer buf.Release()
			records, err := batch.ValidateRecords(h, tc.batch, buf, math.MaxInt32)
			if err != nil {
				t.Fatal(err)
			}
			err = timestampWindowOf(&tc.cfg, now).check(h, records)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *TimestampError
			if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTimestamp) {
				t.Fatalf("got %v, want a TimestampError", err)
			}
			if len(te.Records) != 1 || te.Records[0].Index != 1 || te.Records[0].Message != tc.want {
				t.Fatalf("refused records %+v, want record 1: %q", te.Records, tc.want)
			}
		})
	}
}

// TestAppendRefusesTimestamp: a client's batch an hour and a minute ahead is
// refused whole (nothing appended) under the default after.max.ms, while a
// coordinator's own batch with the same timestamps is appended.
func TestAppendRefusesTimestamp(t *testing.T) {
	p := newTestPartition(t, 1)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, time.Now()); err != nil {
		t.Fatal(err)
	}
	p.setConfig(new(metadata.DefaultTopicConfig()))
	ahead := batchtest.Build(batchtest.Options{
		FirstTimestamp: time.Now().Add(61 * time.Minute).UnixMilli(),
		Records:        batchtest.Values(3, 1),
	})
	if _, err := p.Append(ahead, 1); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("client batch an hour ahead: %v, want ErrInvalidTimestamp", err)
	}
	if end := p.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after the refusal, want 0", end)
	}
	if _, err := p.AppendWith(ahead, 1, AppendOpts{Coordinator: true}); err != nil {
		t.Fatalf("coordinator batch an hour ahead: %v", err)
	}
}
