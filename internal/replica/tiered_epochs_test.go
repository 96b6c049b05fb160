package replica

import (
	"context"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
)

// TestTieredListOffsetEpochOfRemoteOffset: ListOffsets on a tiered partition
// answers, for an offset held in the store (earliest, a timestamp found in a
// remote segment), the leader epoch that wrote it, by the manifest's segment
// epochs, as the local lookups do and as Kafka does. It used to answer the
// current leader epoch.
func TestTieredListOffsetEpochOfRemoteOffset(t *testing.T) {
	p, _, m, _, _ := tieredLeader(t)
	first := time.Now().UnixMilli()
	for i := range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: first + int64(i), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The leader keeps its leadership under a later epoch (e.g. after an ISR
	// change that bumped it, or a re-election).
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: first + 100, Records: batchtest.Values(2, 100)}), 1); err != nil {
		t.Fatal(err)
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	if p.LogStartOffset() == 0 {
		t.Fatal("local retention deleted nothing after the upload")
	}
	if off, _ := p.Tier().LastUploaded(); off < 0 {
		t.Fatal("nothing uploaded")
	}
	for _, tc := range []struct {
		name string
		ts   int64
	}{{"earliest (-2)", EarliestTimestamp}, {"the first timestamp", first}, {"a remote timestamp", first + 5}} {
		off, _, epoch, found, err := p.ListOffset(context.Background(), tc.ts, ReadUncommitted)
		if err != nil || !found || off >= p.LogStartOffset() {
			t.Fatalf("ListOffsets %s = %d, %v, %v; want a remote offset", tc.name, off, found, err)
		}
		if epoch != 0 {
			t.Errorf("ListOffsets %s = offset %d with leader epoch %d; offset %d was written in epoch 0", tc.name, off, epoch, off)
		}
	}
	// The same lookups on the local part answer the epoch that wrote it.
	local := p.LogStartOffset()
	if off, _, epoch, _, _ := p.ListOffset(context.Background(), EarliestLocalTimestamp, ReadUncommitted); off != local || epoch != 0 {
		t.Errorf("ListOffsets earliest-local = %d epoch %d; want %d epoch 0", off, epoch, local)
	}
}

// TestTieredEndOffsetForRemoteEpoch: OffsetForLeaderEpoch on a tiered leader
// answers, for an epoch that ended below the local log start, where it ended
// by the remote part's epochs (the manifest's segments), as Kafka's leader,
// whose epoch cache reaches down to the remote log start. The old code
// answered from the local epoch cache, cut at the local start: every such
// epoch "ended" at the local start.
func TestTieredEndOffsetForRemoteEpoch(t *testing.T) {
	p, _, m, _, _ := tieredLeader(t)
	starts := map[int32]int64{}
	for _, epoch := range []int32{0, 1, 2} {
		if epoch > 0 {
			if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		starts[epoch] = p.LogEndOffset()
		for range 20 + 40*epoch/2 {
			if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	if local := p.LogStartOffset(); local <= starts[2] {
		t.Fatalf("local start %d, not past epoch 2's start %d", local, starts[2])
	}
	for _, tc := range []struct {
		epoch, wantEpoch int32
		wantEnd          int64
	}{
		{0, 0, starts[1]},
		{1, 1, starts[2]},
		{2, 2, p.LogEndOffset()},
	} {
		epoch, end, err := p.EndOffsetForEpoch(tc.epoch)
		if err != nil || epoch != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d, %v; want %d, %d (local start %d)", tc.epoch, epoch, end, err, tc.wantEpoch, tc.wantEnd, p.LogStartOffset())
		}
	}
}
