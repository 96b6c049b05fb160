package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// linkedTier opens a log and a file store on one MemFS, as a file:// store on
// the data dir's filesystem: uploads link the segments. written counts the bytes
// written to files under the store's directory.
func linkedTier(t *testing.T, localBytes int64) (mem *vfs.MemFS, l *Log, tier *Tier, written *atomic.Int64) {
	t.Helper()
	mem = vfs.NewMem()
	written = new(atomic.Int64)
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite && strings.HasPrefix(op.Path, "/objects/") {
			written.Add(int64(op.Len))
		}
		return nil
	}))
	l = openLog(t, fsys, Config{SegmentBytes: 4096, RetentionAge: -1})
	tier = NewTier(l, TierConfig{Store: memStore(t, fsys), Prefix: tierPrefix, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: localBytes}})
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	return mem, l, tier, written
}

// readRemote reads [0, end) from the tier's store only.
func readRemote(t *testing.T, tier *Tier, end int64) [][]byte {
	t.Helper()
	var got [][]byte
	for off := int64(0); off < end; {
		b, next, err := tier.Read(ctxTimeout(t), off, 1<<20)
		if err != nil {
			t.Fatalf("remote Read(%d): %v", off, err)
		}
		it := batch.NewStoredIter(b)
		for it.Next() {
			got = append(got, bytes.Clone(it.Batch()))
		}
		if it.Err() != nil {
			t.Fatalf("batches at %d: %v", off, it.Err())
		}
		off = next
	}
	return got
}

// With a file store on the log's filesystem an upload links each sealed
// segment: the store's data object is the segment file under a second name,
// no segment byte is written again, and the segments read back from the store
// after local retention removed their local names, and after a power cut.
func TestTierLinksSegmentsOnOneFilesystem(t *testing.T) {
	mem, l, tier, written := linkedTier(t, 8<<10)
	want := appendN(t, l, 200, 3, 100, 1000, 0)
	n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tier.manifestCopy()
	if n < 10 || len(m.Segments) != n {
		t.Fatalf("uploaded %d segments, manifest holds %d", n, len(m.Segments))
	}
	var segBytes int64
	for _, s := range m.Segments {
		segBytes += s.Size
		if s.IndexSize != 0 {
			t.Fatalf("segment %d uploaded as one object (index size %d), want a link and an index object", s.Base, s.IndexSize)
		}
		links, err := mem.Links(filepath.Join("/objects", s.key(tierPrefix, logSuffix)))
		if err != nil || links != 2 {
			t.Fatalf("segment %d's data object has %d names (%v), want 2: the local segment and the object", s.Base, links, err)
		}
	}
	// Index objects and the manifest only: a few dozen bytes per segment.
	if w := written.Load(); w*10 > segBytes {
		t.Fatalf("the upload wrote %d bytes to the store for %d bytes of segments", w, segBytes)
	}
	keys, err := tier.cfg.Store.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, segObjectSuffix) {
			t.Fatalf("object %s copies a segment", k)
		}
	}

	end := tier.UploadedEnd()
	img := mem.CrashClone()
	if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("local retention deleted nothing")
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
	for _, s := range m.Segments {
		if _, err := mem.Stat(filepath.Join(testDir, segmentName(s.Base, logSuffix))); err == nil {
			continue // still local
		}
		// The local name goes once the segment's last reader lets go of it.
		var links int
		wait.Within(t, 10*time.Second, fmt.Sprintf("segment %d's local name to go", s.Base), func() bool {
			links, err = mem.Links(filepath.Join("/objects", s.key(tierPrefix, logSuffix)))
			return err == nil && links == 1
		})
	}

	// The power-cut image from before retention: the links are durable.
	after := NewTier(l, TierConfig{Store: memStore(t, img), Prefix: tierPrefix, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: -1}})
	if err := after.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if after.UploadedEnd() != end {
		t.Fatalf("uploaded end %d after the power cut, %d before", after.UploadedEnd(), end)
	}
	got := readRemote(t, after, end)
	sameBatches(t, got, want[:len(got)])
}

// A truncation that cuts into a linked segment (an unclean election) leaves
// the store's object as it was: the segment gets a copy of its file first,
// which is cut and then takes the new leader's appends.
func TestTruncateCopiesLinkedSegment(t *testing.T) {
	mem, l, tier, _ := linkedTier(t, 1<<30)
	want := appendN(t, l, 100, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	m, _ := tier.manifestCopy()
	if len(m.Segments) < 4 {
		t.Fatalf("%d segments uploaded", len(m.Segments))
	}
	cutSeg := m.Segments[2]
	cut := cutSeg.Base + (cutSeg.Next-cutSeg.Base)/2
	// A reader of the segment from before the cut keeps its bytes.
	c, err := l.Read(cutSeg.Base, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.SegmentsUnshared != 1 {
		t.Fatalf("segments copied before the cut: %d, want 1", st.SegmentsUnshared)
	}
	appendN(t, l, 30, 2, 50, 5000, 1)
	obj := filepath.Join("/objects", cutSeg.key(tierPrefix, logSuffix))
	if links, err := mem.Links(obj); err != nil || links != 1 {
		t.Fatalf("the cut segment's object has %d names (%v), want 1 (the local one is a copy)", links, err)
	}
	if links, err := mem.Links(filepath.Join(testDir, segmentName(cutSeg.Base, logSuffix))); err != nil || links != 1 {
		t.Fatalf("the cut segment's local file has %d names (%v), want 1", links, err)
	}
	got := readRemote(t, tier, tier.UploadedEnd())
	sameBatches(t, got, want[:len(got)])
	old, err := c.Bytes()
	if err != nil || int64(len(old)) != cutSeg.Size {
		t.Fatalf("a chunk read before the cut: %d bytes (%v), want the segment's %d", len(old), err, cutSeg.Size)
	}
	// The local log holds the kept prefix and the new appends.
	local := readAll(t, l)
	if h, _ := batch.ParseHeader(local[len(local)-1]); h.PartitionLeaderEpoch != 1 || l.LogEndOffset() <= cut {
		t.Fatalf("local log ends with epoch %d at %d, want the new appends after %d", h.PartitionLeaderEpoch, l.LogEndOffset(), cut)
	}
	for i, b := range local {
		if h, _ := batch.ParseHeader(b); h.BaseOffset >= cut {
			break
		} else if !bytes.Equal(b, want[i]) {
			t.Fatalf("kept batch %d at %d changed", i, h.BaseOffset)
		}
	}
}

// Recovery that cuts a torn tail from a segment whose file has a second name
// cuts a copy: the other name keeps every byte.
func TestRecoveryCopiesLinkedSegment(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, Config{SegmentBytes: 1 << 20, RetentionAge: -1})
	want := appendN(t, l, 5, 3, 100, 1000, 0)
	if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(testDir, segmentName(0, logSuffix))
	f, err := mem.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	other := path.Join(testDir, "other")
	if err := mem.LinkFile(f, other); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("a torn batch"), size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, d := range []string{"/", testDir} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	img := mem.CrashClone() // no clean shutdown: recovery scans the segment
	r := openLog(t, img, Config{SegmentBytes: 1 << 20, RetentionAge: -1})
	if st := r.Stats(); st.RecoveryTruncatedBytes == 0 || st.SegmentsUnshared != 1 {
		t.Fatalf("recovery stats %+v: want the torn tail cut from a copy", st)
	}
	sameBatches(t, readAll(t, r), want)
	fi, err := img.Stat(other)
	if err != nil || fi.Size() != size+int64(len("a torn batch")) {
		t.Fatalf("the other name: %v, %v; want all %d bytes kept", fi, err, size+12)
	}
	if links, err := img.Links(name); err != nil || links != 1 {
		t.Fatalf("the recovered segment has %d names (%v), want 1", links, err)
	}
}

// listCountingStore counts List calls.
type listCountingStore struct {
	*flakyStore
	lists atomic.Int64
}

func (s *listCountingStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.lists.Add(1)
	return s.flakyStore.List(ctx, prefix)
}

// The orphan sweep lists the partition's objects only when orphans may exist:
// on the first retention pass after Load, and after an upload failed; a pass
// after a clean upload lists nothing. The sweep after a failure removes what
// the failed upload left.
func TestTierSweepsOrphansOnlyWhenNeeded(t *testing.T) {
	store := &listCountingStore{flakyStore: &flakyStore{Store: memStore(t, vfs.NewMem())}}
	l, tier := tieredLog(t, store, 4096, nil)
	pass := func(wantLists int64) {
		t.Helper()
		store.lists.Store(0)
		if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
			t.Fatal(err)
		}
		if n := store.lists.Load(); n != wantLists {
			t.Fatalf("retention pass listed the store %d times, want %d", n, wantLists)
		}
	}
	appendN(t, l, 40, 3, 100, 1000, 0)
	uploadAndRetain(t, l, tier) // the first pass after Load sweeps
	for range 3 {
		appendN(t, l, 20, 3, 100, 1000, 0)
		if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
			t.Fatal(err)
		}
		pass(0)
	}
	appendN(t, l, 20, 3, 100, 1000, 0)
	manifestSuffix := "/" + manifestKey
	store.failPut.Store(&manifestSuffix)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err == nil {
		t.Fatal("upload committed without its manifest")
	}
	store.failPut.Store(nil)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	pass(1)
	pass(0)
	m, _ := tier.manifestCopy()
	keys, err := store.flakyStore.List(ctxTimeout(t), tierPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(m.Segments)+1 {
		t.Fatalf("%d objects for %d segments after the sweep: %v", len(keys), len(m.Segments), keys)
	}
}

// TestTierLinkErrorIsUnavailable: a store that fails to link a segment fails
// the upload with ErrRemoteUnavailable, as every other store failure does (the
// store's own error used to come back unwrapped). TestTierMatchesModel found
// it.
func TestTierLinkErrorIsUnavailable(t *testing.T) {
	rule := vfs.FailOn(vfs.OpStat).Path("/objects/" + tierPrefix)
	fsys := vfs.NewErrorFS(vfs.NewMem(), rule)
	l := openLog(t, fsys, Config{SegmentBytes: 4096, RetentionAge: -1})
	tier := NewTier(l, TierConfig{Store: memStore(t, fsys), Prefix: tierPrefix, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: 4096}})
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 40, 3, 100, 1000, 0)
	if _, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0); !errors.Is(err, ErrRemoteUnavailable) {
		t.Fatalf("Upload failing to link: %v, want ErrRemoteUnavailable", err)
	}
	rule.Disable()
	uploadAndRetain(t, l, tier)
	if l.LogStartOffset() == 0 {
		t.Fatal("nothing went remote")
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
}
