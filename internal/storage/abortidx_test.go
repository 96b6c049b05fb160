package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestAbortIndexCodec: an index file survives encoding, and every damaged one
// (cut short, flipped, another version or segment size, entries out of order
// or range) is refused.
func TestAbortIndexCodec(t *testing.T) {
	const base, size = 100, 4000
	entries := []AbortEntry{
		{AbortedTxn: AbortedTxn{ProducerID: 7, FirstOffset: 40, LastOffset: 105}, LastStableOffset: 90},
		{AbortedTxn: AbortedTxn{ProducerID: 8, FirstOffset: 106, LastOffset: 110}, LastStableOffset: 111},
	}
	b := encodeAbortIndex(base, size, entries)
	got, err := decodeAbortIndex(b, base, size)
	if err != nil || !slices.Equal(got, entries) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if got, err := decodeAbortIndex(encodeAbortIndex(base, 0, nil), base, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty index: %v, %v", got, err)
	}
	for n := range len(b) {
		if _, err := decodeAbortIndex(b[:n], base, size); !errors.Is(err, ErrCorruptSideFile) {
			t.Fatalf("cut to %d of %d bytes: %v", n, len(b), err)
		}
	}
	for i := range b {
		d := slices.Clone(b)
		d[i] ^= 0x10
		if _, err := decodeAbortIndex(d, base, size); !errors.Is(err, ErrCorruptSideFile) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	entry := func(pid, first, last, lso int64) AbortEntry {
		return AbortEntry{AbortedTxn: AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last}, LastStableOffset: lso}
	}
	for name, bad := range map[string][]byte{
		"version 2":         frameSideVersion(encodeAbortIndex(base, size, entries)[sideHeaderSize:], 2),
		"other size":        encodeAbortIndex(base, size+1, entries),
		"other segment":     encodeAbortIndex(base+1, size, entries),
		"marker below base": encodeAbortIndex(base, size, []AbortEntry{entry(1, 10, 99, 100)}),
		"first after last":  encodeAbortIndex(base, size, []AbortEntry{entry(1, 106, 105, 106)}),
		"lso past marker":   encodeAbortIndex(base, size, []AbortEntry{entry(1, 100, 105, 107)}),
		"out of order":      encodeAbortIndex(base, size, []AbortEntry{entries[1], entries[0]}),
		"same marker twice": encodeAbortIndex(base, size, []AbortEntry{entries[0], entries[0]}),
	} {
		if _, err := decodeAbortIndex(bad, base, size); !errors.Is(err, ErrCorruptSideFile) {
			t.Errorf("%s: %v, want ErrCorruptSideFile", name, err)
		}
	}
}

// abortLog appends, to a log of 2 KiB segments, rounds of a transactional
// batch of producer 1 and its abort marker, and a transactional batch of
// producer 2 whose transaction spans the rounds, recording each abort as a
// partition does. It returns the entries, by marker.
func abortLog(t *testing.T, l *Log, clk *clock, rounds int) []AbortEntry {
	t.Helper()
	var entries []AbortEntry
	seq := map[int64]int32{}
	open2 := int64(-1)
	for r := range rounds {
		first := l.LogEndOffset()
		appendTxn(t, l, clk, 1, seq[1], put("k", "aborted"), put("k2", "aborted"))
		seq[1] += 2
		if r%4 == 0 {
			if open2 < 0 {
				open2 = l.LogEndOffset()
			}
			appendTxn(t, l, clk, 2, seq[2], put("j", "v"))
			seq[2]++
		}
		marker := l.LogEndOffset()
		appendMarker(t, l, clk, 1, false)
		e := AbortEntry{AbortedTxn: AbortedTxn{ProducerID: 1, FirstOffset: first, LastOffset: marker}, LastStableOffset: marker + 1}
		if open2 >= 0 {
			e.LastStableOffset = open2
		}
		if err := l.AddAbortedTxn(e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
		if r%8 == 7 { // producer 2 commits
			appendMarker(t, l, clk, 2, true)
			open2 = -1
		}
	}
	return entries
}

// abortedModel is what AbortedTxns must answer: every entry touching
// [from, to).
func abortedModel(entries []AbortEntry, from, to int64) []AbortedTxn {
	var out []AbortedTxn
	for _, e := range entries {
		if e.LastOffset >= from && e.FirstOffset < to {
			out = append(out, e.AbortedTxn)
		}
	}
	return out
}

// checkAborted compares AbortedTxns with the model for every range within
// [start, end] of up to 64 offsets and every range from each offset to end.
func checkAborted(t *testing.T, l *Log, entries []AbortEntry) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	for from := start; from <= end; from++ {
		for _, to := range []int64{from + 1, from + 8, from + 64, end} {
			got, err := l.AbortedTxns(from, to)
			if err != nil {
				t.Fatalf("AbortedTxns(%d, %d): %v", from, to, err)
			}
			if want := abortedModel(entries, from, to); !slices.Equal(got, want) {
				t.Fatalf("AbortedTxns(%d, %d) = %v, want %v", from, to, got, want)
			}
		}
	}
}

// heldEntries returns how many entries each segment holds in memory.
func heldEntries(l *Log) []int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int
	for _, s := range l.mu.segments {
		s.mu.RLock()
		out = append(out, len(s.mu.aborts.entries))
		s.mu.RUnlock()
	}
	return out
}

// TestAbortIndexAcrossRollsRetentionAndRestart: entries go to the active
// segment, are written and let go at each roll, answer ranges across segments
// (transactions whose batches and marker lie in different segments included),
// come back from the files after a clean restart, and go with their segments.
func TestAbortIndexAcrossRollsRetentionAndRestart(t *testing.T) {
	fsys, clk := vfs.NewMem(), newClock()
	cfg := Config{SegmentBytes: MinSegmentBytes, IndexMaxBytes: testIndexBytes, Now: clk.Now}
	l := openLog(t, fsys, cfg)
	entries := abortLog(t, l, clk, 60)
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments, want several rolls", l.NumSegments())
	}
	spans := false
	for _, e := range entries {
		l.mu.RLock()
		spans = spans || l.segmentForLocked(e.FirstOffset) != l.segmentForLocked(e.LastOffset)
		l.mu.RUnlock()
	}
	if !spans {
		t.Fatal("no aborted transaction spans segments")
	}
	checkAborted(t, l, entries)
	// Only the active segment's entries are in memory.
	l.mu.RLock()
	active := l.active().base
	l.mu.RUnlock()
	want := make([]int, l.NumSegments())
	for _, e := range entries {
		if e.LastOffset >= active {
			want[len(want)-1]++
		}
	}
	if held := heldEntries(l); !slices.Equal(held, want) {
		t.Fatalf("entries held in memory per segment %v, want %v (the active segment's only)", held, want)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	if _, stale := l.StaleAbortIndex(); stale {
		t.Fatal("an index is stale after a clean restart")
	}
	checkAborted(t, l, entries)

	// Retention: the first segments go, with their index files.
	l.mu.RLock()
	cut := l.mu.segments[2].base
	gone := []string{segmentName(l.mu.segments[0].base, abortIndexSuffix), segmentName(l.mu.segments[1].base, abortIndexSuffix)}
	l.mu.RUnlock()
	if err := l.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	for _, name := range gone {
		if _, err := fsys.Stat(filepath.Join(testDir, name)); !isNotExist(err) {
			t.Fatalf("%s after its segment was deleted: %v", name, err)
		}
	}
	checkAborted(t, l, entries)
}

// TestAbortIndexRebuiltAfterDamage: a missing, torn or out-of-date index file
// makes its segment stale at Open (an older build's directory, a crash), and
// RebuildAbortIndex restores the answers; a crash image (the active segment's
// index never written) is stale from the active segment on.
func TestAbortIndexRebuiltAfterDamage(t *testing.T) {
	fsys, clk := vfs.NewMem(), newClock()
	cfg := Config{SegmentBytes: MinSegmentBytes, IndexMaxBytes: testIndexBytes, Now: clk.Now}
	l := openLog(t, fsys, cfg)
	entries := abortLog(t, l, clk, 40)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	crash := fsys.CrashClone()
	l.mu.RLock()
	var bases []int64
	for _, s := range l.mu.segments {
		bases = append(bases, s.base)
	}
	l.mu.RUnlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file := func(i int) string { return filepath.Join(testDir, segmentName(bases[i], abortIndexSuffix)) }
	for _, tc := range []struct {
		name      string
		fsys      func() *vfs.MemFS
		wantStale int64
	}{
		{"missing", func() *vfs.MemFS {
			m := fsys.CrashClone()
			if err := m.Remove(file(2)); err != nil {
				t.Fatal(err)
			}
			return m
		}, bases[2]},
		{"torn", func() *vfs.MemFS {
			m := fsys.CrashClone()
			f, err := m.OpenReadWrite(file(1))
			if err == nil {
				err = f.Truncate(20)
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, bases[1]},
		{"another segment's", func() *vfs.MemFS {
			m := fsys.CrashClone()
			if err := m.Rename(file(3), file(1)); err != nil {
				t.Fatal(err)
			}
			return m
		}, bases[1]},
		{"crash", func() *vfs.MemFS { return crash }, bases[len(bases)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(tc.fsys(), testDir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			from, stale := l.StaleAbortIndex()
			if !stale || from != tc.wantStale {
				t.Fatalf("stale from %d (%v), want %d", from, stale, tc.wantStale)
			}
			if _, err := l.AbortedTxns(l.LogStartOffset(), l.LogEndOffset()); !errors.Is(err, ErrAbortIndexStale) {
				t.Fatalf("AbortedTxns before the rebuild: %v, want ErrAbortIndexStale", err)
			}
			// What the log kept (a crash loses the unsynced tail).
			entries := slices.DeleteFunc(slices.Clone(entries), func(e AbortEntry) bool { return e.LastOffset >= l.LogEndOffset() })
			var rebuilt []AbortEntry
			for _, e := range entries {
				if e.LastOffset >= from {
					rebuilt = append(rebuilt, e)
				}
			}
			if err := l.RebuildAbortIndex(from, rebuilt); err != nil {
				t.Fatal(err)
			}
			if _, stale := l.StaleAbortIndex(); stale {
				t.Fatal("stale after the rebuild")
			}
			checkAborted(t, l, entries)
		})
	}
}

// TestAbortIndexTruncation: a truncation, in the active segment or a sealed
// one, cuts the entries at the new end, durably: after a power cut the index
// is sound and answers without the cut tail's entries.
func TestAbortIndexTruncation(t *testing.T) {
	fsys, clk := vfs.NewMem(), newClock()
	cfg := Config{SegmentBytes: MinSegmentBytes, IndexMaxBytes: testIndexBytes, Now: clk.Now}
	l := openLog(t, fsys, cfg)
	entries := abortLog(t, l, clk, 40)
	if err := l.Close(); err != nil { // the active segment's file written
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	// Cut inside the active segment, before its last abort marker, and inside
	// a sealed one.
	for _, cut := range []int64{entries[len(entries)-1].LastOffset, entries[len(entries)/2].LastOffset} {
		if err := l.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		entries = slices.DeleteFunc(entries, func(e AbortEntry) bool { return e.LastOffset >= cut })
		checkAborted(t, l, entries)
		img := fsys.CrashClone()
		r, err := Open(img, testDir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if from, stale := r.StaleAbortIndex(); stale {
			t.Fatalf("after a power cut at truncation %d: stale from %d", cut, from)
		}
		got, err := r.AbortedTxns(r.LogStartOffset(), r.LogEndOffset())
		if want := abortedModel(entries, r.LogStartOffset(), r.LogEndOffset()); err != nil || !slices.Equal(got, want) {
			t.Fatalf("after a power cut at truncation %d: %v, %v, want %v", cut, got, err, want)
		}
		r.Close()
	}
}

// TestAbortIndexCompaction: the cleaned segment keeps the entries of the
// segments it replaces, less those whose marker the pass removed.
func TestAbortIndexCompaction(t *testing.T) {
	fsys, clk := vfs.NewMem(), newClock()
	cfg := compactCfg(clk)
	l := openLog(t, fsys, cfg)
	abort := func(pid int64, seq int32, k string) AbortEntry {
		first := l.LogEndOffset()
		appendTxn(t, l, clk, pid, seq, put(k, "aborted"))
		marker := l.LogEndOffset()
		appendMarker(t, l, clk, pid, false)
		e := AbortEntry{AbortedTxn: AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: marker}, LastStableOffset: marker + 1}
		if err := l.AddAbortedTxn(e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e1 := abort(1, 0, "a")
	appendKV(t, l, clk, 0, put("a", "1"))
	e2 := abort(2, 0, "b")
	appendTxn(t, l, clk, 2, 1, put("c", "2")) // producer 2's next transaction: its marker
	appendMarker(t, l, clk, 2, true)          // is producer 2's last batch
	seal(t, l, clk)
	all := []AbortEntry{e1, e2}
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 0 {
		t.Fatalf("first pass %+v", st)
	}
	checkAborted(t, l, all)
	// Past delete.retention.ms producer 2's abort marker goes (no batch of its
	// transaction is left, and it is not producer 2's last batch), and its
	// entry with it; producer 1's stays (its producer's last batch).
	clk.Advance(2 * compactOpts().DeleteRetention)
	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if !st.Cleaned || st.MarkersRemoved != 1 {
		t.Fatalf("second pass %+v, want producer 2's abort marker removed", st)
	}
	checkAborted(t, l, []AbortEntry{e1})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	if _, stale := l.StaleAbortIndex(); stale {
		t.Fatal("stale after compaction and a clean restart")
	}
	checkAborted(t, l, []AbortEntry{e1})
}

// TestAbortIndexEntryAfterRoll: an abort recorded after a roll that came
// between its marker's append and the call (retention rolls without the
// partition's lock) goes to the sealed segment's file; one whose segment
// retention deleted is dropped.
func TestAbortIndexEntryAfterRoll(t *testing.T) {
	fsys, clk := vfs.NewMem(), newClock()
	cfg := Config{SegmentBytes: MinSegmentBytes, IndexMaxBytes: testIndexBytes, Now: clk.Now}
	l := openLog(t, fsys, cfg)
	roll := func() {
		l.appendMu.Lock()
		defer l.appendMu.Unlock()
		if _, err := l.rollLocked(clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	appendTxn(t, l, clk, 1, 0, put("k", "v"))
	appendMarker(t, l, clk, 1, false)
	e := AbortEntry{AbortedTxn: AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 1}, LastStableOffset: 2}
	roll()
	if err := l.AddAbortedTxn(e); err != nil {
		t.Fatal(err)
	}
	checkAborted(t, l, []AbortEntry{e})
	if held := heldEntries(l); !slices.Equal(held, []int{0, 0}) {
		t.Fatalf("entries held %v, want none", held)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	if _, stale := l.StaleAbortIndex(); stale {
		t.Fatal("stale after the sealed segment's file was rewritten")
	}
	checkAborted(t, l, []AbortEntry{e})

	appendTxn(t, l, clk, 2, 0, put("k", "v"))
	appendMarker(t, l, clk, 2, false)
	gone := AbortEntry{AbortedTxn: AbortedTxn{ProducerID: 2, FirstOffset: 2, LastOffset: 3}, LastStableOffset: 4}
	roll()
	if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := l.AddAbortedTxn(gone); err != nil {
		t.Fatal(err)
	}
	if got, err := l.AbortedTxns(l.LogStartOffset(), l.LogEndOffset()+1); err != nil || len(got) != 0 {
		t.Fatalf("after retention took the marker: %v, %v", got, err)
	}
}
