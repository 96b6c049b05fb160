package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

// anyRecord is a record limit no test record reaches.
const anyRecord = math.MaxInt32

// declared is what the lying frames of these tests declare they decode to,
// and mostAllocated what reading one may allocate: franz-go's decoder, which
// the cleaner and the timestamp lookups used, allocated what was declared.
const (
	declared      = 512 << 20
	mostAllocated = 16 << 20
)

// zstdClaiming is a zstd frame that declares n decoded bytes (a single
// segment, its 8-byte frame content size) and holds one RLE block of 16;
// snappyClaiming is a raw snappy block that declares n.
func zstdClaiming(n uint64) []byte {
	f := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, n)
	const last, rle, size = 1, 1, 16
	h := uint32(last | rle<<1 | size<<3)
	return append(f, byte(h), byte(h>>8), byte(h>>16), 'x')
}

func snappyClaiming(n int) []byte { return append(binary.AppendUvarint(nil, uint64(n)), 0, 0, 0, 0) }

// lying is a stored one-record batch at timestamp ts whose records section
// is section, compressed with codec.
func lying(codec int8, section []byte, ts int64) []byte {
	return batchtest.WithRecords(batchtest.Build(batchtest.Options{FirstTimestamp: ts}), codec, section, 1)
}

// withLarge is a gzip batch at ts of a small record and, 5 ms later, one of
// 2000 bytes (above a limit of 1000).
func withLarge(ts int64) []byte {
	return batchtest.Build(batchtest.Options{FirstTimestamp: ts, Codec: 1, Records: []batchtest.Record{
		{Key: []byte("small"), Value: []byte("a")},
		{Key: []byte("large"), Value: bytes.Repeat([]byte("b"), 2000), TimestampDelta: 5},
	}})
}

// allocated returns the bytes allocated while fn runs.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// recordLimitCases are the timestamp lookups over recordLimitBatches: a
// record of a compressed batch above the limit is INVALID_RECORD once the
// lookup reaches it, as Kafka's streaming iterator throws there
// (LogSegment.findOffsetByTimestamp, RemoteLogManager.lookupTimestamp), and
// a frame declaring 512 MiB does not decompress, without allocating it.
var recordLimitCases = []struct {
	name      string
	ts        int64
	maxRecord int
	off       int64
	want      error
}{
	{"answer before the large record", 2000, 1000, 1, nil},
	{"large record reached", 2001, 1000, 0, batch.ErrRecordTooLarge},
	{"within the limit", 2001, anyRecord, 2, nil},
	{"zstd declares 512 MiB", 2006, anyRecord, 0, batch.ErrDecompress},
	{"snappy declares 512 MiB", 3001, anyRecord, 0, batch.ErrDecompress},
}

// recordLimitBatches are offset 0 at 1000; offsets 1-2, withLarge at 2000;
// 3, a zstd frame declaring 512 MiB at 3000; 4, a snappy block declaring
// as much at 4000.
func recordLimitBatches() [][]byte {
	return [][]byte{
		tsBatch(0, 1000, 0),
		withLarge(2000),
		lying(4, zstdClaiming(declared), 3000),
		lying(2, snappyClaiming(declared), 4000),
	}
}

// checkLookups runs recordLimitCases through lookup; a large record refused
// must be INVALID_RECORD, not wrapped as notAs.
func checkLookups(t *testing.T, lookup func(ts int64, maxRecord int) (int64, bool, error), notAs error) {
	for _, tc := range recordLimitCases {
		t.Run(tc.name, func(t *testing.T) {
			var off int64
			var ok bool
			var err error
			grown := allocated(func() { off, ok, err = lookup(tc.ts, tc.maxRecord) })
			switch {
			case tc.want == nil && (err != nil || !ok || off != tc.off):
				t.Errorf("offset %d, %v, %v; want %d", off, ok, err, tc.off)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("err = %v, want %v", err, tc.want)
			case tc.want == batch.ErrRecordTooLarge && (!errors.Is(err, batch.ErrInvalid) || errors.Is(err, notAs)):
				t.Errorf("err = %v: want INVALID_RECORD, not %v", err, notAs)
			}
			if grown > mostAllocated {
				t.Errorf("%d bytes allocated", grown)
			}
		})
	}
}

// TestTimestampLookupRecordLimit: recordLimitCases over the local log, and
// the max-timestamp lookup held to the limit too.
func TestTimestampLookupRecordLimit(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	for _, b := range recordLimitBatches() {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	checkLookups(t, func(ts int64, maxRecord int) (int64, bool, error) {
		off, _, ok, err := l.OffsetForTimestamp(ts, maxRecord)
		return off, ok, err
	}, ErrCorruptSegment)

	// The record with the largest timestamp is found the same way (Kafka's
	// RecordBatch.offsetOfMaxTimestamp).
	m := openLog(t, vfs.NewMem(), Config{})
	if _, err := m.Append(withLarge(2000), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.MaxTimestamp(1000); !errors.Is(err, batch.ErrRecordTooLarge) {
		t.Errorf("MaxTimestamp over a large record: err = %v, want %v", err, batch.ErrRecordTooLarge)
	}
	if off, ts, err := m.MaxTimestamp(anyRecord); err != nil || off != 1 || ts != 2005 {
		t.Errorf("MaxTimestamp = %d, %d, %v; want 1, 2005", off, ts, err)
	}
}

// TestTierTimestampLookupRecordLimit: recordLimitCases over remote segments.
func TestTierTimestampLookupRecordLimit(t *testing.T) {
	l, tier := tieredLog(t, memStore(t, vfs.NewMem()), 4096, nil)
	for _, b := range recordLimitBatches() {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, 40, 3, 100, 5000, 0)
	uploadAndRetain(t, l, tier)
	if l.LogStartOffset() <= 4 {
		t.Fatalf("local start %d: the batches under test are not remote", l.LogStartOffset())
	}
	checkLookups(t, func(ts int64, maxRecord int) (int64, bool, error) {
		off, _, ok, err := tier.OffsetForTimestamp(ctxTimeout(t), ts, maxRecord)
		return off, ok, err
	}, ErrRemoteCorrupt)
}

// TestCompactRecordLimit: a pass that reads a record of a compressed batch
// above MaxRecordBytes fails, in the offset map pass (a dirty record) or the
// filter pass (a record cleaned before the limit came down), as Kafka's
// cleaner fails on it (Cleaner.buildOffsetMapForSegment, cleanInto); the
// error names the limit and is no corrupt segment; the log is left as it
// was, and a pass without the limit cleans it. A frame declaring 512 MiB
// fails either pass without allocating it.
func TestCompactRecordLimit(t *testing.T) {
	limited := compactOpts()
	limited.MaxRecordBytes = 1000
	for _, tc := range []struct {
		name string
		// clean is appended and made clean, as an earlier pass would leave
		// it; dirty is appended after.
		dirty, clean [][]byte
		want         error
	}{
		{"large record in the map pass", [][]byte{withLarge(0)}, nil, batch.ErrRecordTooLarge},
		{"large record in the filter pass", nil, [][]byte{withLarge(0)}, batch.ErrRecordTooLarge},
		{"zstd declares 512 MiB in the map pass", [][]byte{lying(4, zstdClaiming(declared), 0)}, nil, batch.ErrDecompress},
		{"snappy declares 512 MiB in the filter pass", nil, [][]byte{lying(2, snappyClaiming(declared), 0)}, batch.ErrDecompress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := openLog(t, vfs.NewMem(), compactCfg(clk))
			appendKV(t, l, clk, 1, put("k", "1"))
			for _, b := range tc.clean {
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			seal(t, l, clk)
			if tc.clean != nil {
				// An earlier pass (before the limit came down, or a build
				// whose cleaner read past the bound) cleaned them.
				l.appendMu.Lock()
				l.cleaner.record(l.LogEndOffset(), clk.Now().UnixMilli(), limited.DeleteRetention, false)
				l.appendMu.Unlock()
			}
			for _, b := range tc.dirty {
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			appendKV(t, l, clk, 1, put("k", "2"))
			seal(t, l, clk)
			before, firstDirty := readAll(t, l), l.FirstDirtyOffset()

			var err error
			grown := allocated(func() { _, err = l.Compact(l.LogEndOffset(), limited) })
			if grown > mostAllocated {
				t.Errorf("%d bytes allocated", grown)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Compact: err = %v, want %v", err, tc.want)
			}
			if tc.want == batch.ErrRecordTooLarge && (errors.Is(err, ErrCorruptSegment) || !strings.Contains(err.Error(), "max.decompressed.message.bytes")) {
				t.Errorf("err = %v: want no corrupt segment, naming max.decompressed.message.bytes", err)
			}
			sameBatches(t, readAll(t, l), before)
			if l.FirstDirtyOffset() != firstDirty {
				t.Errorf("first dirty offset %d after a failed pass, was %d", l.FirstDirtyOffset(), firstDirty)
			}
			if tc.want == batch.ErrRecordTooLarge {
				unlimited := limited
				unlimited.MaxRecordBytes = 0
				if st := mustCompact(t, l, l.LogEndOffset(), unlimited); st.Superseded == 0 {
					t.Errorf("a pass without the limit superseded nothing: %+v", st)
				}
			}
		})
	}
}
