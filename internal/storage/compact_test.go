package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

func TestDecide(t *testing.T) {
	const now = 10_000
	ret := 100 * time.Millisecond
	tests := []struct {
		name string
		r    recordFacts
		want recordFate
	}{
		{"latest of its key", recordFacts{offset: 5, latest: 5}, keepRecord},
		{"key not in the offset map", recordFacts{offset: 5, latest: -1}, keepRecord},
		{"superseded", recordFacts{offset: 5, latest: 9}, dropSuperseded},
		{"superseded clean record", recordFacts{offset: 5, latest: 9, clean: true, cleanedAtMs: 0}, dropSuperseded},
		{"keyless", recordFacts{offset: 5, keyless: true, latest: -1}, dropKeyless},
		{"keyless wins over everything", recordFacts{offset: 5, keyless: true, tombstone: true, clean: true}, dropKeyless},
		{"dirty tombstone", recordFacts{offset: 5, tombstone: true, latest: 5}, keepRecord},
		{"tombstone just cleaned", recordFacts{offset: 5, tombstone: true, latest: -1, clean: true, cleanedAtMs: now}, keepRecord},
		{"tombstone at its retention", recordFacts{offset: 5, tombstone: true, latest: -1, clean: true, cleanedAtMs: now - 100}, keepRecord},
		{"tombstone past its retention", recordFacts{offset: 5, tombstone: true, latest: -1, clean: true, cleanedAtMs: now - 101}, dropTombstone},
		{"expired tombstone superseded", recordFacts{offset: 5, tombstone: true, latest: 7, clean: true, cleanedAtMs: 0}, dropSuperseded},
		{"value past retention stays", recordFacts{offset: 5, latest: -1, clean: true, cleanedAtMs: 0}, keepRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.r, now, ret); got != tt.want {
				t.Fatalf("decide(%+v) = %v, want %v", tt.r, got, tt.want)
			}
		})
	}
}

func TestCleanerState(t *testing.T) {
	hour := time.Hour
	var c cleanerState
	if _, ok := c.rangeOf(0); ok {
		t.Fatal("a fresh log has a clean offset")
	}
	c.record(100, 1000, hour, true)
	c.record(250, 2000, hour, false)
	c.record(250, 3000, hour, false) // nothing new: no range
	c.record(400, 3000, hour, true)
	if c.firstDirty != 400 || len(c.ranges) != 3 {
		t.Fatalf("state %+v", c)
	}
	for _, tt := range []struct {
		offset int64
		at     int64
		ok     bool
	}{{0, 1000, true}, {99, 1000, true}, {100, 2000, true}, {399, 3000, true}, {400, 0, false}} {
		i, ok := c.rangeOf(tt.offset)
		if ok != tt.ok || (ok && c.ranges[i].atMs != tt.at) {
			t.Errorf("rangeOf(%d) = %d, %v", tt.offset, i, ok)
		}
	}
	if c.expiredTombstones(1000+hour.Milliseconds(), hour) || !c.expiredTombstones(1001+hour.Milliseconds(), hour) {
		t.Fatal("expiredTombstones")
	}

	// Round trip, and corrupt payloads.
	b := c.encode()
	d, rest, err := decodeCleanerState(b, cleanerStateV1)
	if err != nil || len(rest) != 0 || d.firstDirty != c.firstDirty || len(d.ranges) != 3 || d.ranges[2] != c.ranges[2] {
		t.Fatalf("decoded %+v %v", d, err)
	}
	for i, bad := range [][]byte{
		b[:5],
		b[:len(b)-1],
		append(bytes.Clone(b[:8]), b[8:]...)[:12],                       // count without ranges
		func() []byte { x := bytes.Clone(b); x[7] = 99; return x }(),    // firstDirty not the last end
		func() []byte { x := bytes.Clone(b); x[12+16] = 7; return x }(), // bad flag
	} {
		if _, _, err := decodeCleanerState(bad, cleanerStateV1); !errors.Is(err, ErrCorruptSideFile) {
			t.Errorf("corrupt payload %d decoded: %v", i, err)
		}
	}

	// Expired ranges merge into one, keeping their tombstones.
	e := c.clone()
	e.record(500, 3000+2*hour.Milliseconds(), hour, false)
	if len(e.ranges) != 2 || e.ranges[0].upTo != 400 || !e.ranges[0].tombstones || e.ranges[1].upTo != 500 {
		t.Fatalf("after merge %+v", e.ranges)
	}
	if len(c.ranges) != 3 {
		t.Fatal("clone shares ranges")
	}

	// Truncation forgets what it removed.
	for _, tt := range []struct {
		at       int64
		ends     []int64
		changed  bool
		firstDir int64
	}{
		{500, []int64{100, 250, 400}, false, 400},
		{400, []int64{100, 250, 400}, false, 400},
		{300, []int64{100, 250, 300}, true, 300},
		{250, []int64{100, 250}, true, 250},
		{50, []int64{50}, true, 50},
		{0, nil, true, 0},
	} {
		d := c.clone()
		if changed := d.clamp(tt.at); changed != tt.changed || d.firstDirty != tt.firstDir {
			t.Errorf("clamp(%d): changed %v, first dirty %d", tt.at, changed, d.firstDirty)
		}
		var ends []int64
		for _, r := range d.ranges {
			ends = append(ends, r.upTo)
		}
		if fmt.Sprint(ends) != fmt.Sprint(tt.ends) {
			t.Errorf("clamp(%d): ranges end at %v, want %v", tt.at, ends, tt.ends)
		}
	}

	// The history stays bounded.
	var f cleanerState
	for i := range 3 * maxCleanRanges {
		f.record(int64(i+1)*10, int64(i), 1<<40, i == 0)
	}
	if len(f.ranges) != maxCleanRanges || !f.ranges[0].tombstones || f.ranges[0].upTo <= 10 {
		t.Fatalf("history of %d ranges, first %+v", len(f.ranges), f.ranges[0])
	}
}

// TestCleanerStateMarkerClocks: marker clocks round-trip in a version 2
// payload, damaged ones fail, a truncation cuts them, an expired one that is
// due calls for a pass, and their number stays bounded, a merge keeping the
// later time. A state without them encodes as version 1, the previous build's
// payload, which decodes as before.
func TestCleanerStateMarkerClocks(t *testing.T) {
	hour := time.Hour
	var c cleanerState
	c.record(100, 1000, hour, false)
	if c.version() != cleanerStateV1 {
		t.Fatalf("a state without marker clocks has version %d", c.version())
	}
	v1 := c.encode()
	if d, rest, err := decodeCleanerState(v1, cleanerStateV1); err != nil || len(rest) != 0 || d.firstDirty != 100 {
		t.Fatalf("version 1: %+v %v", d, err)
	}
	c.markers = []markerClock{{from: 10, to: 20, atMs: 5000, due: true}, {from: 30, to: 30, atMs: 4000}}
	if at, ok := c.markerClock(15); !ok || at != 5000 {
		t.Fatalf("markerClock(15) = %d, %v", at, ok)
	}
	if _, ok := c.markerClock(25); ok {
		t.Fatal("a clock between the clocks")
	}
	if c.expiredTombstones(5000+hour.Milliseconds(), hour) || !c.expiredTombstones(5001+hour.Milliseconds(), hour) {
		t.Fatal("expiredTombstones with a due marker clock")
	}
	b := c.encode()
	d, rest, err := decodeCleanerState(b, c.version())
	if err != nil || len(rest) != 0 || !slices.Equal(d.markers, c.markers) || d.firstDirty != 100 {
		t.Fatalf("decoded %+v %v", d, err)
	}
	if _, _, err := decodeCleanerState(b, 3); !errors.Is(err, ErrCorruptSideFile) {
		t.Errorf("version 3 decoded: %v", err)
	}
	clocks := len(v1) + 4
	for i, bad := range [][]byte{
		b[:len(b)-1],
		v1,
		func() []byte { x := bytes.Clone(b); x[clocks+8+7] = 9; return x }(),      // to before from
		func() []byte { x := bytes.Clone(b); x[clocks+25+7] = 20; return x }(),    // overlaps the one before
		func() []byte { x := bytes.Clone(b); x[clocks+25+8+7] = 100; return x }(), // at the first dirty offset
		func() []byte { x := bytes.Clone(b); x[clocks+24] = 2; return x }(),       // bad flag
	} {
		if _, _, err := decodeCleanerState(bad, cleanerStateV2); !errors.Is(err, ErrCorruptSideFile) {
			t.Errorf("corrupt payload %d decoded: %v", i, err)
		}
	}

	e := c.clone()
	e.markers[0].atMs = 0
	if c.markers[0].atMs != 5000 {
		t.Fatal("clone shares marker clocks")
	}
	e = c.clone()
	e.clamp(15)
	if want := []markerClock{{from: 10, to: 14, atMs: 5000, due: true}}; !slices.Equal(e.markers, want) {
		t.Fatalf("clamp(15): %+v", e.markers)
	}

	var f cleanerState
	f.record(1<<20, 0, hour, false)
	for i := range maxMarkerClocks + 10 {
		f.markers = append(f.markers, markerClock{from: int64(2 * i), to: int64(2 * i), atMs: int64(i)})
	}
	f.capMarkers()
	if len(f.markers) != maxMarkerClocks || f.markers[0] != (markerClock{from: 0, to: 2, atMs: 1}) {
		t.Fatalf("%d marker clocks, first %+v", len(f.markers), f.markers[0])
	}
}

// TestCleanerCheckpointFromPreviousBuild: a cleaner checkpoint and a swap
// manifest in the previous build's format (frame version 1, no marker
// clocks) still open; a state without marker clocks is written that way.
func TestCleanerCheckpointFromPreviousBuild(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	fsys, _ := compactFixture(t, clk, cfg)
	l := openLog(t, fsys, cfg)
	mustCompact(t, l, l.LogEndOffset(), compactOpts())
	dirty := l.FirstDirtyOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, v, err := readSideFileVersion(fsys, testDir, cleanerCheckpointName); err != nil || v != cleanerStateV1 {
		t.Fatalf("checkpoint without marker clocks: version %d, %v", v, err)
	}
	l = openLog(t, fsys, cfg)
	if got := l.FirstDirtyOffset(); got != dirty || dirty == 0 {
		t.Fatalf("first dirty offset %d after reopening, want %d", got, dirty)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A swap manifest of the previous build (no group left to install).
	st := cleanerState{firstDirty: dirty, ranges: []cleanRange{{upTo: dirty, atMs: clk.Now().UnixMilli()}}}
	m := swapManifest{state: st}
	if err := writeSideFileVersion(fsys, testDir, swapManifestName, m.encode(), cleanerStateV1); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	if got := l.FirstDirtyOffset(); got != dirty {
		t.Fatalf("first dirty offset %d after a version 1 swap manifest, want %d", got, dirty)
	}
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	clk := newClock()
	fsys := vfs.NewMem()
	cfg := compactCfg(clk)
	l := openLog(t, fsys, cfg)
	all := writeKeyed(t, l, clk, 80, 0)
	all = append(all, appendKV(t, l, clk, 0, keyless("no key"))...)
	all = append(all, seal(t, l, clk)...)
	tail := appendKV(t, l, clk, 0, put("k1", "in the active segment"))
	all = append(all, tail...)
	segs, leo, start := l.NumSegments(), l.LogEndOffset(), l.LogStartOffset()
	activeBase := segmentBases(l)[segs-1]

	st := mustCompact(t, l, leo, compactOpts())
	if !st.Cleaned || st.FirstDirtyOffset != 0 || st.EndOffset != activeBase || st.Superseded == 0 || st.KeylessRemoved != 1 {
		t.Fatalf("stats %+v, active base %d", st, activeBase)
	}
	want := compactedOnce(all, st.EndOffset)
	sameRecords(t, logRecords(t, l), want)
	if l.LogEndOffset() != leo || l.LogStartOffset() != start || l.NumSegments() > segs {
		t.Fatalf("log [%d, %d) in %d segments; was [%d, %d) in %d", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments(), start, leo, segs)
	}
	if l.FirstDirtyOffset() != activeBase {
		t.Fatalf("first dirty offset %d, want %d", l.FirstDirtyOffset(), activeBase)
	}
	if s := l.Stats(); s.Compactions != 1 || s.CompactionBytesRead != st.BytesRead || s.CompactionBytesWritten != st.BytesWritten || st.BytesWritten >= st.BytesRead {
		t.Fatalf("log stats %+v, pass %+v", s, st)
	}
	// Every key's latest value is there, in offset order.
	latest := map[string]string{}
	for _, r := range all {
		if r.key != nil {
			latest[string(r.key)] = string(r.value)
		}
	}
	got := map[string]string{}
	for _, r := range logRecords(t, l) {
		if _, dup := got[string(r.key)]; dup && r.offset < activeBase {
			t.Fatalf("key %s twice below the active segment", r.key)
		}
		got[string(r.key)] = string(r.value)
	}
	for k, v := range latest {
		if got[k] != v {
			t.Fatalf("key %s reads %q, want %q", k, got[k], v)
		}
	}

	// Nothing dirty: the next pass does nothing.
	if st := mustCompact(t, l, leo, compactOpts()); st.Cleaned {
		t.Fatalf("second pass cleaned: %+v", st)
	}
	// The cleaned log survives a clean restart and a power cut. The power-cut image
	// holds only what was fsynced, and the flusher syncs the tail in the background.
	if err := l.WaitDurable(ctxTimeout(t), leo-1); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.CrashClone()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]vfs.FS{"clean": fsys, "power cut": crashed} {
		r := openLog(t, f, cfg)
		sameRecords(t, logRecords(t, r), want)
		if r.FirstDirtyOffset() != activeBase || r.LogEndOffset() != leo {
			t.Fatalf("%s reopen: first dirty %d, end %d", name, r.FirstDirtyOffset(), r.LogEndOffset())
		}
		if name == "clean" {
			if st := r.Stats(); st.RecoveredSegments != 0 {
				t.Fatalf("clean reopen after compaction scanned: %+v", st)
			}
		}
		r.Close()
	}
}

func TestCompactTombstones(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	opts := compactOpts()
	var all []kv
	all = append(all, appendKV(t, l, clk, 0, put("a", "1"), put("b", "1"), put("c", "1"))...)
	all = append(all, appendKV(t, l, clk, 0, tombstone("a"), put("b", "2"))...)
	all = append(all, seal(t, l, clk)...)

	// The first pass removes a's value and keeps its tombstone: it was dirty.
	st := mustCompact(t, l, l.LogEndOffset(), opts)
	end := st.EndOffset
	want := compactedOnce(all, end)
	sameRecords(t, logRecords(t, l), want)
	if st.TombstonesRemoved != 0 || !hasTombstone(logRecords(t, l), "a") {
		t.Fatalf("tombstone removed on its first pass: %+v", st)
	}

	// Half the retention later, new dirty data: the tombstone stays.
	clk.Advance(opts.DeleteRetention / 2)
	all = append(all, appendKV(t, l, clk, 0, put("d", "1"))...)
	all = append(all, seal(t, l, clk)...)
	st = mustCompact(t, l, l.LogEndOffset(), opts)
	if !st.Cleaned || !hasTombstone(logRecords(t, l), "a") {
		t.Fatalf("tombstone gone before its retention: %+v", st)
	}
	// Exactly at its retention (since the first pass): still there, and with
	// nothing dirty no pass runs.
	clk.Advance(opts.DeleteRetention/2 - 2*time.Minute) // seal advanced the clock too
	if st = mustCompact(t, l, l.LogEndOffset(), opts); st.Cleaned || !hasTombstone(logRecords(t, l), "a") {
		t.Fatalf("at retention: %+v", st)
	}
	// Past it: a pass runs for the tombstone alone and removes it.
	clk.Advance(time.Millisecond)
	st = mustCompact(t, l, l.LogEndOffset(), opts)
	if !st.Cleaned || st.TombstonesRemoved != 1 || hasTombstone(logRecords(t, l), "a") {
		t.Fatalf("after retention: %+v", st)
	}
	want = withoutTombstones(compactedOnce(all, l.FirstDirtyOffset()), l.FirstDirtyOffset())
	sameRecords(t, logRecords(t, l), want)
	// No tombstone is left: no further pass.
	clk.Advance(2 * opts.DeleteRetention)
	if st = mustCompact(t, l, l.LogEndOffset(), opts); st.Cleaned {
		t.Fatalf("pass without tombstones or dirty data: %+v", st)
	}
}

func hasTombstone(recs []kv, key string) bool {
	for _, r := range recs {
		if r.isTombstone() && string(r.key) == key {
			return true
		}
	}
	return false
}

func TestCompactCompressedBatches(t *testing.T) {
	for codec := int8(0); codec <= 4; codec++ {
		for _, appendTime := range []bool{false, true} {
			t.Run(fmt.Sprintf("codec=%d/logAppendTime=%v", codec, appendTime), func(t *testing.T) {
				testCompactCompressed(t, codec, appendTime)
			})
		}
	}
}

func testCompactCompressed(t *testing.T, codec int8, appendTime bool) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.LogAppendTime = appendTime
	l := openLog(t, vfs.NewMem(), cfg)
	var recs, newer []batchtest.Record
	for i := range 10 {
		recs = append(recs, batchtest.Record{TimestampDelta: int64(10 * i), Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{'a'}, 50)})
		if i%2 == 0 || i == 9 {
			newer = append(newer, batchtest.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("new")})
		}
	}
	first := batchtest.Build(batchtest.Options{FirstTimestamp: clk.Now().UnixMilli(), Codec: codec, Records: recs,
		Idempotent: true, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40})
	second := batchtest.Build(batchtest.Options{FirstTimestamp: clk.Now().UnixMilli() + 1000, Codec: codec, Records: newer})
	for _, b := range [][]byte{first, second} {
		if _, err := l.Append(b, 3); err != nil {
			t.Fatal(err)
		}
	}
	seal(t, l, clk)
	want1, _ := batch.ParseHeader(first) // as stamped by Append
	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if st.BatchesRewritten != 1 || st.BatchesCopied != 1 || st.Superseded != 6 {
		t.Fatalf("stats %+v", st)
	}

	got := readAll(t, l)
	h, err := batch.ValidateStored(got[0])
	if err != nil {
		t.Fatal(err)
	}
	// Rewritten: same offsets range, producer, epoch, codec, timestamps; fewer records.
	if h.BaseOffset != 0 || h.LastOffsetDelta != 9 || h.NumRecords != 4 || h.Codec() != batch.Codec(codec) ||
		h.PartitionLeaderEpoch != 3 || h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != 40 ||
		h.FirstTimestamp != want1.FirstTimestamp || h.LogAppendTime() != appendTime {
		t.Fatalf("rewritten header %+v", h)
	}
	wantMax := want1.FirstTimestamp + 70 // k7 is the newest survivor (k8, k9 superseded)
	if appendTime {
		wantMax = want1.MaxTimestamp
	}
	if h.MaxTimestamp != wantMax {
		t.Fatalf("max timestamp %d, want %d", h.MaxTimestamp, wantMax)
	}
	var offsets []int64
	err = batch.Records(got[0], func(h batch.Header, r batch.Record) error {
		offsets = append(offsets, h.BaseOffset+int64(r.OffsetDelta))
		if want := fmt.Sprintf("k%d", r.OffsetDelta); string(r.Key) != want || r.TimestampDelta != int64(10*r.OffsetDelta) {
			return fmt.Errorf("record %d: key %s, ts delta %d", r.OffsetDelta, r.Key, r.TimestampDelta)
		}
		return nil
	})
	if err != nil || fmt.Sprint(offsets) != "[1 3 5 7]" {
		t.Fatalf("survivors at %v: %v", offsets, err)
	}
	// Untouched: byte for byte.
	if !bytes.Equal(got[1], second) {
		t.Fatal("a batch without removed records was not copied byte for byte")
	}
	// A consumer reading at a removed offset gets the batch holding it.
	if off, ts, ok, err := l.OffsetForTimestamp(want1.FirstTimestamp+15, anyRecord); err != nil || !ok || (!appendTime && (off != 3 || ts != want1.FirstTimestamp+30)) {
		t.Fatalf("OffsetForTimestamp: %d %d %v %v", off, ts, ok, err)
	}
}

func TestCompactKeepsLastBatchOfEachProducer(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	produce := func(pid int64, seq int32, keys ...string) batch.Header {
		var recs []batchtest.Record
		for _, k := range keys {
			recs = append(recs, batchtest.Record{Key: []byte(k), Value: []byte("v")})
		}
		b := batchtest.Build(batchtest.Options{FirstTimestamp: clk.Now().UnixMilli(), Records: recs,
			Idempotent: pid >= 0, ProducerID: pid, ProducerEpoch: 1, BaseSequence: seq})
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		h, _ := batch.ParseHeader(b)
		return h
	}
	p5first := produce(5, 0, "x", "y")
	p5last := produce(5, 2, "x", "y")
	p6last := produce(6, 0, "z", "z2")
	produce(-1, 0, "z", "z2") // not idempotent: supersedes producer 6's batch
	seal(t, l, clk)

	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if st.EmptyBatchesKept != 1 || st.BatchesRemoved != 1 {
		t.Fatalf("stats %+v", st)
	}
	hs := headers(t, l)
	if hs[0].BaseOffset != p5last.BaseOffset || hs[0].NumRecords != 2 {
		t.Fatalf("producer 5's superseded first batch (%d) should go: %+v", p5first.BaseOffset, hs[0])
	}
	e := hs[1]
	if e.BaseOffset != p6last.BaseOffset || e.NumRecords != 0 || e.LastOffsetDelta != 1 || e.ProducerID != 6 ||
		e.ProducerEpoch != 1 || e.BaseSequence != 0 || e.Codec() != batch.CodecNone || e.Size() != batch.HeaderSize {
		t.Fatalf("producer 6's last batch, emptied: %+v", e)
	}
	// A consumer reading from the empty batch's offsets moves past it.
	c, err := l.Read(p6last.BaseOffset+1, 1, l.LogEndOffset())
	if err != nil || c.FirstOffset != p6last.BaseOffset || c.NextOffset != p6last.NextOffset() {
		t.Fatalf("read at the empty batch: %+v %v", c, err)
	}
	c.Release()

	// Once producer 6 writes again, the empty batch is no longer needed.
	produce(6, 2, "w")
	seal(t, l, clk)
	if st = mustCompact(t, l, l.LogEndOffset(), compactOpts()); st.BatchesRemoved != 1 {
		t.Fatalf("second pass %+v", st)
	}
	for _, h := range headers(t, l) {
		if h.NumRecords == 0 {
			t.Fatalf("empty batch left: %+v", h)
		}
	}
}

func headers(t *testing.T, l *Log) []batch.Header {
	t.Helper()
	var hs []batch.Header
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		hs = append(hs, h)
	}
	return hs
}

func TestCompactLimits(t *testing.T) {
	clk := newClock()
	setup := func(t *testing.T) (*Log, []kv) {
		l := openLog(t, vfs.NewMem(), compactCfg(clk))
		var all []kv
		for range 3 {
			all = append(all, writeKeyed(t, l, clk, 20, 0)...)
			all = append(all, seal(t, l, clk)...)
		}
		return l, all
	}
	t.Run("high-water mark", func(t *testing.T) {
		l, all := setup(t)
		bases := segmentBases(l)
		hwm := bases[2] + 1 // inside the third segment
		st := mustCompact(t, l, hwm, compactOpts())
		if st.EndOffset != bases[2] {
			t.Fatalf("cleaned up to %d with the high-water mark at %d", st.EndOffset, hwm)
		}
		sameRecords(t, logRecords(t, l), compactedOnce(all, bases[2]))
		if st := mustCompact(t, l, bases[1], compactOpts()); st.Cleaned {
			t.Fatalf("pass below the clean section: %+v", st)
		}
	})
	t.Run("compaction lag", func(t *testing.T) {
		l, all := setup(t)
		// Each segment of writeKeyed spans 20 s and a seal 2 min; lag past the first one only.
		bases := segmentBases(l)
		opts := compactOpts()
		opts.MinCompactionLag = clk.Now().Sub(time.UnixMilli(newestTS(t, l, 1))) + time.Millisecond
		st := mustCompact(t, l, l.LogEndOffset(), opts)
		if st.EndOffset != bases[1] {
			t.Fatalf("cleaned up to %d, want %d", st.EndOffset, bases[1])
		}
		sameRecords(t, logRecords(t, l), compactedOnce(all, bases[1]))
	})
	t.Run("dirty ratio", func(t *testing.T) {
		l, all := setup(t)
		mustCompact(t, l, l.LogEndOffset(), compactOpts())
		all = append(all, appendKV(t, l, clk, 0, put("k1", "late"))...)
		all = append(all, seal(t, l, clk)...)
		opts := compactOpts()
		opts.MinCleanableDirtyRatio = 0.5
		st := mustCompact(t, l, l.LogEndOffset(), opts)
		if st.Cleaned || st.DirtyRatio <= 0 || st.DirtyRatio >= 0.5 {
			t.Fatalf("below the ratio: %+v", st)
		}
		opts.MinCleanableDirtyRatio = st.DirtyRatio
		if st = mustCompact(t, l, l.LogEndOffset(), opts); !st.Cleaned {
			t.Fatalf("at the ratio: %+v", st)
		}
		sameRecords(t, logRecords(t, l), compactedOnce(all, st.EndOffset))
	})
	t.Run("offset map budget", func(t *testing.T) {
		l, all := setup(t)
		bases := segmentBases(l)
		opts := compactOpts()
		opts.OffsetMapBytes = 1 // the first dirty segment only
		st := mustCompact(t, l, l.LogEndOffset(), opts)
		if st.EndOffset != bases[1] {
			t.Fatalf("cleaned up to %d, want %d", st.EndOffset, bases[1])
		}
		sameRecords(t, logRecords(t, l), compactedOnce(all, bases[1]))
		for l.FirstDirtyOffset() < bases[len(bases)-1] {
			mustCompact(t, l, l.LogEndOffset(), opts)
		}
		// Keys superseded across passes went too: only the latest of each is left
		// below the active segment.
		sameRecords(t, logRecords(t, l), compactedOnce(all, bases[len(bases)-1]))
	})
	t.Run("bad options", func(t *testing.T) {
		l, _ := setup(t)
		for _, o := range []CompactOptions{
			{DeleteRetention: -1}, {MinCleanableDirtyRatio: 1.5}, {MinCleanableDirtyRatio: -0.1},
			{MinCompactionLag: -1}, {OffsetMapBytes: -1},
		} {
			if _, err := l.Compact(l.LogEndOffset(), o); !errors.Is(err, ErrConfig) {
				t.Errorf("%+v: %v", o, err)
			}
		}
		if err := DefaultCompactOptions().Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCompactMaxCompactionLag checks max.compaction.lag.ms (Kafka's
// LogCleanerManager.maxCompactionDelay): once the first batch of a dirty
// sealed segment is older than MaxCompactionLag, a pass runs whatever the
// dirty ratio, as long as something is cleanable; a segment whose first batch
// has no timestamp never makes one due.
func TestCompactMaxCompactionLag(t *testing.T) {
	clk := newClock()
	// setup returns a log whose only dirty segment (below the active one) holds
	// a small update of a clean log, far below a dirty ratio of 0.9, and the
	// time of that segment's first batch.
	setup := func(t *testing.T, noTimestamp bool) (*Log, []kv, int64) {
		l := openLog(t, vfs.NewMem(), compactCfg(clk))
		var all []kv
		for range 3 {
			all = append(all, writeKeyed(t, l, clk, 20, 0)...)
			all = append(all, seal(t, l, clk)...)
		}
		roll(t, l, clk)
		mustCompact(t, l, l.LogEndOffset(), compactOpts())
		if noTimestamp {
			if _, err := l.Append(mkBatch(1, 10, -1), 0); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, appendKV(t, l, clk, 0, put("k1", "late"))...)
		if noTimestamp {
			all = nil // not compared
		}
		first := firstBatchTS(t, l, len(segmentBases(l))-1)
		all = append(all, seal(t, l, clk)...)
		return l, all, first
	}
	opts := func(lag time.Duration) CompactOptions {
		o := compactOpts()
		o.MinCleanableDirtyRatio = 0.9
		o.MaxCompactionLag = lag
		return o
	}

	t.Run("due", func(t *testing.T) {
		l, all, first := setup(t, false)
		age := clk.Now().Sub(time.UnixMilli(first))
		for _, lag := range []time.Duration{0, time.Duration(math.MaxInt64), age} {
			if st := mustCompact(t, l, l.LogEndOffset(), opts(lag)); st.Cleaned {
				t.Fatalf("MaxCompactionLag %v with the first dirty batch %v old: cleaned %+v", lag, age, st)
			}
		}
		st := mustCompact(t, l, l.LogEndOffset(), opts(age-time.Millisecond))
		if !st.Cleaned || st.DirtyRatio >= 0.9 {
			t.Fatalf("MaxCompactionLag %v with the first dirty batch %v old: %+v", age-time.Millisecond, age, st)
		}
		sameRecords(t, logRecords(t, l), compactedOnce(all, st.EndOffset))
	})
	t.Run("nothing cleanable", func(t *testing.T) {
		l, _, first := setup(t, false)
		age := clk.Now().Sub(time.UnixMilli(first))
		// The overdue segment lies above the high-water mark given.
		if st := mustCompact(t, l, l.FirstDirtyOffset(), opts(age-time.Millisecond)); st.Cleaned {
			t.Fatalf("cleaned above the high-water mark: %+v", st)
		}
	})
	t.Run("no timestamp", func(t *testing.T) {
		l, _, _ := setup(t, true)
		clk.Advance(time.Hour)
		if st := mustCompact(t, l, l.LogEndOffset(), opts(time.Minute)); st.Cleaned {
			t.Fatalf("a first batch without timestamp made a pass due: %+v", st)
		}
	})
	t.Run("bad option", func(t *testing.T) {
		l, _, _ := setup(t, false)
		if _, err := l.Compact(l.LogEndOffset(), CompactOptions{MaxCompactionLag: -1}); !errors.Is(err, ErrConfig) {
			t.Fatalf("negative MaxCompactionLag: %v", err)
		}
	})
}

// firstBatchTS returns the max timestamp of segment i's first batch.
func firstBatchTS(t *testing.T, l *Log, i int) int64 {
	t.Helper()
	l.mu.RLock()
	s := l.mu.segments[i]
	l.mu.RUnlock()
	h, _, ok := s.headerAt(0)
	if !ok {
		t.Fatalf("segment %d has no first batch", i)
	}
	return h.MaxTimestamp
}

// roll rolls the log's active segment.
func roll(t *testing.T, l *Log, clk *clock) {
	t.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if _, err := l.rollLocked(clk.Now()); err != nil {
		t.Fatal(err)
	}
}

// newestTS returns the newest timestamp of segment i.
func newestTS(t *testing.T, l *Log, i int) int64 {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	ts, err := l.mu.segments[i].newestTimestamp(&l.stats)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestSparseOffsets checks every read-side and mutating API on a log whose
// offsets compaction made sparse.
func TestSparseOffsets(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	var all []kv
	for i := range 40 {
		// Batches of one key each, most of them superseded: whole batches go.
		all = append(all, appendKV(t, l, clk, 0, put(fmt.Sprintf("k%d", i%4), fmt.Sprint(i)), put(fmt.Sprintf("k%d", i%4), fmt.Sprint(i)))...)
		clk.Advance(time.Second)
		if i%10 == 9 {
			all = append(all, seal(t, l, clk)...)
		}
	}
	all = append(all, appendKV(t, l, clk, 0, put("tail", "t"))...)
	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	want := compactedOnce(all, st.EndOffset)
	sameRecords(t, logRecords(t, l), want)
	leo := l.LogEndOffset()
	// The subtests below open crash clones of fsys, which hold only what was
	// fsynced. The flusher syncs the active segment's tail in the background, so
	// wait for it: otherwise a clone may lack the last records, and with them the
	// active segment's bytes that retention's size rule counts.
	if err := l.WaitDurable(ctxTimeout(t), leo-1); err != nil {
		t.Fatal(err)
	}

	// firstAtOrAfter is the offset of the first kept record at or after o.
	firstAtOrAfter := func(o int64) int64 {
		for _, r := range want {
			if r.offset >= o {
				return r.offset
			}
		}
		return leo
	}
	t.Run("read", func(t *testing.T) {
		for o := l.LogStartOffset(); o < leo; o++ {
			c, err := l.Read(o, 1, leo)
			if err != nil {
				t.Fatalf("Read(%d): %v", o, err)
			}
			b, _ := c.Bytes()
			c.Release()
			h, err := batch.ValidateStored(b)
			if err != nil {
				t.Fatalf("Read(%d): %v", o, err)
			}
			if next := firstAtOrAfter(o); h.BaseOffset > next || h.LastOffset() < next || c.FirstOffset != h.BaseOffset {
				t.Fatalf("Read(%d) gave batch [%d, %d], want the one holding %d", o, h.BaseOffset, h.LastOffset(), next)
			}
			// A high-water mark inside a gap ends the chunk there.
			c, err = l.Read(l.LogStartOffset(), 1<<20, o+1)
			if err != nil {
				t.Fatalf("Read up to %d: %v", o+1, err)
			}
			if c.Size > 0 && (c.NextOffset > o+1 || c.NextOffset <= c.FirstOffset) {
				t.Fatalf("Read up to %d: chunk [%d, %d)", o+1, c.FirstOffset, c.NextOffset)
			}
			c.Release()
		}
	})
	t.Run("follower copy", func(t *testing.T) {
		f := openLogAt(t, vfs.NewMem(), "/data/follower", cfg)
		for off := l.LogStartOffset(); off < leo; {
			c, err := l.Read(off, 700, leo)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := c.Bytes()
			c.Release()
			if _, err := f.AppendAsFollower(b); err != nil {
				t.Fatalf("AppendAsFollower at %d: %v", off, err)
			}
			off = c.NextOffset
		}
		sameRecords(t, logRecords(t, f), want)
		if f.LogEndOffset() != leo {
			t.Fatalf("follower ends at %d, leader at %d", f.LogEndOffset(), leo)
		}
	})
	t.Run("scan batches", func(t *testing.T) {
		var n int
		err := l.ScanBatches(0, func(h batch.Header, _ []byte) error { n += int(h.NumRecords); return nil })
		if err != nil || n != len(want) {
			t.Fatalf("scanned %d records, want %d: %v", n, len(want), err)
		}
	})
	t.Run("truncate in a gap", func(t *testing.T) {
		c := fsys.CrashClone()
		tl := openLog(t, c, cfg)
		var gap int64 = -1
		for i := 1; i < len(want); i++ {
			if want[i].offset > want[i-1].offset+2 && want[i].offset < st.EndOffset {
				gap = want[i-1].offset + 2
				break
			}
		}
		if gap < 0 {
			t.Fatal("no gap")
		}
		if err := tl.Truncate(gap); err != nil {
			t.Fatal(err)
		}
		if tl.LogEndOffset() > gap || tl.FirstDirtyOffset() > tl.LogEndOffset() {
			t.Fatalf("truncated at %d: end %d, first dirty %d", gap, tl.LogEndOffset(), tl.FirstDirtyOffset())
		}
		var kept []kv
		for _, r := range want {
			if r.offset < gap {
				kept = append(kept, r)
			}
		}
		sameRecords(t, logRecords(t, tl), kept)
		end := tl.LogEndOffset()
		more := appendKV(t, tl, clk, 0, put("after", "truncation"))
		if more[0].offset != end {
			t.Fatalf("append after truncation at %d", more[0].offset)
		}
		sameRecords(t, logRecords(t, tl), append(kept, more...))
	})
	t.Run("retention", func(t *testing.T) {
		rcfg := cfg
		rcfg.RetentionBytes = 1 // every sealed segment goes
		rl := openLog(t, fsys.CrashClone(), rcfg)
		n, err := rl.EnforceRetention(leo)
		if err != nil || n == 0 {
			t.Fatalf("EnforceRetention: %d, %v", n, err)
		}
		var rest []kv
		for _, r := range want {
			if r.offset >= rl.LogStartOffset() {
				rest = append(rest, r)
			}
		}
		sameRecords(t, logRecords(t, rl), rest)
		if rl.LogEndOffset() != leo || len(rest) == 0 {
			t.Fatalf("after retention: [%d, %d), %d records", rl.LogStartOffset(), rl.LogEndOffset(), len(rest))
		}
	})
	t.Run("delete records in a gap", func(t *testing.T) {
		dl := openLog(t, fsys.CrashClone(), cfg)
		mid := want[len(want)/2].offset - 1
		if err := dl.DeleteRecords(mid); err != nil {
			t.Fatal(err)
		}
		got := logRecords(t, dl)
		if len(got) == 0 || got[0].offset < mid {
			t.Fatalf("after DeleteRecords(%d) the log starts at %v", mid, got[:1])
		}
	})
}

// openLogAt is openLog in another directory.
func openLogAt(t testing.TB, fsys vfs.FS, dir string, cfg Config) *Log {
	t.Helper()
	cfg.IndexMaxBytes = testIndexBytes
	l, err := Open(fsys, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestRunCompaction(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	all := writeKeyed(t, l, clk, 40, 0)
	all = append(all, seal(t, l, clk)...)
	end := l.LogEndOffset() - 1 // the seal record's segment is active
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var calls atomic.Int64
	opts := func() CompactOptions { calls.Add(1); return compactOpts() }
	go func() { done <- l.RunCompaction(ctx, time.Millisecond, l.LogEndOffset, opts) }()
	wait.For(t, "the compaction loop to clean", func() bool { return l.FirstDirtyOffset() == end })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunCompaction returned %v", err)
	}
	sameRecords(t, logRecords(t, l), compactedOnce(all, end))
	if calls.Load() == 0 {
		t.Fatal("options never read")
	}
	// A failing pass ends the loop with its error.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.RunCompaction(context.Background(), time.Millisecond, l.LogEndOffset, opts); !errors.Is(err, ErrClosed) {
		t.Fatalf("RunCompaction on a closed log: %v", err)
	}
}

func TestChunkOutlivesCompaction(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	l := openLog(t, mem, compactCfg(clk))
	writeKeyed(t, l, clk, 40, 0)
	seal(t, l, clk)
	c, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.SegmentsWritten == 0 {
		t.Fatalf("pass %+v", st)
	}
	deleted := filepath.Join(testDir, segmentName(0, logSuffix+deletedSuffix))
	if _, err := mem.Stat(deleted); err != nil {
		t.Fatalf("a replaced segment went while a chunk holds it: %v", err)
	}
	after, err := c.Bytes()
	if err != nil || !bytes.Equal(after, before) {
		t.Fatalf("chunk of a replaced segment reads differently: %v", err)
	}
	c.Release()
	wait.For(t, "the replaced segment to go", func() bool {
		_, err := mem.Stat(deleted)
		return isNotExist(err)
	})
}
