package storage

import (
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

func batchHeader(b []byte) (batch.Header, error) { return batch.ParseHeader(b) }

// replicate appends batches the leader stored to a follower's log.
func replicate(t *testing.T, follower *Log, batches [][]byte) {
	t.Helper()
	for i, b := range batches {
		if _, err := follower.AppendAsFollower(b); err != nil {
			t.Fatalf("AppendAsFollower %d: %v", i, err)
		}
	}
}

// deposedLeaderSetup builds two replicas of one partition over one store: A
// led in epoch 0 and uploaded, B took over in epoch 1, loaded the manifest,
// uploaded more and applied its local retention (its local log now starts
// past A's uploaded end). A has not learned it is deposed yet.
func deposedLeaderSetup(t *testing.T) (lA *Log, tierA *Tier, lB *Log, tierB *Tier, want [][]byte, endA int64) {
	t.Helper()
	store := memStore(t, vfs.NewMem())
	cfg := Config{SegmentBytes: 4096, RetentionAge: -1}
	ret := TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: 4096}
	lA = openLog(t, vfs.NewMem(), cfg)
	lB = openLog(t, vfs.NewMem(), cfg)
	tierA = NewTier(lA, TierConfig{Store: store, Prefix: tierPrefix, BlockBytes: 1024, Retention: ret})
	tierB = NewTier(lB, TierConfig{Store: store, Prefix: tierPrefix, BlockBytes: 1024, Retention: ret})
	if err := tierA.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}

	// Epoch 0: A leads, B follows.
	want = appendN(t, lA, 40, 3, 100, 1000, 0)
	replicate(t, lB, want)
	if _, err := tierA.Upload(ctxTimeout(t), lA.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tierA.EnforceRetention(ctxTimeout(t), lA.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	endA = tierA.UploadedEnd()
	if endA == 0 || lA.LogStartOffset() == 0 {
		t.Fatalf("A uploaded to %d, local start %d", endA, lA.LogStartOffset())
	}

	// Epoch 1: B leads; A is cut off and has not heard of it.
	if err := tierB.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if err := lB.AssignEpoch(1, lB.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	want = append(want, appendN(t, lB, 40, 3, 100, 2000, 1)...)
	if _, err := tierB.Upload(ctxTimeout(t), lB.LogEndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tierB.EnforceRetention(ctxTimeout(t), lB.LogEndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	if tierB.UploadedEnd() <= endA || lB.LogStartOffset() <= endA {
		t.Fatalf("B uploaded to %d, local start %d; A's end %d", tierB.UploadedEnd(), lB.LogStartOffset(), endA)
	}
	sameBatches(t, readTiered(t, lB, tierB, 1<<20), want)
	return lA, tierA, lB, tierB, want, endA
}

// checkNewLeaderIntact checks the stored manifest still holds what the new
// leader committed, then restarts the new leader's tier (as a restart or the
// next leader change does: the stored manifest is what counts), lets it
// upload, and reads the log back through it from its log start: every offset
// up to the log end must come back, in order, with no gap.
func checkNewLeaderIntact(t *testing.T, lB *Log, tierB *Tier, want [][]byte, endB int64) {
	t.Helper()
	stored, err := tierB.cfg.Store.Get(ctxTimeout(t), tierB.key(manifestKey), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(stored)
	if err != nil {
		t.Fatal(err)
	}
	if m.End < endB || m.LeaderEpoch < 1 {
		t.Errorf("stored manifest after the deposed leader's pass: epoch %d, end %d, %d segments; "+
			"the new leader (epoch 1) had committed up to %d and deleted its local copy below %d",
			m.LeaderEpoch, m.End, len(m.Segments), endB, lB.LogStartOffset())
	}
	restarted := NewTier(lB, tierB.cfg)
	if err := restarted.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Upload(ctxTimeout(t), lB.LogEndOffset(), 1); err != nil {
		t.Logf("new leader's upload after restart: %v", err)
	}
	got := readTiered(t, lB, restarted, 1<<20)
	if len(got) == 0 {
		t.Fatal("nothing read back")
	}
	start := restarted.LogStartOffset()
	h0, _ := batchHeader(got[0])
	if h0.BaseOffset > start {
		t.Errorf("log start %d, first batch read starts at %d", start, h0.BaseOffset)
	}
	for i := 1; i < len(got); i++ {
		prev, _ := batchHeader(got[i-1])
		h, _ := batchHeader(got[i])
		if h.BaseOffset != prev.NextOffset() {
			t.Fatalf("records lost: after offset %d the log reads on at %d (new leader's local start %d, stored manifest end %d)",
				prev.NextOffset()-1, h.BaseOffset, lB.LogStartOffset(), restarted.UploadedEnd())
		}
	}
	sameBatches(t, got, want[len(want)-len(got):])
}

// TestTierDeposedLeaderRetentionKeepsNewLeaderSegments: a deposed leader that
// has not yet learned of its successor runs a remote retention pass (the
// cleaner runs on whoever believes it leads). Its manifest write is fenced by
// the successor's leader epoch, so the segments the new leader committed, and
// already deleted locally, stay. It used to write its stale copy over them:
// those records were gone. Kafka fences remote metadata by leader epoch too.
func TestTierDeposedLeaderRetentionKeepsNewLeaderSegments(t *testing.T) {
	lA, tierA, lB, tierB, want, _ := deposedLeaderSetup(t)
	endB := tierB.UploadedEnd()

	// retention.bytes lowered so that A's next pass deletes its oldest remote
	// segment.
	m, _ := tierA.manifestCopy()
	var remoteOnly int64
	for _, s := range m.Segments {
		if s.Next <= lA.LogStartOffset() {
			remoteOnly += s.Size
		}
	}
	tierA.SetRetention(TierRetention{Age: -1, Bytes: remoteOnly + lA.Size() - m.Segments[0].Size, LocalAge: -1, LocalBytes: 4096})
	_, removed, err := tierA.EnforceRetention(ctxTimeout(t), lA.LogEndOffset(), 0)
	t.Logf("deposed leader's retention pass: removed %d, err %v", removed, err)

	checkNewLeaderIntact(t, lB, tierB, want, endB)
}

// TestTierDeposedLeaderDeleteRecordsKeepsNewLeaderSegments: the same for a
// DeleteRecords a deposed leader takes (it answers as leader until it learns
// otherwise): its manifest write is fenced, and used to drop the segments the
// new leader committed.
func TestTierDeposedLeaderDeleteRecordsKeepsNewLeaderSegments(t *testing.T) {
	_, tierA, lB, tierB, want, _ := deposedLeaderSetup(t)
	endB := tierB.UploadedEnd()
	m, _ := tierA.manifestCopy()
	err := tierA.DeleteRecords(ctxTimeout(t), m.Segments[0].Base+3, 0)
	t.Logf("deposed leader's DeleteRecords: %v", err)
	// Every record from offset 3 on must still be readable.
	checkNewLeaderIntact(t, lB, tierB, want, endB)
}

// TestTierLeaderWritesOverDeposedCommit: a deposed leader that has not yet
// learned of its successor commits an upload before the new leader wrote any
// manifest (nothing fences it yet: the stored manifest is still of its
// epoch). The new leader's copy is then behind the store. Its DeleteRecords
// and its retention pass carry on from the stored manifest, as Kafka's leader
// does from the remote log metadata it has consumed; they used to fail with a
// storage error on a healthy store (TestTierMatchesModel found it).
func TestTierLeaderWritesOverDeposedCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(l *Log, leader *Tier) error
	}{
		{"DeleteRecords", func(l *Log, leader *Tier) error {
			return leader.DeleteRecords(ctxTimeout(t), 5, 1)
		}},
		{"EnforceRetention", func(l *Log, leader *Tier) error {
			leader.SetRetention(TierRetention{Age: -1, Bytes: 0, LocalAge: -1, LocalBytes: 0})
			_, removed, err := leader.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 1)
			if err == nil && removed == 0 {
				t.Error("retention.bytes 0 removed no remote segment")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memStore(t, vfs.NewMem())
			l, deposed := tieredLog(t, store, 1<<30, nil)
			appendN(t, l, 20, 3, 100, 1000, 0)
			if _, err := deposed.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
				t.Fatal(err)
			}
			if err := l.AssignEpoch(1, l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			leader := NewTier(l, deposed.cfg)
			if err := leader.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 20, 3, 100, 1000, 1)
			if n, err := deposed.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || n == 0 {
				t.Fatalf("deposed leader's upload: %d segments, %v", n, err)
			}
			end := deposed.UploadedEnd()
			if err := tc.op(l, leader); err != nil {
				t.Fatalf("leader's %s over the deposed leader's commit: %v", tc.name, err)
			}
			if got := leader.UploadedEnd(); got != end {
				t.Fatalf("uploaded end %d after %s, the store's was %d", got, tc.name, end)
			}
		})
	}
}
