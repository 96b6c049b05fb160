package storage

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// deletedFiles lists the .deleted files in the test log's directory.
func deletedFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, deletedSuffix) })
}

// keyedLog opens a log of compactCfg with FileDeleteDelay delay and writes
// keyed batches over several sealed segments.
func keyedLog(t *testing.T, fsys vfs.FS, delay time.Duration) *Log {
	t.Helper()
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.FileDeleteDelay = delay
	l := openLog(t, fsys, cfg)
	writeKeyed(t, l, clk, 60, 0)
	seal(t, l, clk)
	if n := l.NumSegments(); n < 3 {
		t.Fatalf("%d segments, want at least 3", n)
	}
	return l
}

// TestFileDeleteDelay checks file.delete.delay.ms as Kafka applies it
// (LocalLog.deleteSegmentFiles): the files of a segment that retention,
// DeleteRecords, truncation or compaction removes are renamed to .deleted at
// once and removed FileDeleteDelay later. In a synctest bubble, so the delay
// passes in fake time.
func TestFileDeleteDelay(t *testing.T) {
	const delay = time.Minute
	tests := []struct {
		name   string
		remove func(t *testing.T, l *Log)
	}{
		{"retention", func(t *testing.T, l *Log) {
			if n, err := l.EnforceRetentionLimits(l.LogEndOffset(), -1, 1); err != nil || n == 0 {
				t.Fatalf("EnforceRetentionLimits = %d, %v", n, err)
			}
		}},
		{"DeleteRecords", func(t *testing.T, l *Log) {
			if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncation", func(t *testing.T, l *Log) {
			if err := l.Truncate(1); err != nil {
				t.Fatal(err)
			}
		}},
		{"full truncation", func(t *testing.T, l *Log) {
			if err := l.TruncateFullyAndStartAt(l.LogEndOffset() + 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"compaction", func(t *testing.T, l *Log) {
			if st := mustCompact(t, l, l.LogEndOffset(), compactOpts()); !st.Cleaned || st.SegmentsWritten == 0 {
				t.Fatalf("pass %+v", st)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := vfs.NewMem()
				l := keyedLog(t, mem, delay)
				tt.remove(t, l)
				deleted := deletedFiles(t, mem)
				if len(deleted) == 0 {
					t.Fatal("no segment renamed to .deleted")
				}
				time.Sleep(delay - time.Millisecond)
				synctest.Wait()
				if got := deletedFiles(t, mem); !slices.Equal(got, deleted) {
					t.Fatalf("before the delay: %v left of %v", got, deleted)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if got := deletedFiles(t, mem); len(got) != 0 {
					t.Fatalf("%v left after the delay", got)
				}
			})
		})
	}
}

// TestFileDeleteDelayOutlivedByReader: a reader holding a deleted segment past
// the delay keeps reading it, and its file goes when the reader lets go.
func TestFileDeleteDelayOutlivedByReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = time.Minute
		mem := vfs.NewMem()
		l := keyedLog(t, mem, delay)
		c, err := l.Read(0, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		before, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * delay)
		synctest.Wait()
		deleted := filepath.Join(testDir, segmentName(0, logSuffix+deletedSuffix))
		if _, err := mem.Stat(deleted); err != nil {
			t.Fatalf("segment file went while a chunk holds it: %v", err)
		}
		if after, err := c.Bytes(); err != nil || string(after) != string(before) {
			t.Fatalf("reading a deleted segment's chunk after the delay: %v", err)
		}
		c.Release()
		synctest.Wait()
		if _, err := mem.Stat(deleted); !isNotExist(err) {
			t.Fatalf("segment file still there after the reader let go: %v", err)
		}
	})
}

// TestCloseRemovesFilesWaitingToBeDeleted: Close stops the delays and removes
// the files still waiting, as the next Open would.
func TestCloseRemovesFilesWaitingToBeDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := vfs.NewMem()
		l := keyedLog(t, mem, time.Hour)
		if err := l.DeleteRecords(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		if len(deletedFiles(t, mem)) == 0 {
			t.Fatal("no segment renamed to .deleted")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := deletedFiles(t, mem); len(got) != 0 {
			t.Fatalf("%v left after Close", got)
		}
	})
}

// TestOpenRemovesFilesWaitingToBeDeleted: files a crash left waiting for their
// delay are removed by the next Open, which reads none of them as a segment
// (Kafka's LogLoader removes *.deleted files the same way).
func TestOpenRemovesFilesWaitingToBeDeleted(t *testing.T) {
	mem := vfs.NewMem()
	l := keyedLog(t, mem, time.Hour)
	want := readAll(t, l)[:1]
	if err := l.Truncate(3); err != nil { // after the first batch
		t.Fatal(err)
	}
	crashed := mem.CrashClone() // the truncation's renames were synced
	if len(deletedFiles(t, crashed)) == 0 {
		t.Fatal("no .deleted file to leave behind")
	}
	r := openLog(t, crashed, compactCfg(newClock()))
	if len(deletedFiles(t, crashed)) != 0 {
		t.Fatalf("%v left after Open", deletedFiles(t, crashed))
	}
	if r.NumSegments() != 1 || r.LogEndOffset() != 3 {
		t.Fatalf("reopened with %d segments up to %d, want 1 up to 3", r.NumSegments(), r.LogEndOffset())
	}
	sameBatches(t, readAll(t, r), want)
}
