package storage

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// lagBatchBytes is the size of copyLagLog's batches, one to a segment.
var lagBatchBytes = int64(len(mkBatch(1, 1400, 0)))

// copyLagLog opens a tiered log of one batch per segment whose newest
// records are dated ages before clk's now (negative: after it), the last in
// the active segment, and returns the segments' bases.
func copyLagLog(t *testing.T, clk *clock, lag CopyLag, localBytes int64, ages ...time.Duration) (*Log, *Tier, []int64) {
	t.Helper()
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: MinSegmentBytes, RetentionAge: -1})
	tier := NewTier(l, TierConfig{Store: memStore(t, vfs.NewMem()), Prefix: tierPrefix, Now: clk.Now, CopyLag: lag,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: localBytes}})
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatalf("Load: %v", err)
	}
	var bases []int64
	for _, age := range ages {
		bases = append(bases, l.LogEndOffset())
		appendN(t, l, 1, 1, 1400, clk.Now().Add(-age).UnixMilli(), 0)
	}
	if n, size := l.NumSegments(), l.Size(); n != len(ages) || size != int64(len(ages))*lagBatchBytes {
		t.Fatalf("%d segments of %d bytes, want one per batch (%d) of %d", n, size, len(ages), lagBatchBytes)
	}
	return l, tier, bases
}

// TestTierCopyLag: an upload takes the closed segments in order up to the
// first that remote.copy.lag.ms / .bytes hold back, as Kafka 4.4's
// RemoteLogManager (RLMCopyTask.candidateLogSegments): a segment goes once its
// newest record is at least the lag old or dated in the future, or once at
// least the lag's bytes of the log follow it; a 0 lag of either kind uploads
// at once, and a negative one never releases a segment. The old uploader took
// every closed segment.
func TestTierCopyLag(t *testing.T) {
	// Four closed segments, newest records 10, 5 and 1 minutes old and 1
	// minute in the future, then the active segment's, now.
	ages := []time.Duration{10 * time.Minute, 5 * time.Minute, time.Minute, -time.Minute, 0}
	for _, tc := range []struct {
		name  string
		age   time.Duration
		bytes int64 // in segments
		want  int   // segments uploaded
	}{
		{"defaults (0, -1): at once", 0, -1, 4},
		{"0 ms wins over bytes", 0, 100, 4},
		{"0 bytes wins over ms", 20 * time.Minute, 0, 4},
		{"neither applied: never", -1, -1, 0},
		{"by age", 3 * time.Minute, -1, 2},
		{"by age, the oldest held", 20 * time.Minute, -1, 0},
		{"by bytes", -1, 2, 3},
		{"by bytes, none followed by enough", -1, 5, 0},
		{"age or bytes", 20 * time.Minute, 3, 2},
		{"bytes then a future timestamp", 3 * time.Minute, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag := CopyLag{Age: tc.age, Bytes: tc.bytes}
			if lag.Bytes > 0 {
				lag.Bytes *= lagBatchBytes
			}
			l, tier, bases := copyLagLog(t, newClock(), lag, -1, ages...)
			n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if end := tier.UploadedEnd(); n != tc.want || end != bases[tc.want] {
				t.Fatalf("uploaded %d segments up to %d, want %d up to %d", n, end, tc.want, bases[tc.want])
			}
		})
	}
}

// TestTierCopyLagKeepsSegmentsLocal: a segment the copy lag holds back stays
// in the local log whatever the local retention, and goes to the object store,
// then from the local log, once its lag has passed.
func TestTierCopyLagKeepsSegmentsLocal(t *testing.T) {
	clk := newClock()
	l, tier, bases := copyLagLog(t, clk, CopyLag{Age: 3 * time.Minute, Bytes: -1}, 0,
		10*time.Minute, time.Minute, 0, 0)
	uploadAndRetain(t, l, tier)
	if end, start := tier.UploadedEnd(), l.LogStartOffset(); end != bases[1] || start != bases[1] {
		t.Fatalf("uploaded up to %d, local start %d; want both at %d", end, start, bases[1])
	}
	clk.Advance(2 * time.Minute)
	uploadAndRetain(t, l, tier)
	if end, start := tier.UploadedEnd(), l.LogStartOffset(); end != bases[2] || start != bases[2] {
		t.Fatalf("after the lag passed: uploaded up to %d, local start %d; want both at %d", end, start, bases[2])
	}
}
