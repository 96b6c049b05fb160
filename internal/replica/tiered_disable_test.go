package replica

import (
	"context"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/wait"
)

// TestTieredCopyDisable: remote.log.copy.disable=true (KIP-950) stops the
// uploads, but the remote part is still read and kept by retention, and local
// retention (then the total, as the config check requires) no longer waits
// for uploads that will not come, as Kafka's UnifiedLog applies it once copying
// stops.
func TestTieredCopyDisable(t *testing.T) {
	p, l, m, _, tc := tieredLeader(t)
	appendN := func(n int) {
		t.Helper()
		for range n {
			if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(60)
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	uploaded := p.Tier().UploadedEnd()
	if uploaded <= 0 || p.LogStartOffset() == 0 {
		t.Fatalf("after the first pass: uploaded end %d, local start %d", uploaded, p.LogStartOffset())
	}

	tc.RemoteLogCopyDisable, tc.LocalRetentionBytes, tc.RetentionBytes = true, -2, -1
	m.applyTier(p, tc)
	appendN(60)
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	if got := p.Tier().UploadedEnd(); got != uploaded {
		t.Fatalf("uploaded end %d with remote.log.copy.disable=true, want %d (no upload)", got, uploaded)
	}
	res, err := p.Read(0, 1<<20, ReadUncommitted)
	if err != nil || len(res.Remote) == 0 {
		t.Fatalf("fetch at 0 with copying disabled: %d remote bytes, %v", len(res.Remote), err)
	}

	// A bounded total now bounds the local log too, uploaded or not, and
	// remote retention still applies to the remote part.
	tc.RetentionBytes = 8192
	m.applyTier(p, tc)
	m.cleanTiered(p, p.Tier())
	if l.Size() > 8192+4096 || p.LogStartOffset() <= uploaded {
		t.Fatalf("local log of %d bytes from %d with retention.bytes 8192 and uploads stopped at %d", l.Size(), p.LogStartOffset(), uploaded)
	}
	if st := p.Tier().Stats(); st.RemoteSegments != 0 {
		t.Fatalf("%d remote segments kept past retention.bytes", st.RemoteSegments)
	}
}

// TestTieredDisableDeletesRemote: remote.storage.enable turned off with
// remote.log.delete.on.disable=true (KIP-950) makes the leader delete the
// remote part, and the partition's log start becomes the local one, as
// Kafka's TopicConfigHandler does.
func TestTieredDisableDeletesRemote(t *testing.T) {
	p, _, m, store, tc := tieredLeader(t)
	for range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	local := p.LogStartOffset()
	if local == 0 {
		t.Fatal("local retention deleted nothing after the upload")
	}
	tc.RemoteStorageEnable, tc.RemoteLogDeleteOnDisable = false, true
	m.applyTier(p, tc)
	if p.Tier() != nil {
		t.Fatal("tier kept after remote.storage.enable was turned off")
	}
	wait.For(t, "the remote part to be deleted", func() bool {
		keys, err := store.List(context.Background(), "")
		return err == nil && len(keys) == 0
	})
	off, _, _, found, err := p.ListOffset(context.Background(), EarliestTimestamp, ReadUncommitted)
	if err != nil || !found || off != local {
		t.Fatalf("ListOffsets earliest = %d, %v, %v; want the local start %d", off, found, err, local)
	}
}
