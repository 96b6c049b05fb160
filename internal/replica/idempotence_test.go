package replica

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
)

// TestDuplicateAnswersOriginalTimestamp: a retried batch of an idempotent
// producer is answered as Kafka answers it (UnifiedLog.append with a
// duplicate): the original batch's offsets and, as its log append time, the
// original batch's max timestamp as stored, whatever the topic's timestamp
// type. A LogAppendTime topic's retry answered -1, so the client reported its
// own create time for records stored with the broker's.
func TestDuplicateAnswersOriginalTimestamp(t *testing.T) {
	for name, typ := range map[string]metadata.TimestampType{"CreateTime": metadata.CreateTime, "LogAppendTime": metadata.LogAppendTime} {
		t.Run(name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			cfg := metadata.DefaultTopicConfig()
			cfg.MessageTimestampType = typ
			p.setConfig(&cfg)
			if err := p.log.Reconfigure(storage.Config{LogAppendTime: typ == metadata.LogAppendTime}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			b := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, BaseSequence: 0, FirstTimestamp: now,
				Records: []batchtest.Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampDelta: 5}}})
			first := mustAppend(t, p, slices.Clone(b)) // a LogAppendTime log stamps what it appends
			stored := now + 5                          // CreateTime: the batch's max timestamp
			if typ == metadata.LogAppendTime {
				stored = first.LogAppendTime
			}
			retry := mustAppend(t, p, b)
			if retry.BaseOffset != first.BaseOffset || retry.LastOffset != first.LastOffset || retry.LogAppendTime != stored {
				t.Fatalf("retry answered %+v, want offsets %d-%d and log append time %d (first append %+v)",
					retry, first.BaseOffset, first.LastOffset, stored, first)
			}
			if p.LogEndOffset() != 2 {
				t.Fatalf("log end %d after the retry, want 2", p.LogEndOffset())
			}
		})
	}
}
