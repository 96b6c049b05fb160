package share

import (
	"context"
	"sync/atomic"
	"testing"
)

// laggingParts is a node whose metadata lags the controller's: the group's
// share.auto.offset.reset=earliest, committed elsewhere, reaches it only when
// SyncMetadata catches it up.
type laggingParts struct {
	testParts
	synced *atomic.Bool
	calls  *atomic.Int32
}

func (p laggingParts) SyncMetadata(context.Context) error {
	p.calls.Add(1)
	p.synced.Store(true)
	return nil
}

// TestInitialiseAfterMetadataSync: a share partition without state takes its
// start from share.auto.offset.reset as the controller has it, not as this
// node's lagging metadata last had it: a group configured earliest reads the
// records already in the partition. On the old code the leader read its stale
// copy (latest) and the fetch acquired nothing.
func TestInitialiseAfterMetadataSync(t *testing.T) {
	base, rp := newGroupCommitManager(t, newGatedStore(nil), 5)
	base.Close()
	parts := laggingParts{testParts: base.parts.(testParts), synced: new(atomic.Bool), calls: new(atomic.Int32)}
	cfg := DefaultGroupConfig()
	store := newGatedStore(nil)
	close(store.release)
	m := NewManager(Config{Defaults: cfg, GroupConfig: func(string) GroupConfig {
		c := cfg
		if parts.synced.Load() {
			c.AutoOffsetReset = "earliest"
		}
		return c
	}}, store, parts, nil)
	t.Cleanup(m.Close)

	if o := fetchOne(t, m, "m"); o != 0 {
		t.Fatalf("acquired offset %d, want 0 (earliest)", o)
	}
	if rp.HighWatermark() != 5 {
		t.Fatalf("high watermark %d, want 5", rp.HighWatermark())
	}
	// A share partition with state does not wait for metadata: its start is saved.
	if code := accept(m, "m", 0); code != 0 {
		t.Fatalf("accept: code %d", code)
	}
	m.Unload(Key{Group: "g", TopicID: gcTopicID, Partition: 0})
	before := parts.calls.Load()
	if o := fetchOne(t, m, "m2"); o != 1 {
		t.Fatalf("after a reload acquired offset %d, want 1", o)
	}
	if n := parts.calls.Load() - before; n != 0 {
		t.Fatalf("a reload from saved state synced metadata %d times", n)
	}
}
