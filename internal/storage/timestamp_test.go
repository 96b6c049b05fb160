package storage

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

// tsBatch builds a batch whose records have timestamps first+deltas[i].
func tsBatch(codec int8, first int64, deltas ...int64) []byte {
	o := batchtest.Options{FirstTimestamp: first, Codec: codec}
	for _, d := range deltas {
		o.Records = append(o.Records, batchtest.Record{TimestampDelta: d, Value: make([]byte, 150)})
	}
	return batchtest.Build(o)
}

func TestOffsetForTimestamp(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, IndexIntervalBytes: 100})
	for _, b := range [][]byte{
		tsBatch(0, 1000, 0, 1, 2),   // offsets 0-2:  1000 1001 1002
		tsBatch(1, 2000, 0, 5, 2),   // 3-5 (gzip):   2000 2005 2002
		tsBatch(0, 1500, 0, 100),    // 6-7:          1500 1600
		tsBatch(4, 3000, 0, 1, 2),   // 8-10 (zstd):  3000 3001 3002
		tsBatch(3, 9000, 0, 999, 1), // 11-13 (lz4):  9000 9999 9001
	} {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 { // filler over several segments: 14-53, 4000+i
		if _, err := l.Append(tsBatch(0, 4000+int64(i), 0), 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	tests := []struct {
		ts        int64
		offset    int64
		timestamp int64
		ok        bool
	}{
		{0, 0, 1000, true},
		{1001, 1, 1001, true},
		{1003, 3, 2000, true},
		{1550, 3, 2000, true},
		{2003, 4, 2005, true},
		{2006, 8, 3000, true},
		{3001, 9, 3001, true},
		{3003, 11, 9000, true},
		{9500, 12, 9999, true},
		{10000, 0, 0, false},
		{4020, 11, 9000, true},
	}
	for _, tt := range tests {
		off, ts, ok, err := l.OffsetForTimestamp(tt.ts, anyRecord)
		if err != nil || ok != tt.ok || (ok && (off != tt.offset || ts != tt.timestamp)) {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", tt.ts, off, ts, ok, err, tt.offset, tt.timestamp, tt.ok)
		}
	}
	off, ts, err := l.MaxTimestamp(anyRecord)
	if err != nil || off != 12 || ts != 9999 {
		t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, err)
	}

	// Records below the log start offset are not answers.
	if err := l.DeleteRecords(4); err != nil {
		t.Fatal(err)
	}
	if off, ts, ok, err := l.OffsetForTimestamp(0, anyRecord); err != nil || !ok || off != 4 || ts != 2005 {
		t.Fatalf("after DeleteRecords: %d, %d, %v, %v", off, ts, ok, err)
	}

	// The time index and max timestamps survive a clean reopen.
	fsys := l.fsys
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, fsys, Config{SegmentBytes: 4096, IndexIntervalBytes: 100})
	if off, ts, err := r.MaxTimestamp(anyRecord); err != nil || off != 12 || ts != 9999 {
		t.Fatalf("MaxTimestamp after reopen = %d, %d, %v", off, ts, err)
	}
	if off, ts, ok, err := r.OffsetForTimestamp(9001, anyRecord); err != nil || !ok || off != 12 || ts != 9999 {
		t.Fatalf("after reopen: %d, %d, %v, %v", off, ts, ok, err)
	}
}

func TestTimestampsOfLogAppendTimeLog(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), Config{LogAppendTime: true, Now: clk.Now})
	t0 := clk.Now().UnixMilli()
	appendN(t, l, 2, 3, 10, 5, 0) // offsets 0-5 at t0
	clk.Advance(time.Second)
	appendN(t, l, 2, 3, 10, 5, 0) // offsets 6-11 at t0+1s
	if off, ts, ok, err := l.OffsetForTimestamp(t0+1, anyRecord); err != nil || !ok || off != 6 || ts != t0+1000 {
		t.Fatalf("OffsetForTimestamp = %d, %d, %v, %v", off, ts, ok, err)
	}
	if off, ts, err := l.MaxTimestamp(anyRecord); err != nil || off != 6 || ts != t0+1000 {
		t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, err)
	}
}

func TestEmptyLogTimestamps(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	if _, _, ok, err := l.OffsetForTimestamp(0, anyRecord); ok || err != nil {
		t.Fatalf("empty log found a timestamp (%v)", err)
	}
	if off, ts, err := l.MaxTimestamp(anyRecord); off != -1 || ts != -1 || err != nil {
		t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, err)
	}
}

// TestOffsetForTimestampSkipsEmptyLogAppendTimeBatch: with
// message.timestamp.type=LogAppendTime, compaction keeps an idempotent
// producer's last batch with no records. ListOffsets for a timestamp must
// answer the first record whose timestamp is >= the target (Kafka walks the
// batch's records, finds none, and goes on to the next batch). The empty
// batch's base offset, which holds no record, used to be answered.
func TestOffsetForTimestampSkipsEmptyLogAppendTimeBatch(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.LogAppendTime = true
	l := openLog(t, vfs.NewMem(), cfg)
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: clk.Now().UnixMilli(), Idempotent: true, ProducerID: 7},
		[]batch.Record{{Key: []byte("k"), Value: []byte("1")}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now().UnixMilli()
	if _, err := l.Append(b, 0); err != nil { // 0: producer 7's last batch, appended at t0
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	second := appendKV(t, l, clk, 0, put("k", "2")) // 1: supersedes it, appended at t0+1s
	seal(t, l, clk)
	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if st.EmptyBatchesKept != 1 {
		t.Fatalf("stats %+v, want producer 7's batch kept empty", st)
	}
	off, ts, ok, err := l.OffsetForTimestamp(t0, anyRecord)
	if err != nil || !ok {
		t.Fatalf("OffsetForTimestamp: %v %v", ok, err)
	}
	if off != second[0].offset || ts != t0+1000 {
		t.Fatalf("OffsetForTimestamp(%d) = offset %d ts %d; the first record with a timestamp >= it is offset %d at %d (offset 0 holds no record)", t0, off, ts, second[0].offset, t0+1000)
	}
}
