package storage

import (
	"errors"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestTruncate(t *testing.T) {
	// 30 batches of 2 records in segments of 5 batches; epochs 1 (offsets 0-19),
	// 2 (20-39), 3 (40-59). As in Kafka, the segment holding the cut stays, even if
	// the cut empties it.
	tests := []struct {
		name    string
		offset  int64
		end     int64
		epochs  []EpochEntry
		segs    int
		removed int // batches gone
	}{
		{"at end", 60, 60, []EpochEntry{{1, 0}, {2, 20}, {3, 40}}, 6, 0},
		{"past end", 70, 60, []EpochEntry{{1, 0}, {2, 20}, {3, 40}}, 6, 0},
		{"batch boundary", 50, 50, []EpochEntry{{1, 0}, {2, 20}, {3, 40}}, 6, 5},
		{"mid batch drops it", 51, 50, []EpochEntry{{1, 0}, {2, 20}, {3, 40}}, 6, 5},
		{"epoch boundary", 40, 40, []EpochEntry{{1, 0}, {2, 20}}, 5, 10},
		{"segment boundary", 30, 30, []EpochEntry{{1, 0}, {2, 20}}, 4, 15},
		{"early segment", 13, 12, []EpochEntry{{1, 0}}, 2, 24},
		{"first batch", 1, 0, []EpochEntry{}, 1, 30},
		{"zero", 0, 0, []EpochEntry{}, 1, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := Config{SegmentBytes: 5 * int64(len(mkBatch(2, 300, 0)))}
			l := openLog(t, mem, cfg)
			var want [][]byte
			for epoch := int32(1); epoch <= 3; epoch++ {
				want = append(want, appendN(t, l, 10, 2, 300, 0, epoch)...)
			}
			if l.NumSegments() != 6 {
				t.Fatalf("setup: %d segments", l.NumSegments())
			}
			if err := l.Truncate(tt.offset); err != nil {
				t.Fatal(err)
			}
			want = want[:30-tt.removed]
			check := func(l *Log, how string) {
				t.Helper()
				if l.LogEndOffset() != tt.end || l.NumSegments() != tt.segs {
					t.Fatalf("%s: end %d, %d segments; want %d, %d", how, l.LogEndOffset(), l.NumSegments(), tt.end, tt.segs)
				}
				if e := l.Epochs(); !equalEpochs(e, tt.epochs) && !(len(e) == 0 && len(tt.epochs) == 0) {
					t.Fatalf("%s: epochs %v, want %v", how, e, tt.epochs)
				}
				sameBatches(t, readAll(t, l), want)
			}
			check(l, "after truncate")

			// Appends continue at the new end; a crash and a clean restart both
			// keep the result.
			more := appendN(t, l, 2, 2, 300, 0, 4)
			want = append(want, more...)
			tt.end += 4
			tt.epochs = append(tt.epochs, EpochEntry{4, tt.end - 4})
			tt.segs = max(tt.segs, len(segmentBases(l)))
			if err := l.WaitDurable(ctxTimeout(t), tt.end-1); err != nil {
				t.Fatal(err)
			}
			crashed := mem.CrashClone()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			check(openLog(t, mem, cfg), "clean reopen")
			check(openLog(t, crashed, cfg), "crash reopen")
		})
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, Config{SegmentBytes: 4096})
	appendN(t, l, 20, 2, 300, 0, 1)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.NumSegments() != 1 || l.Size() != 0 || len(l.Epochs()) != 0 {
		t.Fatalf("start %d end %d segs %d size %d epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments(), l.Size(), l.Epochs())
	}
	b := mkBatch(1, 10, 0)
	batch.SetBaseOffset(b, 1000)
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	// Restarting at an offset some old segment used reuses its name safely.
	if err := l.TruncateFullyAndStartAt(0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3, 1, 10, 0, 2)
	if err := l.WaitDurable(ctxTimeout(t), 2); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, mem.CrashClone(), Config{SegmentBytes: 4096})
	if r.LogStartOffset() != 0 || r.LogEndOffset() != 3 {
		t.Fatalf("crash reopen: [%d, %d)", r.LogStartOffset(), r.LogEndOffset())
	}
	if err := l.Truncate(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Truncate(-1) = %v", err)
	}
}

func TestAssignEpochAndEndOffsets(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, Config{})
	if err := l.AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5, 2, 10, 0, 1)
	if err := l.AssignEpoch(3, 10); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5, 2, 10, 0, 3)
	if err := l.AssignEpoch(5, 99); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("AssignEpoch past the end = %v", err)
	}
	tests := []struct {
		epoch int32
		want  int32
		end   int64
	}{
		{1, 1, 10},
		{2, 1, 10},
		{3, 3, 20},
		{4, UndefinedEpoch, UndefinedOffset},
		{0, 0, 0},
		{UndefinedEpoch, UndefinedEpoch, UndefinedOffset},
	}
	for _, tt := range tests {
		if e, end := l.EndOffsetForEpoch(tt.epoch); e != tt.want || end != tt.end {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tt.epoch, e, end, tt.want, tt.end)
		}
	}
	// An assigned epoch is checkpointed at once: it survives a crash before any append.
	if err := l.AssignEpoch(4, 20); err != nil {
		t.Fatal(err)
	}
	if e, end := l.EndOffsetForEpoch(3); e != 3 || end != 20 {
		t.Fatalf("EndOffsetForEpoch(3) after epoch 4 = %d, %d", e, end)
	}
	if got := l.LatestEpoch(); got != 4 {
		t.Fatalf("LatestEpoch = %d", got)
	}
}

// TestTruncateAtEndDropsEmptyEpoch: a leader deposed before it appended leaves
// an epoch that starts at the log end; truncating to the end removes it (the
// follower then fetches with the epoch before, which its new leader knows), and
// the change survives a crash.
func TestTruncateAtEndDropsEmptyEpoch(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, Config{})
	appendN(t, l, 5, 2, 10, 0, 1)
	if err := l.WaitDurable(ctxTimeout(t), 9); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(2, 10); err != nil {
		t.Fatal(err)
	}
	for _, offset := range []int64{11, 10} { // past the end: nothing starts there
		if err := l.Truncate(offset); err != nil {
			t.Fatal(err)
		}
	}
	want := []EpochEntry{{1, 0}}
	if got := l.Epochs(); !equalEpochs(got, want) || l.LatestEpoch() != 1 || l.LogEndOffset() != 10 {
		t.Fatalf("after truncating to the end: epochs %v (latest %d), end %d; want %v, 1, 10", got, l.LatestEpoch(), l.LogEndOffset(), want)
	}
	if got := openLog(t, mem.CrashClone(), Config{}).Epochs(); !equalEpochs(got, want) {
		t.Fatalf("after a crash: epochs %v, want %v", got, want)
	}
}

// TestTruncateCrashLeavesNoHole cuts the power before each filesystem
// operation of a truncation inside a sealed segment: the reopened log must be
// a prefix of the old one at least as long as the truncated one. Cutting the
// segment before the later segments were durably deleted left, after a crash
// between the two, the cut segment followed by the deleted ones: the offsets
// cut away missing and the divergent tail after them back (a forward gap
// between segments is legal, so recovery kept it).
func TestTruncateCrashLeavesNoHole(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	base, want := cleanLog(t, cfg, 60) // 2 records a batch, several segments
	const cut = 30                     // inside the first segment
	steps := crashAtEachLogOp(t, base, cfg, func(l *Log) error { return l.Truncate(cut) }, func(img *vfs.MemFS, what string) {
		l, err := Open(img, testDir, cfg)
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer l.Close()
		if got := readAll(t, l); !prefixOf(got, want) || len(got) < cut/2 {
			t.Fatalf("%s: the log holds batches at %v, want a prefix of the old log of at least %d batches", what, baseOffsets(got), cut/2)
		}
	})
	if steps < 5 {
		t.Fatalf("the truncation made only %d operations", steps)
	}
}
