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
