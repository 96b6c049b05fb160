package storage

import (
	"errors"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestProducerSnapshotFiles: the log keeps the newest two snapshots, refuses
// one outside the log, and removes those a truncation made stale, durably.
func TestProducerSnapshotFiles(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs, Config{})
	appendN(t, l, 10, 2, 16, 0, 0) // offsets 0-19
	for _, off := range []int64{4, 8, 12, 16} {
		if err := l.WriteProducerSnapshot(off, []byte{byte(off)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WriteProducerSnapshot(21, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("snapshot above the log end: %v", err)
	}
	// Make them durable, as time would.
	if err := fs.SyncFS(testDir); err != nil {
		t.Fatal(err)
	}
	if offsets := l.ProducerSnapshots(); !slices.Equal(offsets, []int64{16, 12}) {
		t.Fatalf("snapshots %v; want the newest two [16 12]", offsets)
	}
	if b, err := l.ReadProducerSnapshot(12); err != nil || !slices.Equal(b, []byte{12}) {
		t.Fatalf("snapshot at 12: %v, %v", b, err)
	}

	if err := l.Truncate(14); err != nil {
		t.Fatal(err)
	}
	if offsets := l.ProducerSnapshots(); !slices.Equal(offsets, []int64{12}) {
		t.Fatalf("after truncating to 14: %v, want [12]", offsets)
	}
	// The removal is durable: a power cut now cannot bring 16 back.
	names, err := fs.CrashClone().List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, snapshotName(16)) || !slices.Contains(names, snapshotName(12)) {
		t.Fatalf("after a power cut the directory holds %v; want the snapshot at 12 and not 16", names)
	}

	if err := l.TruncateFullyAndStartAt(30); err != nil {
		t.Fatal(err)
	}
	if offsets := l.ProducerSnapshots(); len(offsets) != 0 {
		t.Fatalf("after TruncateFullyAndStartAt: %v, want none", offsets)
	}
}
