package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// snapshotCall is one call of a TierConfig.ProducerSnapshot.
type snapshotCall struct {
	prev       string
	prevAt, at int64
}

// recordingSnapshots is a TierConfig.ProducerSnapshot whose payload names the
// offset it is as of, and which records its calls.
type recordingSnapshots struct{ calls []snapshotCall }

func (r *recordingSnapshots) snapshot(prev []byte, prevAt, at int64) ([]byte, error) {
	r.calls = append(r.calls, snapshotCall{string(prev), prevAt, at})
	return fmt.Appendf(nil, "state@%d", at), nil
}

// TestTierUploadsProducerSnapshots: every uploaded segment gets the producer
// state as of its next offset, built on the one uploaded with the segment
// before (kept from the last upload, or read from the store by a tier that
// loaded the manifest, as a new leader's); RemoteAuxState answers, for a
// leader's local log start, the end of the remote segment holding the offset
// before it and that segment's snapshot; retention deletes a segment's
// snapshot object with it.
func TestTierUploadsProducerSnapshots(t *testing.T) {
	store := memStore(t, vfs.NewMem())
	l, tier, rec := uploadedWithSnapshots(t, store)
	m, _ := tier.manifestCopy()
	if len(m.Segments) < 2 || len(rec.calls) != len(m.Segments) {
		t.Fatalf("%d segments uploaded, %d snapshots made", len(m.Segments), len(rec.calls))
	}
	for i, s := range m.Segments {
		want := snapshotCall{"", s.Base, s.Next}
		if i > 0 {
			want.prev = fmt.Sprintf("state@%d", s.Base)
		}
		if rec.calls[i] != want || s.SnapshotSize == 0 {
			t.Fatalf("segment %d [%d, %d): snapshot call %+v (size %d), want %+v", i, s.Base, s.Next, rec.calls[i], s.SnapshotSize, want)
		}
	}

	// A new leader's tier reads the last segment's snapshot to build on.
	appendN(t, l, 30, 3, 100, 2000, 0)
	next := NewTier(l, tier.cfg)
	var rec2 recordingSnapshots
	next.cfg.ProducerSnapshot = rec2.snapshot
	if err := next.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Upload(ctxTimeout(t), l.LogEndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	end := m.Segments[len(m.Segments)-1].Next
	if len(rec2.calls) == 0 || rec2.calls[0] != (snapshotCall{fmt.Sprintf("state@%d", end), end, rec2.calls[0].at}) {
		t.Fatalf("the new leader's first snapshot call %+v, want one built on the stored state@%d", rec2.calls, end)
	}

	m, _ = next.manifestCopy()
	mid := m.Segments[1]
	for _, tc := range []struct {
		name        string
		localStart  int64
		wantStart   int64
		wantPayload string
	}{
		{"a segment's end", mid.Next, mid.Next, fmt.Sprintf("state@%d", mid.Next)},
		{"inside a segment", mid.Base + 1, mid.Next, fmt.Sprintf("state@%d", mid.Next)},
		{"past the uploaded end", m.End + 1, m.End + 1, ""},
	} {
		start, payload, err := next.RemoteAuxState(ctxTimeout(t), tc.localStart)
		if err != nil || start != tc.wantStart || string(payload) != tc.wantPayload {
			t.Errorf("%s: RemoteAuxState(%d) = %d, %q, %v; want %d, %q", tc.name, tc.localStart, start, payload, err, tc.wantStart, tc.wantPayload)
		}
	}

	// Whole-log retention deletes the oldest segment's snapshot with it.
	first := m.Segments[0].key(tierPrefix, snapshotSuffix)
	next.SetRetention(TierRetention{Age: -1, Bytes: m.size() - m.Segments[0].Size, LocalAge: -1, LocalBytes: 4096})
	if _, removed, err := next.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 1); err != nil || removed == 0 {
		t.Fatalf("remote retention removed %d segments, %v", removed, err)
	}
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil || slices.Contains(keys, first) {
		t.Fatalf("%s left after retention deleted its segment: %v, %v", first, keys, err)
	}
}

// TestTierReadsLayoutTwo starts from a store written before layout 3
// (testdata/tier-layout2: two segments of 30 offsets, one .seg object each,
// under a layout-2 manifest, written at 72143ff from the batches appendN
// makes here). They read back, uploads go on in layout 3 with producer
// snapshots under a manifest that keeps the old segments as they are (no
// snapshot), and a follower starting over inside the old part gets no
// snapshot, as before.
func TestTierReadsLayoutTwo(t *testing.T) {
	store := memStore(t, vfs.NewMem())
	fixture := filepath.Join("testdata", "tier-layout2", filepath.FromSlash(tierPrefix))
	names, err := os.ReadDir(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		b, err := os.ReadFile(filepath.Join(fixture, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctxTimeout(t), tierPrefix+"/"+e.Name(), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := store.Get(ctxTimeout(t), tierPrefix+"/"+manifestKey, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, layout, err := unframeSideVersion(b); err != nil || layout != manifestLayoutOneObject {
		t.Fatalf("fixture manifest layout %d, %v; want %d", layout, err, manifestLayoutOneObject)
	}

	l, tier := tieredLog(t, store, 4096, nil)
	var rec recordingSnapshots
	tier.cfg.ProducerSnapshot = rec.snapshot
	want := appendN(t, l, 90, 3, 100, 1000, 0) // the fixture's 30 batches, then more
	uploadAndRetain(t, l, tier)
	if l.LogStartOffset() <= 60 {
		t.Fatalf("local log start %d: the old segments' offsets are still local", l.LogStartOffset())
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)

	b, err = store.Get(ctxTimeout(t), tierPrefix+"/"+manifestKey, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, layout, _ := unframeSideVersion(b)
	m, err := decodeManifest(b)
	if err != nil || layout != manifestLayout || len(m.Segments) < 3 {
		t.Fatalf("manifest after uploads: layout %d, %d segments, %v", layout, len(m.Segments), err)
	}
	for i, s := range m.Segments {
		if old := i < 2; old != (s.SnapshotSize == 0) || s.IndexSize == 0 {
			t.Fatalf("segment %d [%d, %d): snapshot size %d, index size %d", i, s.Base, s.Next, s.SnapshotSize, s.IndexSize)
		}
	}
	if rec.calls[0].prev != "" || rec.calls[0].prevAt != 60 {
		t.Fatalf("first snapshot call %+v, want one from the replica's own state at 60 (the old segment has none)", rec.calls[0])
	}
	if start, payload, err := tier.RemoteAuxState(ctxTimeout(t), 45); err != nil || start != 60 || payload != nil {
		t.Fatalf("RemoteAuxState(45) in the old part = %d, %q, %v; want 60 and no snapshot", start, payload, err)
	}
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(keys, func(k string) bool { return !strings.HasSuffix(k, snapshotSuffix) })); n != len(m.Segments)-2 {
		t.Fatalf("%d snapshot objects, want one per new segment (%d)", n, len(m.Segments)-2)
	}
}

// TestTierRemoteAuxStateDamagedSnapshot: a snapshot object that is missing or
// fails its checks is ErrSnapshotDamaged (an ErrRemoteCorrupt), returned with
// the offset to start at, so a follower can start there without it.
func TestTierRemoteAuxStateDamagedSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(store remote.Store, key string) error
	}{
		{"missing", func(store remote.Store, key string) error { return store.Delete(ctxTimeout(t), key) }},
		{"junk", func(store remote.Store, key string) error {
			return store.Put(ctxTimeout(t), key, strings.NewReader("junk"), 4)
		}},
		{"cut short", func(store remote.Store, key string) error {
			b, err := store.Get(ctxTimeout(t), key, 0, -1)
			if err != nil {
				return err
			}
			return store.Put(ctxTimeout(t), key, bytes.NewReader(b[:len(b)-1]), int64(len(b)-1))
		}},
		{"a flipped byte", func(store remote.Store, key string) error {
			b, err := store.Get(ctxTimeout(t), key, 0, -1)
			if err != nil {
				return err
			}
			b[len(b)-1] ^= 1
			return store.Put(ctxTimeout(t), key, bytes.NewReader(b), int64(len(b)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memStore(t, vfs.NewMem())
			_, tier, _ := uploadedWithSnapshots(t, store)
			m, _ := tier.manifestCopy()
			seg := m.Segments[0]
			if err := tc.damage(store, seg.key(tierPrefix, snapshotSuffix)); err != nil {
				t.Fatal(err)
			}
			start, payload, err := tier.RemoteAuxState(ctxTimeout(t), seg.Next)
			if !errors.Is(err, ErrSnapshotDamaged) || !errors.Is(err, ErrRemoteCorrupt) || start != seg.Next || payload != nil {
				t.Fatalf("RemoteAuxState(%d) = %d, %q, %v; want %d, no snapshot, %v", seg.Next, start, payload, err, seg.Next, ErrSnapshotDamaged)
			}
		})
	}
}

// uploadedWithSnapshots is a tiered log on store whose 30 batches are
// uploaded, each segment with the producer snapshot rec made for it.
func uploadedWithSnapshots(t *testing.T, store remote.Store) (*Log, *Tier, *recordingSnapshots) {
	t.Helper()
	l, tier := tieredLog(t, store, 1<<30, nil)
	rec := new(recordingSnapshots)
	tier.cfg.ProducerSnapshot = rec.snapshot
	appendN(t, l, 30, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	return l, tier, rec
}
