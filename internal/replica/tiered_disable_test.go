package replica

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/storage"
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
	// As the Manager applies a change: the partition's config first (the
	// deletion's end applies it again).
	p.setConfig(&tc)
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

// heldDeletes is a store whose deletes wait until release is closed (or their
// context ends): a remote deletion still in progress.
type heldDeletes struct {
	remote.Store
	entered chan struct{} // a delete began
	release chan struct{}
}

func (s *heldDeletes) Delete(ctx context.Context, key string) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Delete(ctx, key)
}

// TestTieredReenableDuringRemoteDeletion: remote.storage.enable turned back on
// while the deletion of the remote part it was turned off with is still
// running must not let that deletion remove what the new tier uploads. Kafka
// deletes on the thread that applies config changes, so the next change waits
// for it; here the partition gets its new tier once the deletion has ended.
func TestTieredReenableDuringRemoteDeletion(t *testing.T) {
	p, _, m, store, tc := tieredLeader(t)
	held := &heldDeletes{Store: store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	m.opts.Remote = held
	p.tier.Store(nil)
	m.applyTier(p, tc) // a tier on the held store
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

	off := tc
	off.RemoteStorageEnable, off.RemoteLogDeleteOnDisable = false, true
	p.setConfig(&off)
	m.applyTier(p, off)
	<-held.entered
	local := p.LogStartOffset()

	// Turned back on, and more written, while the deletion hangs: whatever
	// tier the partition has meanwhile uploads and applies local retention.
	on := tc
	p.setConfig(&on)
	m.applyTier(p, on)
	appendN(60)
	var st *tierUploadState
	if tier := p.Tier(); tier != nil {
		st = &tierUploadState{tier: tier, epoch: -1}
		m.uploadOnce(context.Background(), p, st)
		m.cleanTiered(p, tier)
	}

	close(held.release)
	m.bg.Wait() // the deletion ended
	tier := p.Tier()
	if tier == nil {
		t.Fatal("no tier once the deletion ended, with remote.storage.enable=true")
	}
	if st == nil || st.tier != tier {
		m.uploadOnce(context.Background(), p, &tierUploadState{tier: tier, epoch: -1})
		m.cleanTiered(p, tier)
	}
	if p.LogStartOffset() <= local {
		t.Fatalf("local log start %d: local retention deleted nothing after the new tier's upload", p.LogStartOffset())
	}
	keys, err := store.List(context.Background(), "")
	if err != nil || len(keys) == 0 {
		t.Fatalf("store holds %d objects (%v) after the new tier uploaded", len(keys), err)
	}
	earliest, _, _, found, err := p.ListOffset(context.Background(), EarliestTimestamp, ReadUncommitted)
	if err != nil || !found || earliest != local {
		t.Fatalf("ListOffsets earliest = %d, %v, %v; want %d, where the log started when the tier was turned back on", earliest, found, err, local)
	}
	res, err := p.Read(local, 1<<20, ReadUncommitted)
	if err != nil || len(res.Remote) == 0 {
		t.Fatalf("fetch at %d, now remote: %d remote bytes, %v", local, len(res.Remote), err)
	}
}

// failingPuts is a store whose puts fail while fail is set: an object store
// that stopped taking writes.
type failingPuts struct {
	remote.Store
	fail atomic.Bool
}

func (s *failingPuts) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if s.fail.Load() {
		return errors.New("store down")
	}
	return s.Store.Put(ctx, key, r, size)
}

// TestTieredCopyDisableMovesLogStart: with remote.log.copy.disable=true,
// local retention deletes segments whether they were uploaded or not, and
// the partition's log start moves up with the local one, as Kafka's
// UnifiedLog does once copying stops (incrementStartOffset moves the log
// start, not only the local log start), whether or not the object store
// takes the manifest that drops the remote segments below it: they go on
// the next retention pass, and an upload after copying is enabled again
// starts the partition at its first segment. The old code kept the
// partition's start at the remote start until that manifest was written
// (and for good once an upload moved the remote end past the gap):
// ListOffsets earliest pointed at remote records below a gap of records
// deleted unuploaded, whose fetches were OFFSET_OUT_OF_RANGE.
func TestTieredCopyDisableMovesLogStart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		recover func(m *Manager, p *Partition, tc metadata.TopicConfig)
	}{
		{"a retention pass", func(m *Manager, p *Partition, _ metadata.TopicConfig) {
			m.cleanTiered(p, p.Tier())
		}},
		{"an upload once copying is enabled again", func(m *Manager, p *Partition, tc metadata.TopicConfig) {
			tc.RemoteLogCopyDisable = false
			p.setConfig(&tc)
			m.applyTier(p, tc)
			m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _, m, store, tc := tieredLeader(t)
			failing := &failingPuts{Store: store}
			m.opts.Remote = failing
			p.tier.Store(nil)
			m.applyTier(p, tc) // a tier on the failing store
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
			uploaded, below := p.Tier().UploadedEnd(), p.Tier().Stats().RemoteSegments
			if uploaded <= 0 || p.LogStartOffset() == 0 {
				t.Fatalf("after the first pass: uploaded end %d, local start %d", uploaded, p.LogStartOffset())
			}

			tc.RemoteLogCopyDisable, tc.LocalRetentionBytes, tc.RetentionBytes = true, -2, 8192
			p.setConfig(&tc)
			m.applyTier(p, tc)
			appendN(60)
			local := int64(-1)
			check := func(when string) {
				t.Helper()
				if local = p.LogStartOffset(); local <= uploaded {
					t.Fatalf("%s: local start %d, not past the uploaded end %d", when, local, uploaded)
				}
				earliest, _, _, found, err := p.ListOffset(context.Background(), EarliestTimestamp, ReadUncommitted)
				if err != nil || !found || earliest != local {
					t.Fatalf("%s: ListOffsets earliest = %d, %v, %v; want the local start %d", when, earliest, found, err, local)
				}
				for _, off := range []int64{0, uploaded} {
					if res, err := p.Read(off, 1<<20, ReadUncommitted); !errors.Is(err, storage.ErrOffsetOutOfRange) {
						t.Fatalf("%s: fetch at %d, below the log start %d: %d remote bytes, %v; want out of range", when, off, local, len(res.Remote), err)
					}
				}
			}
			failing.fail.Store(true)
			m.cleanTiered(p, p.Tier())
			check("the manifest write failed")
			failing.fail.Store(false)
			tt.recover(m, p, tc)
			check("the store is back")
			m.cleanTiered(p, p.Tier())
			if st := p.Tier().Stats(); st.RemoteStart < local || st.DeletedSegments < int64(below) {
				t.Errorf("remote part from %d, %d segments deleted; want from the log start %d, the %d below it deleted", st.RemoteStart, st.DeletedSegments, local, below)
			}
		})
	}
}
