package replica

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// abortWorkload runs the transactions of testdata/abortidx-integ's
// workload on p: producer 1 idempotent, 2 commits every round, 3 ends a
// transaction every third round (commit, then abort, alternately), 4 runs
// transactions of seven rounds that span segments (aborted, committed, ...),
// 5 leaves its transaction open. It returns every aborted transaction, by
// marker: what read_committed reads must be told of.
func abortWorkload(t *testing.T, p *Partition) []AbortedTxn {
	t.Helper()
	seq := map[int64]int32{}
	open := map[int64]int64{}
	var aborted []AbortedTxn
	add := func(pid int64, txn bool) {
		res := mustAppend(t, p, txnBatch(t, pid, seq[pid], 3, txn))
		seq[pid] += 3
		if _, ok := open[pid]; txn && !ok {
			open[pid] = res.BaseOffset
		}
	}
	end := func(pid int64, commit bool) {
		res, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, Commit: commit}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if first, ok := open[pid]; ok && !commit {
			aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: res.BaseOffset})
		}
		delete(open, pid)
	}
	const rounds = 60
	for r := range rounds {
		add(1, false)
		add(2, true)
		add(3, true)
		if r%2 == 0 {
			add(4, true)
		}
		end(2, true)
		if r%3 == 2 {
			end(3, r%2 == 0)
		}
		if r%7 == 6 {
			end(4, (r/7)%2 == 1)
		}
	}
	end(3, false)
	add(5, true)
	return aborted
}

// fetchAborted reads from offset with maxBytes under read_committed and renders
// the answer as testdata/abortidx-integ's answers.txt does: offset, max
// bytes, the next offset (-1 for no data), whether it failed, then each aborted
// transaction as producer/first/marker.
func fetchAborted(p *Partition, from int64, maxBytes int) string {
	res, err := p.Read(from, maxBytes, ReadCommitted)
	next := int64(-1)
	if err == nil && res.Chunk.Size > 0 {
		next = res.Chunk.NextOffset
		res.Chunk.Release()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d %v", from, maxBytes, next, err != nil)
	for _, a := range res.Aborted {
		fmt.Fprintf(&b, " %d/%d/%d", a.ProducerID, a.FirstOffset, a.LastOffset)
	}
	return b.String()
}

// checkReadCommitted reads from every offset of p's log with three fetch sizes
// and checks that each answer lists exactly the aborted transactions of the
// model that touch the range read.
func checkReadCommitted(t *testing.T, p *Partition, model []AbortedTxn) {
	t.Helper()
	for from := p.LogStartOffset(); from <= p.LogEndOffset(); from++ {
		for _, maxBytes := range []int{1, 700, 1 << 20} {
			res, err := p.Read(from, maxBytes, ReadCommitted)
			if err != nil {
				t.Fatalf("read at %d: %v", from, err)
			}
			var want []AbortedTxn
			if res.Chunk.Size > 0 {
				for _, a := range model {
					if a.LastOffset >= from && a.FirstOffset < res.Chunk.NextOffset {
						want = append(want, a)
					}
				}
				res.Chunk.Release()
			}
			if res.Aborted == nil || !slices.Equal(res.Aborted, want) {
				t.Fatalf("read at %d (max %d bytes): aborted %v, want %v", from, maxBytes, res.Aborted, want)
			}
		}
	}
}

// abortIndexFiles returns the .txnindex files in dir.
func abortIndexFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestAbortedTxnsAcrossRollsAndRetention: read_committed reads from every
// offset are told exactly the aborted transactions of their range, with
// transactions whose batches and marker lie in different segments, after a
// clean restart (the indexes from their files), after a kill (the active
// segment's rebuilt from the log) and after retention deleted the first
// segments, their index files with them.
func TestAbortedTxnsAcrossRollsAndRetention(t *testing.T) {
	dir := t.TempDir()
	p := openSnapshotPartition(t, vfs.Default, dir)
	model := abortWorkload(t, p)
	if n := p.log.NumSegments(); n < 4 {
		t.Fatalf("%d segments, want several rolls", n)
	}
	checkReadCommitted(t, p, model)
	killed := copyDir(t, dir) // as a kill -9 leaves it: no clean shutdown
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	p = openSnapshotPartition(t, vfs.Default, killed)
	checkReadCommitted(t, p, model)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	p = openSnapshotPartition(t, vfs.Default, dir)
	t.Cleanup(func() { p.close() })
	checkReadCommitted(t, p, model)
	// Retention: everything below the fourth segment goes.
	files := abortIndexFiles(t, dir)
	if len(files) < 4 {
		t.Fatalf("index files %v after a clean close, want one per segment", files)
	}
	cut, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(files[3]), ".txnindex"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := p.log.EnforceRetention(p.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	for _, name := range files[:3] {
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Fatalf("%s after retention deleted its segment: %v", filepath.Base(name), err)
		}
	}
	checkReadCommitted(t, p, model)
}

// TestAbortIndexRebuiltWhenTornOrMissing: a partition whose index files are
// torn, damaged or missing rebuilds them from the log when it opens, and
// answers as before.
func TestAbortIndexRebuiltWhenTornOrMissing(t *testing.T) {
	dir := t.TempDir()
	p := openSnapshotPartition(t, vfs.Default, dir)
	model := abortWorkload(t, p)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	files := abortIndexFiles(t, dir)
	if len(files) < 4 {
		t.Fatalf("index files %v, want one per segment", files)
	}
	for _, tc := range []struct {
		name   string
		damage func(dir string)
	}{
		{"torn", func(dir string) {
			if err := os.Truncate(filepath.Join(dir, filepath.Base(files[1])), 17); err != nil {
				t.Fatal(err)
			}
		}},
		{"flipped", func(dir string) {
			name := filepath.Join(dir, filepath.Base(files[2]))
			b := mustRead(t, name)
			b[len(b)-1] ^= 1
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"all missing", func(dir string) {
			for _, f := range files {
				if err := os.Remove(filepath.Join(dir, filepath.Base(f))); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			tc.damage(d)
			p := openSnapshotPartition(t, vfs.Default, d)
			checkReadCommitted(t, p, model)
			if err := p.close(); err != nil {
				t.Fatal(err)
			}
			// Rebuilt on disk: the log opens with every index sound.
			l, err := storage.Open(vfs.Default, d, storage.Config{SegmentBytes: 4096, IndexMaxBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if from, stale := l.StaleAbortIndex(); stale {
				t.Fatalf("stale from %d after the rebuild and a clean close", from)
			}
		})
	}
}

// TestOpensIntegAbortFixture opens a partition written by integ (2bc86a9, the
// build before the aborted-transaction index: aborted transactions in memory
// and in version 2 producer snapshots, no .txnindex files) and checks that
// every read_committed read answers what integ answered, recorded with the
// fixture. testdata/abortidx-integ holds t-0 (abortWorkload on
// openSnapshotPartition, closed cleanly) and answers.txt (fetchAborted from
// every offset with 1, 700 and 1 MiB maximum bytes).
func TestOpensIntegAbortFixture(t *testing.T) {
	root := filepath.Join("testdata", "abortidx-integ")
	dir := copyDir(t, filepath.Join(root, "t-0"))
	if files := abortIndexFiles(t, dir); len(files) != 0 {
		t.Fatalf("the fixture has index files %v", files)
	}
	f, err := os.Open(filepath.Join(root, "answers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var answers []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		answers = append(answers, sc.Text())
	}
	if len(answers) < 300 {
		t.Fatalf("%d answers in the fixture", len(answers))
	}
	check := func(p *Partition) {
		t.Helper()
		for _, want := range answers {
			var from int64
			var maxBytes int
			if _, err := fmt.Sscanf(want, "%d %d", &from, &maxBytes); err != nil {
				t.Fatalf("answer %q: %v", want, err)
			}
			if got := fetchAborted(p, from, maxBytes); got != want {
				t.Fatalf("read at %d (max %d bytes):\n got %s\nwant %s", from, maxBytes, got, want)
			}
		}
	}
	for range 2 { // as upgraded (indexes rebuilt), then from the new files
		p := openSnapshotPartition(t, vfs.Default, dir)
		check(p)
		segments := p.log.NumSegments()
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
		if files := abortIndexFiles(t, dir); len(files) != segments {
			t.Fatalf("%d index files for %d segments", len(files), segments)
		}
	}
}
