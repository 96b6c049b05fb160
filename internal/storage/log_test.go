package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{}},
		{"small segments", Config{SegmentBytes: 4096, IndexIntervalBytes: 256}},
		{"index every batch", Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), tt.cfg)
			var want [][]byte
			next := int64(0)
			for i := range 60 {
				n := 1 + i%5
				b := mkBatch(n, 50+i, int64(1000+i))
				info, err := l.Append(b, 3)
				if err != nil {
					t.Fatal(err)
				}
				if info.FirstOffset != next || info.LastOffset != next+int64(n)-1 || info.Records != int64(n) {
					t.Fatalf("append %d: %+v, want first %d", i, info, next)
				}
				h, err := batch.Validate(b)
				if err != nil || h.BaseOffset != next || h.PartitionLeaderEpoch != 3 {
					t.Fatalf("append %d: stamped header %+v, %v", i, h, err)
				}
				next += int64(n)
				want = append(want, b)
			}
			if l.LogEndOffset() != next {
				t.Fatalf("log end %d, want %d", l.LogEndOffset(), next)
			}
			sameBatches(t, readAll(t, l), want)
			if tt.cfg.SegmentBytes == 4096 && l.NumSegments() < 3 {
				t.Fatalf("expected several segments, got %d", l.NumSegments())
			}
			var total int64
			for _, b := range want {
				total += int64(len(b))
			}
			if l.Size() != total {
				t.Fatalf("Size %d, want %d", l.Size(), total)
			}
		})
	}
}

func TestAppendRejectsBadInput(t *testing.T) {
	good := mkBatch(2, 10, 0)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	invalid := bytes.Clone(good)
	invalid[16] = 1 // magic
	binary.BigEndian.PutUint32(invalid[17:], batch.Checksum(invalid))
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrEmptyAppend},
		{"corrupt", corrupt, batch.ErrCorrupt},
		{"invalid", invalid, batch.ErrInvalid},
		{"trailing partial", append(bytes.Clone(good), good[:30]...), batch.ErrCorrupt},
		{"too large", bytes.Repeat(good, 4096/len(good)+1), ErrBatchTooLarge},
	}
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(tt.b, 0); !errors.Is(err, tt.want) {
				t.Fatalf("Append = %v, want %v", err, tt.want)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("log changed: end %d size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}

func TestAppendMultipleBatchesInOneCall(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	a, b := mkBatch(3, 10, 5), mkBatch(2, 10, 9)
	info, err := l.Append(append(bytes.Clone(a), b...), 1)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 4 || info.Batches != 2 || info.MaxTimestamp != 10 || info.OffsetOfMaxTimestamp != 3 {
		t.Fatalf("info %+v", info)
	}
	got := readAll(t, l)
	if len(got) != 2 {
		t.Fatalf("%d batches", len(got))
	}
	if h, _ := batch.ParseHeader(got[1]); h.BaseOffset != 3 {
		t.Fatalf("second batch base %d", h.BaseOffset)
	}
}

// TestAppendValidated: a batch the caller validated is stored exactly as Append
// stores it, and AppendValidated still refuses bytes that do not frame as whole
// batches, leaving the log unchanged.
func TestAppendValidated(t *testing.T) {
	a, b := mkBatch(3, 10, 5), mkBatch(2, 10, 9)
	plain, checked := openLog(t, vfs.NewMem(), Config{}), openLog(t, vfs.NewMem(), Config{})
	for _, x := range [][]byte{a, b} {
		want, err := plain.Append(bytes.Clone(x), 1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := checked.AppendValidated(bytes.Clone(x), 1, AppendHints{})
		if err != nil || got != want {
			t.Fatalf("AppendValidated = %+v, %v; Append gave %+v", got, err, want)
		}
	}
	sameBatches(t, readAll(t, checked), readAll(t, plain))
	if _, err := checked.AppendValidated(a[:len(a)-1], 1, AppendHints{}); !errors.Is(err, batch.ErrTruncated) {
		t.Fatalf("truncated batch: %v", err)
	}
	if checked.LogEndOffset() != 5 {
		t.Fatalf("log end %d after a refused append", checked.LogEndOffset())
	}
}

func TestAppendAsFollower(t *testing.T) {
	at := func(base int64, n int, epoch int32) []byte {
		return batchtest.Build(batchtest.Options{BaseOffset: base, LeaderEpoch: epoch, Records: batchtest.Values(n, 8)})
	}
	l := openLog(t, vfs.NewMem(), Config{})
	if _, err := l.AppendAsFollower(append(at(0, 2, 1), at(2, 3, 1)...)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"behind log end", at(4, 1, 1)},
		{"inside the last batch", at(3, 3, 1)},
		{"overlapping batches", append(at(5, 2, 2), at(6, 1, 2)...)},
		{"batches going back", append(at(7, 1, 2), at(5, 1, 2)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.AppendAsFollower(tt.b); !errors.Is(err, ErrUnexpectedOffset) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	info, err := l.AppendAsFollower(at(5, 2, 4))
	if err != nil || info.FirstOffset != 5 || info.LastOffset != 6 {
		t.Fatalf("%+v %v", info, err)
	}
	want := []EpochEntry{{1, 0}, {4, 5}}
	if got := l.Epochs(); !equalEpochs(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}

	// A compacted leader serves gaps and thinned batches: offsets 7-9 are gone and
	// the batch at 10-14 keeps records at 11 and 14 only.
	thinned := thinnedBatch(t, 10, 4, 4, []int32{1, 4})
	info, err = l.AppendAsFollower(thinned)
	if err != nil || info.FirstOffset != 10 || info.LastOffset != 14 || info.Records != 2 || l.LogEndOffset() != 15 {
		t.Fatalf("gap append: %+v %v, log end %d", info, err, l.LogEndOffset())
	}
	c, err := l.Read(7, 1<<20, 15)
	if err != nil || c.FirstOffset != 10 || c.NextOffset != 15 || c.Size != len(thinned) {
		t.Fatalf("read in the gap: %+v %v", c, err)
	}
	c.Release()
}

// thinnedBatch builds a batch at base whose offset range is base..base+lastDelta
// but which holds records only at the given offset deltas, as compaction leaves
// it, with leader epoch epoch.
func thinnedBatch(t testing.TB, base int64, epoch int32, lastDelta int32, deltas []int32) []byte {
	t.Helper()
	var recs []batch.Record
	for _, d := range deltas {
		recs = append(recs, batch.Record{OffsetDelta: d, Key: []byte{'k', byte(d)}, Value: []byte("v")})
	}
	b, err := batch.Build(batch.BuildOptions{BaseOffset: base, KeepOffsetDeltas: true, LastOffsetDelta: lastDelta}, recs)
	if err != nil {
		t.Fatal(err)
	}
	batch.SetPartitionLeaderEpoch(b, epoch)
	return b
}

func TestFencedLeaderEpoch(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	appendN(t, l, 1, 1, 10, 0, 5)
	if _, err := l.Append(mkBatch(1, 10, 0), 4); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("err = %v", err)
	}
	appendN(t, l, 1, 1, 10, 0, 6)
	if got := l.LatestEpoch(); got != 6 {
		t.Fatalf("latest epoch %d", got)
	}
}

func TestLogAppendTime(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), Config{LogAppendTime: true, Now: clk.Now})
	b := mkBatch(3, 10, 42)
	info, err := l.Append(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now().UnixMilli()
	if info.LogAppendTime != now || info.MaxTimestamp != now {
		t.Fatalf("info %+v, want time %d", info, now)
	}
	got := readAll(t, l)
	h, err := batch.Validate(got[0])
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp != now || h.FirstTimestamp != 42 {
		t.Fatalf("stored header %+v, %v", h, err)
	}
	// Followers store the leader's bytes untouched.
	f := openLog(t, vfs.NewMem(), Config{LogAppendTime: true, Now: clk.Now})
	clk.Advance(time.Hour)
	if _, err := f.AppendAsFollower(bytes.Clone(got[0])); err != nil {
		t.Fatal(err)
	}
	sameBatches(t, readAll(t, f), got)
}

func TestReadSemantics(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{IndexIntervalBytes: 100})
	// Ten batches of 3 records: offsets 0-2, 3-5, ..., 27-29.
	batches := appendN(t, l, 10, 3, 40, 0, 0)
	size := len(batches[0])
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		first     int // index of the first batch returned, -1 for none
		count     int
		next      int64
		err       error
	}{
		{"from start", 0, 1 << 20, 30, 0, 10, 30, nil},
		{"mid batch", 4, 1 << 20, 30, 1, 9, 30, nil},
		{"last offset", 29, 1 << 20, 30, 9, 1, 30, nil},
		{"at log end", 30, 1 << 20, 30, -1, 0, 30, nil},
		{"max offset at boundary", 0, 1 << 20, 9, 0, 3, 9, nil},
		{"max offset mid batch", 0, 1 << 20, 10, 0, 3, 9, nil},
		{"max offset inside first", 3, 1 << 20, 4, -1, 0, 3, nil},
		{"max offset at offset", 6, 1 << 20, 6, -1, 0, 6, nil},
		{"max bytes two batches", 0, 2*size + size/2, 30, 0, 2, 6, nil},
		{"max bytes exact", 3, 3 * size, 30, 1, 3, 12, nil},
		{"at least one batch", 7, 10, 30, 2, 1, 9, nil},
		{"zero bytes", 7, 0, 30, 2, 1, 9, nil},
		{"bytes and max offset", 0, 5 * size, 12, 0, 4, 12, nil},
		{"below start", -1, 100, 30, -1, 0, 0, ErrOffsetOutOfRange},
		{"above end", 31, 100, 30, -1, 0, 0, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := l.Read(tt.offset, tt.maxBytes, tt.maxOffset)
			defer c.Release()
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			var want []byte
			if tt.first >= 0 {
				want = bytes.Join(batches[tt.first:tt.first+tt.count], nil)
			}
			got, err := c.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || c.Size != len(want) {
				t.Fatalf("got %d bytes, want %d (batches %d..+%d)", len(got), len(want), tt.first, tt.count)
			}
			if c.NextOffset != tt.next {
				t.Fatalf("NextOffset %d, want %d", c.NextOffset, tt.next)
			}
		})
	}
}

func TestReadAcrossSegmentsStaysInOne(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096})
	batches := appendN(t, l, 40, 2, 200, 0, 0)
	if l.NumSegments() < 2 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	c, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	perSegment := 4096 / len(batches[0])
	if c.Size != perSegment*len(batches[0]) || c.NextOffset != int64(2*perSegment) {
		t.Fatalf("chunk of %d bytes to %d; a segment holds %d batches", c.Size, c.NextOffset, perSegment)
	}
	// ReadInto needs room for the whole chunk.
	if _, err := c.ReadInto(make([]byte, c.Size-1)); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("ReadInto short = %v", err)
	}
}

func TestClosedLog(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	appendN(t, l, 1, 1, 10, 0, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkBatch(1, 1, 0), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if _, err := l.Read(0, 100, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := l.WaitDurable(ctxTimeout(t), 0); err != nil {
		t.Fatalf("WaitDurable on data Close synced = %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"tiny segment", Config{SegmentBytes: 100}, false},
		{"huge segment", Config{SegmentBytes: 1 << 40}, false},
		{"negative age", Config{SegmentAge: -1}, false},
		{"negative jitter", Config{SegmentJitter: -1}, false},
		{"negative delete delay", Config{FileDeleteDelay: -1}, false},
		{"tiny index", Config{IndexMaxBytes: 8}, false},
		{"retention bytes", Config{RetentionBytes: -2}, false},
		{"flush mode", Config{Flush: FlushPolicy{Mode: 7}}, false},
		{"negative interval", Config{Flush: FlushPolicy{Mode: Interval, Interval: -time.Second}}, false},
		{"infinite retention", Config{RetentionAge: -1, RetentionBytes: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate = %v", err)
			}
			cfg := tt.cfg
			if cfg.IndexMaxBytes == 0 {
				cfg.IndexMaxBytes = testIndexBytes
			}
			l, err := Open(vfs.NewMem(), testDir, cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("Open = %v", err)
			}
			if l != nil {
				l.Close()
			}
		})
	}
}

// TestChangeWithoutWaitersAllocatesNothing: a change of the durable offset
// (every fsync) that nobody waits for makes no channel. Each change used to
// replace one (96 bytes of garbage per fsync, and one held by every idle log).
func TestChangeWithoutWaitersAllocatesNothing(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{})
	allocs := testing.AllocsPerRun(100, func() {
		l.mu.Lock()
		l.notifyLocked()
		l.mu.Unlock()
	})
	if allocs != 0 {
		t.Fatalf("a change with no waiter allocated %.1f times", allocs)
	}
	// A waiter still hears the next change.
	appendN(t, l, 1, 1, 10, 0, 0)
	if err := l.WaitDurable(ctxTimeout(t), 0); err != nil {
		t.Fatal(err)
	}
}
