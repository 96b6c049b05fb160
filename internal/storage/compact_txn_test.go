package storage

import (
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestCompactAbortedTransactions: a record of an aborted transaction neither
// supersedes an earlier committed record of its key nor survives compaction;
// committed transactional records compact like any other, and markers stay.
func TestCompactAbortedTransactions(t *testing.T) {
	clk := newClock()
	l := openLog(t, vfs.NewMem(), compactCfg(clk))
	txn := func(pid int64, recs ...kv) {
		t.Helper()
		br := make([]batch.Record, len(recs))
		for i, r := range recs {
			br[i] = batch.Record{Key: r.key, Value: r.value}
		}
		b, err := batch.Build(batch.BuildOptions{FirstTimestamp: clk.Now().UnixMilli(), Idempotent: true, ProducerID: pid, Transactional: true}, br)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if _, err := l.Append(batch.BuildControl(batch.Marker{ProducerID: pid, Commit: commit, Timestamp: clk.Now().UnixMilli()}), 0); err != nil {
			t.Fatal(err)
		}
	}
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
