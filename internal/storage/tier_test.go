package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

const tierPrefix = "t/0"

// tieredLog opens a log with small segments and local retention of localBytes,
// and a tier over an in-memory file store.
func tieredLog(t *testing.T, store remote.Store, localBytes int64, cache *BlockCache) (*Log, *Tier) {
	t.Helper()
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, RetentionAge: -1})
	tier := NewTier(l, TierConfig{Store: store, Prefix: tierPrefix, Cache: cache, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: localBytes}})
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return l, tier
}

func memStore(t *testing.T, fsys vfs.FS) remote.Store {
	t.Helper()
	s, err := remote.NewFile(fsys, "/objects")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readTiered reads every batch from offset 0 to the log end: remote below the
// local start, local from there.
func readTiered(t *testing.T, l *Log, tier *Tier, maxBytes int) [][]byte {
	t.Helper()
	var out [][]byte
	off := tier.LogStartOffset()
	for off < l.LogEndOffset() {
		var b []byte
		if off < l.LogStartOffset() {
			var err error
			if b, off, err = tier.Read(ctxTimeout(t), off, maxBytes); err != nil {
				t.Fatalf("remote Read(%d): %v", off, err)
			}
		} else {
			c, err := l.Read(off, maxBytes, l.LogEndOffset())
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			b, err = c.Bytes()
			c.Release()
			if err != nil {
				t.Fatal(err)
			}
			off = c.NextOffset
		}
		it := batch.NewStoredIter(b)
		for it.Next() {
			out = append(out, bytes.Clone(it.Batch()))
		}
		if it.Err() != nil {
			t.Fatalf("batches before %d: %v", off, it.Err())
		}
	}
	return out
}

func uploadAndRetain(t *testing.T, l *Log, tier *Tier) {
	t.Helper()
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatalf("EnforceRetention: %v", err)
	}
}

// Writing far past local retention keeps the local log bounded while every
// batch still reads back from offset 0, in big and small reads.
func TestTierWriteFarPastLocalRetention(t *testing.T) {
	cache := NewBlockCache(8 << 10)
	l, tier := tieredLog(t, memStore(t, vfs.NewMem()), 8<<10, cache)
	var want [][]byte
	for range 20 {
		want = append(want, appendN(t, l, 10, 3, 100, 1000, 0)...)
		uploadAndRetain(t, l, tier)
		if l.Size() > 8<<10+4096 {
			t.Fatalf("local log holds %d bytes, local retention is 8 KiB + a segment", l.Size())
		}
	}
	if l.LogStartOffset() == 0 || tier.LogStartOffset() != 0 {
		t.Fatalf("local start %d, log start %d: want remote data from 0", l.LogStartOffset(), tier.LogStartOffset())
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
	sameBatches(t, readTiered(t, l, tier, 1), want)
	st := tier.Stats()
	if st.RemoteSegments == 0 || st.UploadErrors != 0 || st.RemoteStart != 0 {
		t.Fatalf("stats %+v", st)
	}
	if cs := cache.Stats(); cs.Hits == 0 || cs.Bytes > cs.Capacity {
		t.Fatalf("cache stats %+v", cs)
	}
}

// Whole-log retention deletes remote segments (manifest first, then objects).
func TestTierRemoteRetention(t *testing.T) {
	store := memStore(t, vfs.NewMem())
	l, tier := tieredLog(t, store, 4096, nil)
	tier.SetRetention(TierRetention{Age: -1, Bytes: 16 << 10, LocalAge: -1, LocalBytes: 4096})
	for range 20 {
		appendN(t, l, 10, 3, 100, 1000, 0)
		uploadAndRetain(t, l, tier)
	}
	st := tier.Stats()
	if st.DeletedSegments == 0 || st.RemoteStart == 0 {
		t.Fatalf("no remote segment deleted: %+v", st)
	}
	var remoteOnly int64
	m, _ := tier.manifestCopy()
	for _, s := range m.Segments {
		if s.Next <= l.LogStartOffset() {
			remoteOnly += s.Size
		}
	}
	if total := remoteOnly + l.Size(); total > 16<<10+4096 {
		t.Fatalf("whole log holds %d bytes with retention.bytes 16 KiB", total)
	}
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(m.Segments) + 1; len(keys) != want {
		t.Fatalf("store holds %d objects, want %d (1 per segment + manifest): %v", len(keys), want, keys)
	}
	if _, _, err := tier.Read(ctxTimeout(t), 0, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the remote start: %v", err)
	}
	defer func() {
		// A deleted topic's partition: every object goes.
		if err := tier.DeleteAll(ctxTimeout(t)); err != nil {
			t.Fatal(err)
		}
		if keys, err := store.List(ctxTimeout(t), ""); err != nil || len(keys) != 0 {
			t.Fatalf("after DeleteAll the store holds %v, %v", keys, err)
		}
	}()
	all := readTiered(t, l, tier, 1<<20)
	if h, _ := batch.ParseHeader(all[0]); h.BaseOffset != tier.LogStartOffset() {
		t.Fatalf("first batch at %d, log start %d", h.BaseOffset, tier.LogStartOffset())
	}
}

// flakyStore fails every operation while down, and Puts of keys ending in
// failPut while it is set.
type flakyStore struct {
	remote.Store
	down    atomic.Bool
	failPut atomic.Pointer[string]
}

var errFlaky = fmt.Errorf("%w: flaky store", remote.ErrUnavailable)

func (f *flakyStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.down.Load() {
		return errFlaky
	}
	if s := f.failPut.Load(); s != nil && strings.HasSuffix(key, *s) {
		return errFlaky
	}
	return f.Store.Put(ctx, key, r, size)
}

func (f *flakyStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if f.down.Load() {
		return nil, errFlaky
	}
	return f.Store.Get(ctx, key, off, n)
}

func (f *flakyStore) Delete(ctx context.Context, key string) error {
	if f.down.Load() {
		return errFlaky
	}
	return f.Store.Delete(ctx, key)
}

func (f *flakyStore) List(ctx context.Context, prefix string) ([]string, error) {
	if f.down.Load() {
		return nil, errFlaky
	}
	return f.Store.List(ctx, prefix)
}

// While the store is down, appends and local reads go on, uploads fail with a
// retriable error, local retention deletes nothing that is not uploaded, remote
// reads fail retriably; once it is back, uploads catch up and everything reads.
func TestTierStoreUnavailable(t *testing.T) {
	store := &flakyStore{Store: memStore(t, vfs.NewMem())}
	l, tier := tieredLog(t, store, 4096, nil)
	var want [][]byte
	want = append(want, appendN(t, l, 40, 3, 100, 1000, 0)...)
	uploadAndRetain(t, l, tier)
	remoteStart := l.LogStartOffset()
	if remoteStart == 0 {
		t.Fatal("nothing went remote")
	}
	store.down.Store(true)
	uploaded := tier.UploadedEnd()
	for range 5 {
		want = append(want, appendN(t, l, 20, 3, 100, 1000, 0)...)
		if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); !errors.Is(err, ErrRemoteUnavailable) {
			t.Fatalf("Upload with the store down: %v", err)
		}
		if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); !errors.Is(err, ErrRemoteUnavailable) {
			t.Fatalf("EnforceRetention with the store down: %v", err)
		}
		if l.LogStartOffset() > uploaded {
			t.Fatalf("local start %d passed the uploaded end %d", l.LogStartOffset(), uploaded)
		}
	}
	if _, _, err := tier.Read(ctxTimeout(t), 0, 1<<20); !errors.Is(err, ErrRemoteUnavailable) {
		t.Fatalf("remote read with the store down: %v", err)
	}
	if st := tier.Stats(); st.UploadErrors == 0 || st.UploadLagBytes == 0 || st.LastUploadError == "" {
		t.Fatalf("stats do not show the outage: %+v", st)
	}
	store.down.Store(false)
	uploadAndRetain(t, l, tier)
	if st := tier.Stats(); st.UploadLagBytes != 0 {
		t.Fatalf("upload lag %d after recovery", st.UploadLagBytes)
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
}

// A crash between the segment objects and the manifest leaves nothing that
// counts; the next upload (here by a new tier, as after a restart) writes the
// same range under the same names, and the orphan sweep removes leftovers.
func TestTierCrashMidUpload(t *testing.T) {
	store := &flakyStore{Store: memStore(t, vfs.NewMem())}
	l, tier := tieredLog(t, store, 4096, nil)
	want := appendN(t, l, 40, 3, 100, 1000, 0)
	manifestSuffix := "/" + manifestKey
	store.failPut.Store(&manifestSuffix)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err == nil {
		t.Fatal("upload committed without its manifest")
	}
	if tier.UploadedEnd() != 0 {
		t.Fatalf("uploaded end %d after a failed manifest write", tier.UploadedEnd())
	}
	if n, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || n != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("local retention deleted %d segments (start %d, %v) with nothing committed", n, l.LogStartOffset(), err)
	}
	store.failPut.Store(nil)

	restarted := NewTier(l, tier.cfg)
	if err := restarted.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if restarted.UploadedEnd() != 0 {
		t.Fatalf("a crashed upload counts: end %d", restarted.UploadedEnd())
	}
	uploadAndRetain(t, l, restarted)
	m, _ := restarted.manifestCopy()
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(m.Segments)+1 {
		t.Fatalf("%d objects for %d segments: %v", len(keys), len(m.Segments), keys)
	}
	sameBatches(t, readTiered(t, l, restarted, 1<<20), want)
}

// A new leader loads the manifest and carries on from its end: nothing is
// uploaded twice and no range is missed.
func TestTierNewLeaderContinues(t *testing.T) {
	store := memStore(t, vfs.NewMem())
	l, tier := tieredLog(t, store, 1<<30, nil)
	appendN(t, l, 40, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	end := tier.UploadedEnd()
	uploads := tier.Stats().Uploads
	if end == 0 {
		t.Fatal("nothing uploaded")
	}
	if err := l.AssignEpoch(1, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 40, 3, 100, 1000, 1)

	leader := NewTier(l, tier.cfg)
	if err := leader.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if leader.UploadedEnd() != end {
		t.Fatalf("new leader starts at %d, manifest ends at %d", leader.UploadedEnd(), end)
	}
	if _, err := leader.Upload(ctxTimeout(t), l.LogEndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	// A follower's tier learns the uploads from the manifest and deletes locally
	// only what is uploaded.
	follower := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, RetentionAge: -1})
	ftier := NewTier(follower, TierConfig{Store: store, Prefix: tierPrefix, Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: 0}})
	if _, err := ftier.EnforceLocalRetention(l.LogEndOffset()); !errors.Is(err, ErrRemoteUnavailable) {
		t.Fatalf("follower retention before Load: %v", err)
	}
	if err := ftier.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if ftier.UploadedEnd() != leader.UploadedEnd() {
		t.Fatalf("follower sees uploads to %d, leader %d", ftier.UploadedEnd(), leader.UploadedEnd())
	}

	m, _ := leader.manifestCopy()
	if m.Segments[0].Base != 0 || m.LeaderEpoch != 1 {
		t.Fatalf("manifest %+v", m)
	}
	for i := 1; i < len(m.Segments); i++ {
		if m.Segments[i].Base != m.Segments[i-1].Next {
			t.Fatalf("segments %d and %d not contiguous: %+v", i-1, i, m.Segments)
		}
	}
	if got := int64(len(m.Segments)); got != uploads+leader.Stats().Uploads {
		t.Fatalf("%d segments in the manifest after %d + %d uploads", got, uploads, leader.Stats().Uploads)
	}
	last := m.Segments[len(m.Segments)-1]
	if e := last.Epochs[len(last.Epochs)-1]; e.Epoch != 1 {
		t.Fatalf("last segment's epochs %+v, want epoch 1", last.Epochs)
	}
	// The deposed leader's tier is fenced, before and after it reloads.
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("old leader upload: %v, want ErrFencedLeaderEpoch", err)
	}
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("old leader upload after reload: %v, want ErrFencedLeaderEpoch", err)
	}
}

// A corrupt or missing remote object is detected and never served.
func TestTierCorruptObject(t *testing.T) {
	fsys := vfs.NewMem()
	store := memStore(t, fsys)
	l, tier := tieredLog(t, store, 4096, nil)
	appendN(t, l, 40, 3, 100, 1000, 0)
	uploadAndRetain(t, l, tier)
	m, _ := tier.manifestCopy()
	key := m.Segments[0].dataKey(tierPrefix)
	data, err := store.Get(ctxTimeout(t), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0xff
	if err := store.Put(ctxTimeout(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for off := int64(0); off < m.Segments[0].Next; {
		b, next, err := tier.Read(ctxTimeout(t), off, 1)
		if errors.Is(err, ErrRemoteCorrupt) {
			bad++
			off++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if it := batch.NewStoredIter(b); !it.Next() || it.Err() != nil {
			t.Fatalf("served bytes at %d do not verify: %v", off, it.Err())
		}
		off = next
	}
	if bad == 0 || tier.Stats().CorruptBlocks == 0 {
		t.Fatal("corruption not detected")
	}
	if err := store.Delete(ctxTimeout(t), m.Segments[1].dataKey(tierPrefix)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tier.Read(ctxTimeout(t), m.Segments[1].Base, 1<<20); !errors.Is(err, ErrRemoteUnavailable) {
		t.Fatalf("read of a missing object: %v", err)
	}
}

func TestManifestDecodeRejectsDamage(t *testing.T) {
	m := manifest{LeaderEpoch: 3, Start: 0, End: 20, Segments: []remoteSegment{
		{Base: 0, Next: 10, Size: 100, MaxTimestamp: 5, Epochs: []EpochEntry{{0, 0}}},
		{Base: 10, Next: 20, Size: 100, MaxTimestamp: 9, Epochs: []EpochEntry{{0, 10}, {3, 15}}},
	}}
	b := m.encode()
	got, err := decodeManifest(b)
	if err != nil || got.End != 20 || len(got.Segments) != 2 || got.Segments[1].Epochs[1].Epoch != 3 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		if _, err := decodeManifest(d); err == nil {
			t.Fatalf("flipped byte %d decoded", i)
		}
	}
	if _, err := decodeManifest(b[:len(b)-1]); err == nil {
		t.Fatal("truncated manifest decoded")
	}
}

// Timestamp lookups find remote records.
func TestTierOffsetForTimestamp(t *testing.T) {
	l, tier := tieredLog(t, memStore(t, vfs.NewMem()), 4096, nil)
	appendN(t, l, 40, 3, 100, 1000, 0) // batch i holds timestamps 1000+i .. 1000+i+2
	uploadAndRetain(t, l, tier)
	if l.LogStartOffset() < 30 {
		t.Fatalf("local start %d: too little went remote", l.LogStartOffset())
	}
	for _, tc := range []struct{ ts, off int64 }{{0, 0}, {1000, 0}, {1002, 2}, {1005, 11}} {
		off, ts, ok, err := tier.OffsetForTimestamp(ctxTimeout(t), tc.ts, anyRecord)
		if err != nil || !ok || off != tc.off || ts < tc.ts {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want offset %d", tc.ts, off, ts, ok, err, tc.off)
		}
	}
	if _, _, ok, err := tier.OffsetForTimestamp(ctxTimeout(t), 1_000_000, anyRecord); ok || err != nil {
		t.Errorf("a timestamp after every record: ok %v, %v", ok, err)
	}
}

// DeleteRecords below the local start moves the remote start; retention then
// deletes the remote segments wholly below it.
func TestTierDeleteRecords(t *testing.T) {
	l, tier, want, cut := tierWithRecordsDeleted(t)
	if tier.LogStartOffset() != cut {
		t.Fatalf("log start %d after DeleteRecords(%d)", tier.LogStartOffset(), cut)
	}
	if _, _, err := tier.Read(ctxTimeout(t), cut-1, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	if _, removed, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || removed != 1 {
		t.Fatalf("retention after DeleteRecords removed %d remote segments, %v; want 1", removed, err)
	}
	got := readTiered(t, l, tier, 1<<20)
	// The batch holding cut is still served whole, as Kafka serves it.
	sameBatches(t, got, want[len(want)-len(got):])
	if h, _ := batch.ParseHeader(got[0]); h.BaseOffset > cut || h.NextOffset() <= cut {
		t.Fatalf("first batch [%d, %d) does not hold the start %d", h.BaseOffset, h.NextOffset(), cut)
	}
}

// tierWithRecordsDeleted uploads a log of several segments, keeps the newest
// locally, and moves the start by DeleteRecords into the second remote
// segment, at cut; want is every batch appended.
func tierWithRecordsDeleted(t *testing.T) (l *Log, tier *Tier, want [][]byte, cut int64) {
	t.Helper()
	l, tier = tieredLog(t, memStore(t, vfs.NewMem()), 4096, nil)
	want = appendN(t, l, 40, 3, 100, 1000, 0)
	uploadAndRetain(t, l, tier)
	m, _ := tier.manifestCopy()
	cut = m.Segments[1].Base + 1 // inside the second segment
	if err := tier.DeleteRecords(ctxTimeout(t), cut, 0); err != nil {
		t.Fatal(err)
	}
	return l, tier, want, cut
}

// TestTierLoadsAfterDeleteRecords: a manifest whose start DeleteRecords moved
// into a remote segment loads (a restart, a new leader) before the next
// retention pass deletes the segments below the start. It used to be refused
// as corrupt (segments had to start at or after the start), which left the
// tier unable to load, and so to upload or apply any retention, for good.
// TestTierMatchesModel found it.
func TestTierLoadsAfterDeleteRecords(t *testing.T) {
	l, tier, want, cut := tierWithRecordsDeleted(t)
	restarted := NewTier(l, tier.cfg)
	if err := restarted.Load(ctxTimeout(t)); err != nil {
		t.Fatalf("Load after DeleteRecords(%d): %v", cut, err)
	}
	if got := restarted.LogStartOffset(); got != cut {
		t.Fatalf("log start %d after a reload, want %d", got, cut)
	}
	got := readTiered(t, l, restarted, 1<<20)
	sameBatches(t, got, want[len(want)-len(got):])
	if _, removed, err := restarted.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || removed != 1 {
		t.Fatalf("retention after the reload removed %d remote segments, %v; want 1", removed, err)
	}
}

// TestTierDeleteRecordsPastUploadedEnd: DeleteRecords at an offset past the
// uploaded end, or with nothing uploaded, moves the partition's log start to
// that offset, and it stays there after the next upload (which starts with the
// batch holding it) and a reload. The start used to stop at the uploaded end,
// where no segment lies (a fetch there was out of range, and a consumer reset
// to earliest asked again), or to fall back to the base of the first batch
// uploaded. TestTierMatchesModel found it.
func TestTierDeleteRecordsPastUploadedEnd(t *testing.T) {
	for _, uploadFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("uploaded=%v", uploadFirst), func(t *testing.T) {
			l, tier := tieredLog(t, memStore(t, vfs.NewMem()), 1<<30, nil)
			want := appendN(t, l, 40, 3, 100, 1000, 0)
			if uploadFirst {
				if _, err := tier.Upload(ctxTimeout(t), 45, 0); err != nil {
					t.Fatal(err)
				}
			}
			end := tier.UploadedEnd()
			cut := end + 3*5 + 1 // inside a batch above the uploaded end
			if err := tier.DeleteRecords(ctxTimeout(t), cut, 0); err != nil {
				t.Fatal(err)
			}
			if err := l.DeleteRecords(cut); err != nil {
				t.Fatal(err)
			}
			if got := tier.LogStartOffset(); got != cut {
				t.Fatalf("log start %d after DeleteRecords(%d) (uploaded end %d), want %d", got, cut, end, cut)
			}
			if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
				t.Fatal(err)
			}
			if got := tier.LogStartOffset(); got != cut {
				t.Fatalf("log start %d after an upload, want %d", got, cut)
			}
			reloaded := NewTier(l, tier.cfg)
			if err := reloaded.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			if got := reloaded.LogStartOffset(); got != cut {
				t.Fatalf("log start %d after a reload, want %d", got, cut)
			}
			uploadAndRetain(t, l, reloaded)
			got := readTiered(t, l, reloaded, 1<<20)
			sameBatches(t, got, want[cut/3:])
		})
	}
}

// TestTierLoadMovesLocalStartUp: DeleteRecords on a tiered partition writes
// the manifest's new start, then moves the local log start. A power cut
// between the two steps (here: the manifest step alone, then a power cut of
// the log's disk) left the local start below the manifest's for good: the old
// Load took the manifest as it was, the local log kept serving the deleted
// records between the two starts, and when nothing remote lay below the local
// start the tier even answered the old local start as the partition's log
// start. A replica whose log ends below the manifest's start (a follower that
// lags) kept every record it had. Load now moves the local start up to the
// manifest's, as far as the log end, before it installs the manifest, and the
// move survives the next power cut.
func TestTierLoadMovesLocalStartUp(t *testing.T) {
	const batches = 40 // of 3 records: offsets [0, 120)
	for _, tt := range []struct {
		name       string
		localBytes int64 // local retention
		upload     bool  // upload (and retain locally) before DeleteRecords
		// cut picks the DeleteRecords offset from the log and tier before it.
		cut func(l *Log, tier *Tier) int64
		// replicaBatches, when not 0, reloads on another replica's log that
		// holds only the first replicaBatches batches.
		replicaBatches int
	}{
		{"nothing uploaded", 1 << 30, false, func(*Log, *Tier) int64 { return 3*10 + 1 }, 0},
		{"uploaded, all still local", 1 << 30, true, func(l *Log, tier *Tier) int64 {
			m, _ := tier.manifestCopy()
			return m.Segments[1].Base + 1
		}, 0},
		{"past the uploaded end", 1 << 30, true, func(l *Log, tier *Tier) int64 { return tier.UploadedEnd() + 3*2 + 1 }, 0},
		{"above the local start after local retention", 4096, true, func(l *Log, tier *Tier) int64 { return l.LogStartOffset() + 3*2 + 1 }, 0},
		{"a replica whose log ends below the cut", 1 << 30, false, func(*Log, *Tier) int64 { return 3*20 + 1 }, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{SegmentBytes: 4096, RetentionAge: -1}
			store := memStore(t, vfs.NewMem())
			tcfg := TierConfig{Store: store, Prefix: tierPrefix, BlockBytes: 1024,
				Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: tt.localBytes}}
			disk := vfs.NewMem()
			l := openLog(t, disk, cfg)
			tier := NewTier(l, tcfg)
			if err := tier.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			want := appendN(t, l, batches, 3, 100, 1000, 0)
			durable(t, l)
			if tt.upload {
				uploadAndRetain(t, l, tier)
			}
			cut := tt.cut(l, tier)
			before := l.LogStartOffset()
			if cut <= before || cut >= l.LogEndOffset() || cut%3 == 0 {
				t.Fatalf("cut %d: want it inside a batch of the local log [%d, %d)", cut, before, l.LogEndOffset())
			}
			// The crash: the manifest's start moved, the local one did not.
			if err := tier.DeleteRecords(ctxTimeout(t), cut, 0); err != nil {
				t.Fatal(err)
			}
			if tt.replicaBatches > 0 {
				disk = vfs.NewMem()
				l = openLog(t, disk, cfg)
				want = appendN(t, l, tt.replicaBatches, 3, 100, 1000, 0)
				durable(t, l)
			}
			powerCut := func() {
				t.Helper()
				crashed := disk.CrashClone()
				_ = l.Close()
				disk = crashed
				l = openLog(t, disk, cfg)
				if from, stale := l.StaleAbortIndex(); stale { // as a partition does: no transactions here
					if err := l.RebuildAbortIndex(from, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			powerCut()
			tier = NewTier(l, tcfg)
			if err := tier.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			wantStart := min(cut, l.LogEndOffset())
			// check checks the log start; local retention (retained) may
			// have moved the local start further.
			check := func(when string, retained bool) {
				t.Helper()
				if got := l.LogStartOffset(); got != wantStart && (!retained || got < wantStart) {
					t.Fatalf("%s: local log start %d, want %d (manifest start %d, log end %d)", when, got, wantStart, cut, l.LogEndOffset())
				}
				if got := tier.LogStartOffset(); got != wantStart {
					t.Fatalf("%s: log start %d, want %d", when, got, wantStart)
				}
				if _, err := l.Read(before, 1<<20, l.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("%s: local read at the old start %d: %v, want out of range", when, before, err)
				}
				got := readTiered(t, l, tier, 1<<20)
				sameBatches(t, got, want[min(cut/3, int64(len(want))):])
			}
			check("after the reload", false)
			powerCut() // the move is durable: no load needed to keep it
			if got := l.LogStartOffset(); got != wantStart {
				t.Fatalf("after another power cut: local log start %d, want %d", got, wantStart)
			}
			tier = NewTier(l, tcfg)
			if err := tier.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			if tt.replicaBatches == 0 {
				uploadAndRetain(t, l, tier) // uploads and retention go on from there
			}
			check("after another power cut and an upload pass", true)
		})
	}
}

// durable waits until l's appends are on disk: a power cut keeps them.
func durable(t *testing.T, l *Log) {
	t.Helper()
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
}

// TestTierSweepSparesSegmentAcrossEnd: after DeleteRecords past the uploaded
// end, the next segment starts below the new end (with the batch holding the
// offset). An orphan sweep spares it although the sweeping tier's manifest
// does not name it: another leader, here a deposed one that has not yet
// learned of its successor, may just have committed it.
func TestTierSweepSparesSegmentAcrossEnd(t *testing.T) {
	store := memStore(t, vfs.NewMem())
	l, deposed := tieredLog(t, store, 1<<30, nil)
	want := appendN(t, l, 40, 3, 100, 1000, 0)
	cut := int64(3*5 + 1) // inside a batch
	if err := deposed.DeleteRecords(ctxTimeout(t), cut, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(1, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	leader := NewTier(l, deposed.cfg)
	if err := leader.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := deposed.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || n == 0 {
		t.Fatalf("deposed leader's upload: %d segments, %v", n, err)
	}
	if _, _, err := leader.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 1); err != nil { // sweeps: the first pass after Load
		t.Fatal(err)
	}
	reloaded := NewTier(l, deposed.cfg)
	if err := reloaded.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for off := cut; off < reloaded.UploadedEnd(); {
		b, next, err := reloaded.Read(ctxTimeout(t), off, 1<<20)
		if err != nil {
			t.Fatalf("remote Read(%d): %v", off, err)
		}
		for it := batch.NewStoredIter(b); it.Next(); {
			got = append(got, bytes.Clone(it.Batch()))
		}
		off = next
	}
	if len(got) == 0 {
		t.Fatal("nothing uploaded")
	}
	sameBatches(t, got, want[cut/3:cut/3+int64(len(got))])
}

// TestManifestAbortedTransactions: the manifest carries the remote part's
// aborted transactions, drops those below its start, and a manifest written
// before they existed (no trailer) still decodes.
func TestManifestAbortedTransactions(t *testing.T) {
	m := manifest{LeaderEpoch: 1, Start: 10, End: 20, Segments: []remoteSegment{
		{Base: 10, Next: 20, Size: 100, MaxTimestamp: 9, Epochs: []EpochEntry{{1, 10}}},
	}, Aborted: []AbortedTxn{{ProducerID: 4, FirstOffset: 2, LastOffset: 5}, {ProducerID: 5, FirstOffset: 8, LastOffset: 12}, {ProducerID: 4, FirstOffset: 13, LastOffset: 19}}}
	got, err := decodeManifest(m.encode())
	if want := m.Aborted[1:]; err != nil || !slices.Equal(got.Aborted, want) {
		t.Fatalf("round trip: aborted %v, %v; want %v (the one below the start dropped)", got.Aborted, err, want)
	}
	b := m.encode()
	payload, layout, err := unframeSideVersion(b)
	if err != nil {
		t.Fatal(err)
	}
	old := frameSideVersion(payload[:len(payload)-4-2*abortedEntrySize], layout) // as written before the trailer
	if got, err := decodeManifest(old); err != nil || len(got.Aborted) != 0 || len(got.Segments) != 1 {
		t.Fatalf("a manifest without aborted transactions: %+v, %v", got, err)
	}
	bad := m
	bad.Aborted = []AbortedTxn{{ProducerID: 4, FirstOffset: 13, LastOffset: 19}, {ProducerID: 5, FirstOffset: 8, LastOffset: 12}}
	if _, err := decodeManifest(bad.encode()); err == nil {
		t.Fatal("aborted transactions out of marker order decoded")
	}
}

// countingStore counts manifest writes and fails every segment data Put after
// the first okLogPuts while limited is set.
type countingStore struct {
	remote.Store
	manifestPuts atomic.Int64
	logPuts      atomic.Int64
	limited      atomic.Bool
	okLogPuts    int64
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	switch {
	case strings.HasSuffix(key, "/"+manifestKey):
		c.manifestPuts.Add(1)
	case strings.HasSuffix(key, segObjectSuffix):
		if c.logPuts.Add(1) > c.okLogPuts && c.limited.Load() {
			return errFlaky
		}
	}
	return c.Store.Put(ctx, key, r, size)
}

// An upload pass commits its segments in batches: one manifest write per
// uploadCommitSegments segments and one for the rest. When a Put fails midway,
// the segments put before it are still committed, and the next pass carries on
// from them.
func TestTierUploadCommitsInBatches(t *testing.T) {
	store := &countingStore{Store: memStore(t, vfs.NewMem())}
	l, tier := tieredLog(t, store, 1<<30, nil)
	want := appendN(t, l, 10*(uploadCommitSegments+6), 3, 100, 1000, 0)
	n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n <= uploadCommitSegments || n > 2*uploadCommitSegments {
		t.Fatalf("uploaded %d segments; the test wants between one and two commits' worth", n)
	}
	if got := store.manifestPuts.Load(); got != 2 {
		t.Fatalf("%d manifest writes for %d segments, want 2", got, n)
	}

	want = append(want, appendN(t, l, 100, 3, 100, 1000, 0)...)
	store.manifestPuts.Store(0)
	store.okLogPuts = store.logPuts.Load() + 3
	store.limited.Store(true)
	end := tier.UploadedEnd()
	n, err = tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
	if !errors.Is(err, ErrRemoteUnavailable) || n != 3 || store.manifestPuts.Load() != 1 {
		t.Fatalf("upload failing at the 4th segment: %d committed with %d manifest writes, %v; want 3, 1 and ErrRemoteUnavailable",
			n, store.manifestPuts.Load(), err)
	}
	reloaded := NewTier(l, tier.cfg)
	if err := reloaded.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if got := reloaded.UploadedEnd(); got != tier.UploadedEnd() || got <= end {
		t.Fatalf("stored manifest ends at %d, tier at %d (was %d)", got, tier.UploadedEnd(), end)
	}
	store.limited.Store(false)
	uploadAndRetain(t, l, reloaded)
	if st := reloaded.Stats(); st.UploadLagBytes != 0 {
		t.Fatalf("upload lag %d after the retry", st.UploadLagBytes)
	}
	sameBatches(t, readTiered(t, l, reloaded, 1<<20), want)
}

// TestTierReadsTwoObjectLayout starts from a store written before layout 2
// (testdata/tier-layout1: two segments of 30 offsets uploaded as a .log and an
// .index object each, under a layout-1 manifest, by the code of that time from
// the batches appendN makes here). The old segments read back, uploads go on
// in layout 2 (one object per segment) under a manifest that keeps the old
// segments as they are, and retention deletes both objects of an old segment.
func TestTierReadsTwoObjectLayout(t *testing.T) {
	fsys := vfs.NewMem()
	store := memStore(t, fsys)
	fixture := filepath.Join("testdata", "tier-layout1", filepath.FromSlash(tierPrefix))
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
	stored := func() (manifest, uint16) {
		t.Helper()
		b, err := store.Get(ctxTimeout(t), tierPrefix+"/"+manifestKey, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		_, layout, err := unframeSideVersion(b)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		return m, layout
	}
	if m, layout := stored(); layout != manifestLayoutTwoObjects || m.End != 60 || len(m.Segments) != 2 {
		t.Fatalf("fixture manifest: layout %d, end %d, %d segments; want layout 1, end 60, 2 segments", layout, m.End, len(m.Segments))
	}

	l, tier := tieredLog(t, store, 4096, nil)
	want := appendN(t, l, 90, 3, 100, 1000, 0) // the fixture's 30 batches, then more
	uploadAndRetain(t, l, tier)
	if l.LogStartOffset() <= 60 {
		t.Fatalf("local log start %d: the old segments' offsets are still local", l.LogStartOffset())
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
	sameBatches(t, readTiered(t, l, tier, 1), want)

	m, layout := stored()
	if layout != manifestLayout || len(m.Segments) < 3 {
		t.Fatalf("manifest after uploads: layout %d, %d segments", layout, len(m.Segments))
	}
	for i, s := range m.Segments {
		if old := i < 2; old != (s.IndexSize == 0) {
			t.Fatalf("segment %d [%d, %d) has index size %d", i, s.Base, s.Next, s.IndexSize)
		}
	}
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*2 + (len(m.Segments) - 2) + 1; len(keys) != want {
		t.Fatalf("%d objects, want %d (2 per old segment, 1 per new one, the manifest): %v", len(keys), want, keys)
	}

	// Whole-log retention deletes the old segments first: both their objects.
	tier.SetRetention(TierRetention{Age: -1, Bytes: l.Size() + m.Segments[len(m.Segments)-1].Size, LocalAge: -1, LocalBytes: 4096})
	if _, removed, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil || removed < 2 {
		t.Fatalf("remote retention removed %d segments, %v; want at least the 2 old ones", removed, err)
	}
	keys, err = store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, logSuffix) || strings.HasSuffix(k, indexSuffix) {
			t.Fatalf("%s left after retention deleted its segment: %v", k, keys)
		}
	}
	got := readTiered(t, l, tier, 1<<20)
	sameBatches(t, got, want[len(want)-len(got):])
}

// TestTierUploadFileOps counts what an upload pass does to a file:// store's
// filesystem, whatever the machine's load: per segment one object created and
// renamed into place, with no fsync; per committed batch one syncfs for the
// segments' bytes and names, then the manifest created, fsynced and renamed,
// and one directory fsync for its name (before: an fsync per segment object
// and a directory fsync for their names; before layout 2 and
// remote.NameSyncer: two objects and two directory fsyncs per segment). The
// segments are made durable before the manifest's rename.
func TestTierUploadFileOps(t *testing.T) {
	var creates, syncs, renames, syncDirs, syncFSs atomic.Int64
	var mu sync.Mutex
	var order []string // renames, syncfs and directory fsyncs, in order
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if !strings.HasPrefix(op.Path, "/objects") {
			return nil
		}
		mu.Lock()
		switch op.Kind {
		case vfs.OpRename:
			order = append(order, "rename "+path.Base(op.To))
		case vfs.OpSyncDir:
			order = append(order, "syncdir")
		case vfs.OpSyncFS:
			order = append(order, "syncfs")
		}
		mu.Unlock()
		switch op.Kind {
		case vfs.OpCreate:
			creates.Add(1)
		case vfs.OpSync:
			syncs.Add(1)
		case vfs.OpRename:
			renames.Add(1)
		case vfs.OpSyncDir:
			syncDirs.Add(1)
		case vfs.OpSyncFS:
			syncFSs.Add(1)
		}
		return nil
	}))
	store := memStore(t, fsys)
	l, tier := tieredLog(t, store, 1<<30, nil)
	appendN(t, l, 20, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil { // makes the prefix's directories
		t.Fatal(err)
	}
	appendN(t, l, 300, 3, 100, 1000, 0)
	creates.Store(0)
	syncs.Store(0)
	renames.Store(0)
	syncDirs.Store(0)
	syncFSs.Store(0)
	mu.Lock()
	order = nil
	mu.Unlock()
	n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 || n >= uploadCommitSegments {
		t.Fatalf("uploaded %d segments, want 20 to %d (one batch)", n, uploadCommitSegments-1)
	}
	objects := int64(n + 1) // the segments and the manifest
	if creates.Load() != objects || renames.Load() != objects {
		t.Fatalf("%d segments: %d files created, %d renamed; want %d each", n, creates.Load(), renames.Load(), objects)
	}
	if syncs.Load() != 1 || syncDirs.Load() != 1 || syncFSs.Load() != 1 {
		t.Fatalf("%d segments in one batch: %d file fsyncs, %d directory fsyncs, %d syncfs; want 1 each (the manifest's, its name's, the segments')",
			n, syncs.Load(), syncDirs.Load(), syncFSs.Load())
	}
	mu.Lock()
	got := strings.Join(order, "\n")
	mu.Unlock()
	const commit = "\nsyncfs\nrename manifest\nsyncdir"
	if segments, ok := strings.CutSuffix(got, commit); !ok || strings.Contains(segments, "sync") || strings.Contains(segments, "manifest") {
		t.Fatalf("renames and syncs: want the segments', one syncfs, the manifest's, one directory fsync; got\n%s", got)
	}
	keys, err := store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tier.manifestCopy()
	if len(keys) != len(m.Segments)+1 {
		t.Fatalf("%d objects for %d segments: %v", len(keys), len(m.Segments), keys)
	}
}

// After a power cut every segment the manifest names reads back: the batch's
// object names are made durable before the manifest that names them.
func TestTierUploadSurvivesPowerCut(t *testing.T) {
	mem := vfs.NewMem()
	l, tier := tieredLog(t, memStore(t, mem), 1<<30, nil)
	want := appendN(t, l, 100, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	end := tier.UploadedEnd()
	after := NewTier(l, TierConfig{Store: memStore(t, mem.CrashClone()), Prefix: tierPrefix, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: -1}})
	if err := after.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if after.UploadedEnd() != end || end == 0 {
		t.Fatalf("uploaded end %d after the power cut, %d before", after.UploadedEnd(), end)
	}
	got := readRemote(t, after, end)
	sameBatches(t, got, want[:len(got)])
	if h, _ := batch.ParseHeader(got[len(got)-1]); h.NextOffset() != end {
		t.Fatalf("read up to %d, uploaded end %d", h.NextOffset(), end)
	}
}
