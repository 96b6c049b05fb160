package controller

import (
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestPowerLossKeepsMetadata cuts the power of a running controller whose Raft
// log, stable state and snapshots live on an in-memory disk, and restarts it
// on what the disk had fsynced (torn unsynced writes included): every change
// the controller acknowledged, before and after its snapshot, is still there.
// With the earlier bbolt store and FileSnapshotStore, which wrote to the real
// disk, the cut could not reach them at all.
func TestPowerLossKeepsMetadata(t *testing.T) {
	mem := vfs.NewMem()
	cfg := singleConfig("/node/metadata")
	cfg.FS = mem
	cfg.TrailingLogs = 1
	c := start(t, cfg)
	registerAndCreate(t, c, 1, "a", "b")
	allocate(t, c, 0)
	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	registerAndCreate(t, c, 1, "c")
	allocate(t, c, 1000)
	before := c.Image()

	for seed := range uint64(3) {
		// The cut, while c still runs.
		img := mem.CrashClone(vfs.WithTornWrites(seed))
		cfg := cfg
		cfg.FS = img
		c2 := start(t, cfg)
		sameState(t, c2.Image(), before)
		allocate(t, c2, 2000) // the next block: none is handed out twice
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	names, err := mem.List("/node/metadata/snapshots")
	if err != nil || len(names) == 0 {
		t.Fatalf("no snapshot on the in-memory disk: %v, %v", names, err)
	}
}
