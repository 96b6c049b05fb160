package controller

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/wait"
)

// TestSnapshotOnKafkaBounds: a controller snapshots its log once the records
// applied since the last snapshot pass SnapshotMaxBytes, or once
// SnapshotMaxInterval passed with records applied, with no other trigger near
// (Raft's own threshold is 8,192 entries); its log is truncated and a restart
// restores the same state from the snapshot.
func TestSnapshotOnKafkaBounds(t *testing.T) {
	for _, tt := range []struct {
		name     string
		maxBytes int64
		interval time.Duration
	}{
		{"bytes", 1024, -1},
		{"interval", -1, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := singleConfig(t.TempDir())
			cfg.TrailingLogs = 1
			cfg.SnapshotMaxBytes, cfg.SnapshotMaxInterval = tt.maxBytes, tt.interval
			c := start(t, cfg)
			registerAndCreate(t, c, 1, "a", "b", "c", "d", "e", "f", "g", "h")
			wait.For(t, "a snapshot", func() bool { return c.raft.Stats()["last_snapshot_index"] != "0" })
			wait.For(t, "the log truncated after it", func() bool {
				first, err := c.store.FirstIndex()
				return err == nil && first > 1
			})
			before := c.Image()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c2 := start(t, cfg)
			sameState(t, c2.Image(), before)
		})
	}
}

func TestSnapshotDue(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tt := range []struct {
		name        string
		applied     int64 // bytes applied since the last snapshot
		maxBytes    int64
		maxInterval time.Duration
		after       time.Duration // since the last snapshot
		want        bool
	}{
		{"nothing new, interval passed", 0, 100, time.Second, time.Hour, false},
		{"bytes reached", 100, 100, time.Hour, 0, true},
		{"bytes below, interval not passed", 99, 100, time.Hour, time.Minute, false},
		{"bytes below, interval passed", 1, 100, time.Hour, time.Hour, true},
		{"bytes bound off", 1 << 40, -1, time.Hour, 0, false},
		{"interval off", 1, 100, -1, 1000 * time.Hour, false},
	} {
		f := newFSM(testLogger(), tt.maxBytes)
		f.snapshotAt.Store(start.UnixNano())
		f.applied.Store(tt.applied)
		if got := f.snapshotDue(tt.maxInterval, start.Add(tt.after)); got != tt.want {
			t.Errorf("%s: snapshotDue = %v, want %v", tt.name, got, tt.want)
		}
	}
}
