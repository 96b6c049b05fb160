package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestCompactAbortedTransactions: a record of an aborted transaction neither
// supersedes an earlier committed record of its key nor survives compaction;
// committed transactional records compact like any other, and markers stay.
func TestCompactAbortedTransactions(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	txn := func(pid int64, recs ...kv) { appendTxn(t, l, clk, pid, 0, recs...) }
	marker := func(pid int64, commit bool) { appendMarker(t, l, clk, pid, commit) }
	appendKV(t, l, clk, 0, put("k", "plain"))           // 0
	txn(1, put("k", "committed"))                       // 1
	marker(1, true)                                     // 2
	txn(2, put("k", "aborted"), put("only", "aborted")) // 3-4
	txn(3, put("other", "aborted"))                     // 5
	marker(2, false)                                    // 6
	txn(3, put("other", "aborted-too"))                 // 7
	marker(3, false)                                    // 8
	seal(t, l, clk)                                     // 9

	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if !st.Cleaned || st.AbortedRemoved != 4 {
		t.Fatalf("stats %+v, want 4 aborted records removed", st)
	}
	var values []string
	markers := 0
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		if h.Control() {
			markers++
			continue
		}
		_ = batch.Records(b, func(_ batch.Header, r batch.Record) error {
			values = append(values, string(r.Key)+"="+string(r.Value))
			return nil
		})
	}
	if len(values) != 2 || values[0] != "k=committed" || values[1][:5] != "seal-" {
		t.Fatalf("after compaction: %v, want the committed k and the seal record", values)
	}
	if markers != 3 {
		t.Fatalf("%d markers left, want all 3", markers)
	}
}

// TestCompactRemovesMarkers: a transaction marker goes once no batch of its
// transaction is left and it has been clean for longer than delete.retention.ms
// (Kafka's cleaner); until then, while a batch of its transaction is left
// (kept empty too), or when it is its producer's last batch, it stays. No
// transactional batch is ever left without its marker, so a replica scanning
// the log finds no transaction open.
func TestCompactRemovesMarkers(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	seqs := map[int64]int32{}
	txn := func(pid int64, recs ...kv) {
		appendTxn(t, l, clk, pid, seqs[pid], recs...)
		seqs[pid] += int32(len(recs))
	}
	marker := func(pid int64, commit bool) { appendMarker(t, l, clk, pid, commit) }
	// markers lists the markers left as "pid:offset", and fails when a
	// transactional batch has no marker of its producer after it.
	markers := func() []string {
		t.Helper()
		var out []string
		open := map[int64]int64{}
		for _, b := range readAll(t, l) {
			h, _ := batch.ParseHeader(b)
			switch {
			case h.Control():
				out = append(out, fmt.Sprintf("%d:%d", h.ProducerID, h.BaseOffset))
				delete(open, h.ProducerID)
			case h.Transactional():
				open[h.ProducerID] = h.BaseOffset
			}
		}
		if len(open) > 0 {
			t.Fatalf("transactional batches left without a marker after them: %v", open)
		}
		return out
	}

	txn(1, put("a", "1"))            // 0: superseded below, not producer 1's last batch
	marker(1, true)                  // 1: goes once retention passes
	txn(2, put("b", "aborted"))      // 2: aborted, removed by the first pass
	marker(2, false)                 // 3: goes once retention passes
	txn(1, put("c", "kept"))         // 4: its record stays
	marker(1, true)                  // 5: stays (a batch of its transaction is left)
	txn(3, put("d", "aborted-last")) // 6: producer 3's last data batch: kept empty
	marker(3, false)                 // 7: stays (its transaction's empty batch is left)
	txn(2, put("e", "2"))            // 8: producer 2's next transaction
	marker(2, true)                  // 9: producer 2's last batch: stays
	appendKV(t, l, clk, 0, put("a", "2"))
	txn(1, put("f", "1"))
	marker(1, true) // producer 1's last batch
	seal(t, l, clk)
	all := markers()

	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if !st.Cleaned || st.AbortedRemoved != 2 || st.MarkersRemoved != 0 {
		t.Fatalf("first pass %+v, want 2 aborted records and no marker removed", st)
	}
	if got := markers(); !slices.Equal(got, all) {
		t.Fatalf("markers after the first pass %v, want all of %v", got, all)
	}
	// Within the retention: nothing to do yet.
	clk.Advance(compactOpts().DeleteRetention / 2)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); st.MarkersRemoved != 0 {
		t.Fatalf("pass within the retention removed %d markers", st.MarkersRemoved)
	}
	// Past it: a pass runs although nothing is dirty, and removes the two.
	clk.Advance(compactOpts().DeleteRetention)
	st = mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if !st.Cleaned || st.MarkersRemoved != 2 {
		t.Fatalf("pass past the retention %+v, want 2 markers removed", st)
	}
	want := slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == "1:1" || m == "2:3" })
	if got := markers(); !slices.Equal(got, want) {
		t.Fatalf("markers left %v, want %v", got, want)
	}
	// Nothing more to remove: no further pass is due.
	clk.Advance(2 * compactOpts().DeleteRetention)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); st.Cleaned {
		t.Fatalf("a pass ran with nothing to remove: %+v", st)
	}
}

// TestCompactMarkerOutlivesItsTransactionByDeleteRetention: a transaction
// marker's clock starts when its transaction loses its last batch, not when
// the marker became clean. Here a commit marker was clean for twice
// delete.retention.ms when its transaction's only record is superseded: it
// stays in that pass (Kafka's cleaner keeps it in the pass that removes the
// transaction's batches and gives it a delete horizon in the next), and in
// every pass until delete.retention.ms has passed since, also across a
// restart; then it goes. A read_committed consumer that fetched the
// transaction's batches before they went still finds the marker.
func TestCompactMarkerOutlivesItsTransactionByDeleteRetention(t *testing.T) {
	clk := newClock()
	fsys := vfs.NewMem()
	cfg := compactCfg(clk)
	l := openLog(t, fsys, cfg)
	appendTxn(t, l, clk, 1, 0, put("a", "1")) // 0
	appendMarker(t, l, clk, 1, true)          // 1
	appendTxn(t, l, clk, 1, 1, put("f", "1")) // 2: producer 1's last data batch
	appendMarker(t, l, clk, 1, true)          // 3: producer 1's last batch
	seal(t, l, clk)

	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 0 {
		t.Fatalf("first pass %+v", st)
	}
	if all := markersLeft(t, l); !slices.Contains(all, "1:1") {
		t.Fatalf("markers after the first pass: %v", all)
	}

	// Well past delete.retention.ms, the transaction's only record is superseded.
	clk.Advance(2 * compactOpts().DeleteRetention)
	appendKV(t, l, clk, 0, put("a", "2"))
	seal(t, l, clk)
	st := mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if !st.Cleaned || st.Superseded == 0 {
		t.Fatalf("second pass %+v, want a.1 superseded", st)
	}
	if got := markersLeft(t, l); !slices.Contains(got, "1:1") {
		t.Fatalf("marker 1:1 removed in the pass that removed its transaction's records (markers now %v, stats %+v)", got, st)
	}

	// Within the retention from then, and after a restart: it stays, and
	// no pass is due for it.
	clk.Advance(compactOpts().DeleteRetention / 2)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); st.Cleaned {
		t.Fatalf("a pass ran within the marker's retention: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, cfg)
	appendKV(t, l, clk, 0, put("b", "1"))
	seal(t, l, clk)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 0 {
		t.Fatalf("pass within the marker's retention after a restart %+v", st)
	}
	if got := markersLeft(t, l); !slices.Contains(got, "1:1") {
		t.Fatalf("marker 1:1 removed within delete.retention.ms of its transaction's last record (markers now %v)", got)
	}

	// Past it: a pass runs although nothing is dirty, and removes it.
	clk.Advance(compactOpts().DeleteRetention/2 + time.Second)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 1 {
		t.Fatalf("pass past the marker's retention %+v, want it removed", st)
	}
	if got := markersLeft(t, l); slices.Contains(got, "1:1") || !slices.Contains(got, "1:3") {
		t.Fatalf("markers left %v, want 1:3 only", got)
	}
}

// TestCompactMarkerClockPastAnUnreachedSegment: a pass that does not reach
// every clean segment (here one past the high-water mark it is given, lower
// after a restart than when the segment was cleaned) removes a transaction's
// last batch, whose marker lies in a segment it does not reach. The marker's
// clock starts then all the same: the next pass, which reaches it, keeps it.
func TestCompactMarkerClockPastAnUnreachedSegment(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	// 0-1: the tombstone makes the second pass due; the big records keep
	// a pass from cleaning this segment and the next into one.
	appendKV(t, l, clk, 0, tombstone("t"), put("big", strings.Repeat("b", 3000)))
	appendTxn(t, l, clk, 3, 0, put("x", "aborted")) // 2: producer 3's last data batch, kept empty
	seal(t, l, clk)                                 // 3: a new segment
	appendKV(t, l, clk, 0, put("big2", strings.Repeat("b", 2000)))
	appendMarker(t, l, clk, 3, false) // 5
	seal(t, l, clk)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.EmptyBatchesKept != 1 {
		t.Fatalf("first pass %+v", st)
	}
	if bases := segmentBases(l); !slices.Equal(bases[:2], []int64{0, 3}) {
		t.Fatalf("segments %v, want the first two apart", bases)
	}
	appendTxn(t, l, clk, 3, 1, put("y", "1")) // producer 3's batch 2 is no longer its last
	appendMarker(t, l, clk, 3, true)
	seal(t, l, clk)

	clk.Advance(2 * compactOpts().DeleteRetention)
	st := mustCompact(t, l, 3, compactOpts()) // reaches the first segment only
	if !st.Cleaned || st.TombstonesRemoved != 1 || st.BatchesRemoved != 1 {
		t.Fatalf("second pass %+v, want the tombstone and producer 3's empty batch removed", st)
	}
	clk.Advance(time.Minute)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 0 {
		t.Fatalf("third pass %+v, want no marker removed", st)
	}
	if got := markersLeft(t, l); !slices.Contains(got, "3:5") {
		t.Fatalf("marker 3:5 removed a minute after its transaction's last batch (markers now %v)", got)
	}
	clk.Advance(compactOpts().DeleteRetention)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.MarkersRemoved != 1 {
		t.Fatalf("pass past the marker's retention %+v, want it removed", st)
	}
}

// TestCompactedTransactionsMatchModel drives a compacted log with random
// transactions (committed and aborted, of one or two batches, by three
// producers), plain records over the same keys, rolls, compaction passes at
// random times and at high-water marks between transactions (lower ones too,
// as after a restart) and restarts, and checks after every pass:
//
//  1. no transactional batch is left without its producer's marker after it;
//  2. a marker that went had its transaction empty (none of its batches left)
//     since a pass more than DeleteRetention before;
//
// and at the end, two passes each more than DeleteRetention later, that a
// marker left still has a batch of its transaction or is its producer's last
// batch.
func TestCompactedTransactionsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fsys := vfs.NewMem()
		clk := newClock()
		cfg := Config{SegmentBytes: rapid.SampledFrom([]int64{2048, 4096}).Draw(rt, "segmentBytes"),
			IndexIntervalBytes: 100, IndexMaxBytes: testIndexBytes, SegmentAge: time.Minute, RetentionAge: -1, Now: clk.Now}
		opts := CompactOptions{DeleteRetention: time.Hour}
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { l.Close() }()

		type txn struct {
			pid     int64
			batches []int64 // base offsets
			marker  int64
			emptyAt int64 // when a pass first found none of batches left; 0 before
		}
		var txns []*txn
		seqs := map[int64]int32{}
		inTxn := map[int64]bool{} // offsets a high-water mark must not be: (first batch, marker]
		present := func() map[int64]bool {
			out := map[int64]bool{}
			open := map[int64]int64{}
			for _, b := range readAll(rt, l) {
				h, _ := batch.ParseHeader(b)
				out[h.BaseOffset] = true
				switch {
				case h.Control():
					delete(open, h.ProducerID)
				case h.Transactional():
					open[h.ProducerID] = h.BaseOffset
				}
			}
			if len(open) > 0 {
				rt.Fatalf("transactional batches without a marker after them: %v", open)
			}
			return out
		}
		compact := func(hwm int64) {
			before := present()
			if _, err := l.Compact(hwm, opts); err != nil {
				rt.Fatal(err)
			}
			after := present()
			now := clk.Now().UnixMilli()
			for _, x := range txns {
				if before[x.marker] && !after[x.marker] && (x.emptyAt == 0 || now-x.emptyAt <= opts.DeleteRetention.Milliseconds()) {
					rt.Fatalf("marker %d of producer %d removed at %d, its transaction empty since %d", x.marker, x.pid, now, x.emptyAt)
				}
				if x.emptyAt == 0 && !slices.ContainsFunc(x.batches, func(o int64) bool { return after[o] }) {
					x.emptyAt = now
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"txn": func(rt *rapid.T) {
				x := &txn{pid: rapid.Int64Range(1, 3).Draw(rt, "pid")}
				for range rapid.IntRange(1, 2).Draw(rt, "batches") {
					k := fmt.Sprintf("k%d", rapid.IntRange(0, 4).Draw(rt, "key"))
					x.batches = append(x.batches, l.LogEndOffset())
					appendTxn(rt, l, clk, x.pid, seqs[x.pid], put(k, "t"))
					seqs[x.pid]++
				}
				x.marker = l.LogEndOffset()
				appendMarker(rt, l, clk, x.pid, rapid.Bool().Draw(rt, "commit"))
				for o := x.batches[0] + 1; o <= x.marker; o++ {
					inTxn[o] = true
				}
				txns = append(txns, x)
			},
			"put": func(rt *rapid.T) {
				appendKV(rt, l, clk, 0, put(fmt.Sprintf("k%d", rapid.IntRange(0, 4).Draw(rt, "key")), "p"))
			},
			"roll": func(rt *rapid.T) { seal(rt, l, clk) },
			"compact": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 50).Draw(rt, "minutes")) * time.Minute)
				hwm := l.LogEndOffset()
				if rapid.Bool().Draw(rt, "lowHWM") {
					hwm = rapid.Int64Range(l.LogStartOffset(), hwm).Draw(rt, "hwm")
					for inTxn[hwm] {
						hwm++
					}
				}
				compact(hwm)
			},
			"restart": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				if l, err = Open(fsys, testDir, cfg); err != nil {
					rt.Fatal(err)
				}
			},
		})

		for range 2 {
			clk.Advance(opts.DeleteRetention + time.Minute)
			seal(rt, l, clk)
			compact(l.LogEndOffset())
		}
		after := present()
		last := map[int64]int64{}
		for _, x := range txns {
			last[x.pid] = x.marker
		}
		for _, x := range txns {
			if after[x.marker] && last[x.pid] != x.marker && !slices.ContainsFunc(x.batches, func(o int64) bool { return after[o] }) {
				rt.Fatalf("marker %d of producer %d kept, its transaction empty since %d, now %d", x.marker, x.pid, x.emptyAt, clk.Now().UnixMilli())
			}
		}
	})
}

// markersLeft lists the transaction markers a log serves, as "pid:offset".
func markersLeft(t fataler, l *Log) []string {
	t.Helper()
	var out []string
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		if h.Control() {
			out = append(out, fmt.Sprintf("%d:%d", h.ProducerID, h.BaseOffset))
		}
	}
	return out
}

// appendTxn appends recs as one transactional batch of producer pid at
// sequence seq.
func appendTxn(t fataler, l *Log, clk *clock, pid int64, seq int32, recs ...kv) {
	t.Helper()
	br := make([]batch.Record, len(recs))
	for i, r := range recs {
		br[i] = batch.Record{Key: r.key, Value: r.value}
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: clk.Now().UnixMilli(), Idempotent: true, ProducerID: pid, BaseSequence: seq, Transactional: true}, br)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if _, err := l.Append(b, 0); err != nil {
		t.Fatalf("%v", err)
	}
}

// appendMarker appends producer pid's commit or abort marker.
func appendMarker(t fataler, l *Log, clk *clock, pid int64, commit bool) {
	t.Helper()
	if _, err := l.Append(batch.BuildControl(batch.Marker{ProducerID: pid, Commit: commit, Timestamp: clk.Now().UnixMilli()}), 0); err != nil {
		t.Fatalf("%v", err)
	}
}

// TestCompactTransactionsAcrossLogStartMoves: DeleteRecords moves the log
// start past transactional batches into a segment the cleaner made of all the
// clean ones. The batches below the start stay in the segment, and the
// cleaner, which reads whole segments as Kafka's does, keeps the marker of a
// transaction that still has one there (1:6) and of one whose last batch is
// kept empty (2:7), well past their clocks: no transactional batch is left
// without its marker.
func TestCompactTransactionsAcrossLogStartMoves(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	appendTxn(t, l, clk, 3, 0, put("c", "1")) // 0: emptied by the second pass, below the start later
	appendMarker(t, l, clk, 3, true)          // 1
	appendTxn(t, l, clk, 1, 0, put("a", "1")) // 2: cut off by DeleteRecords
	appendTxn(t, l, clk, 2, 0, put("b", "1")) // 3: aborted, cut off
	seal(t, l, clk)                           // 4
	appendTxn(t, l, clk, 2, 1, put("b", "2")) // 5: aborted, producer 2's last data batch
	appendMarker(t, l, clk, 1, true)          // 6
	appendMarker(t, l, clk, 2, false)         // 7
	seal(t, l, clk)                           // 8
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.AbortedRemoved != 2 {
		t.Fatalf("first pass %+v", st)
	}
	appendKV(t, l, clk, 0, put("c", "2"))     // 9: supersedes c.1
	appendTxn(t, l, clk, 3, 1, put("e", "1")) // 10: producer 3's batch 0 is no longer its last
	appendMarker(t, l, clk, 3, true)          // 11
	appendTxn(t, l, clk, 1, 1, put("f", "1")) // 12: marker 6 is no longer producer 1's last batch
	appendMarker(t, l, clk, 1, true)          // 13
	seal(t, l, clk)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.Superseded != 1 {
		t.Fatalf("second pass %+v", st)
	}
	if n := len(l.cleaner.markers); n == 0 || l.cleaner.markers[0].from != 1 {
		t.Fatalf("marker clocks %+v, want one at producer 3's marker", l.cleaner.markers)
	}

	if err := l.DeleteRecords(5); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 5 {
		t.Fatalf("log start %d, want 5", l.LogStartOffset())
	}
	clk.Advance(2 * compactOpts().DeleteRetention)
	appendKV(t, l, clk, 0, put("d", "1"))
	seal(t, l, clk)
	if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned {
		t.Fatalf("pass after DeleteRecords %+v", st)
	}
	if got := markersLeft(t, l); !slices.Equal(got, []string{"1:6", "2:7", "3:11", "1:13"}) {
		t.Fatalf("markers left %v, want 1:6, 2:7, 3:11 and 1:13", got)
	}
	for _, h := range headers(t, l) {
		if h.Transactional() && !h.Control() && h.ProducerID == 2 && h.BaseOffset != 5 {
			t.Fatalf("producer 2's batch at %d left", h.BaseOffset)
		}
	}
}
