package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
	"github.com/strata-stream/strata/internal/vfs"
)

// bodyReadingStore is a Store with none of the optional capabilities: it reads
// every body itself, as S3 does.
type bodyReadingStore struct{ remote.Store }

// An upload to a store that reads the body itself reads each segment once: the
// blocks are cut as the store reads the bytes (the old upload scanned each
// segment, then handed it to the store to read again). Log.Read adds one
// header window (4 KiB) per segment to find the chunk's first batch. The
// object is the batches, the block index and zeros up to the index's room;
// everything reads back from offset 0 after local retention. The store is the
// in-memory file store without its options (it reads every body through a
// buffer), or S3.
func TestTierStreamsSegmentsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) remote.Store
	}{
		{"reading-store", func(t *testing.T) remote.Store { return bodyReadingStore{memStore(t, vfs.NewMem())} }},
		{"s3", func(t *testing.T) remote.Store {
			s, err := remote.Open(remotetest.StartS3Server(t).NewBucket(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testTierStreamsSegmentsOnce(t, tc.store(t)) })
	}
}

func testTierStreamsSegmentsOnce(t *testing.T, store remote.Store) {
	var segmentReads atomic.Int64
	logFS := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && strings.HasSuffix(op.Path, logSuffix) {
			segmentReads.Add(int64(op.Len))
		}
		return nil
	}))
	l := openLog(t, logFS, Config{SegmentBytes: 64 << 10, RetentionAge: -1})
	tier := NewTier(l, TierConfig{Store: store, Prefix: tierPrefix, BlockBytes: 1024,
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: 64 << 10}})
	if err := tier.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 2000, 3, 100, 1000, 0)
	segmentReads.Store(0)
	n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	st := tier.Stats()
	if n < 10 || st.UploadBytes == 0 {
		t.Fatalf("uploaded %d segments, %d bytes", n, st.UploadBytes)
	}
	const headerWindow = 4096
	if got := segmentReads.Load(); got < st.UploadBytes || got > st.UploadBytes+int64(n)*headerWindow {
		t.Fatalf("uploading %d segments of %d bytes read %d bytes of segment files (%.2f times), want each byte once and a header window per segment",
			n, st.UploadBytes, got, float64(got)/float64(st.UploadBytes))
	}
	m, _ := tier.manifestCopy()
	for _, s := range m.Segments {
		obj, err := store.Get(ctxTimeout(t), s.dataKey(tierPrefix), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		room := indexRoom(s.Size, 1024)
		if int64(len(obj)) != s.Size+room || s.IndexSize <= 0 || s.IndexSize > room {
			t.Fatalf("segment %d: object of %d bytes, index %d; want %d batch bytes and %d of index room", s.Base, len(obj), s.IndexSize, s.Size, room)
		}
		if pad := obj[s.Size+s.IndexSize:]; len(bytes.Trim(pad, "\x00")) != 0 {
			t.Fatalf("segment %d: padding after the index is not zeros", s.Base)
		}
	}
	if _, _, err := tier.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("local retention deleted nothing")
	}
	sameBatches(t, readTiered(t, l, tier, 1<<20), want)
}

// A segment that does not scan fails its streamed upload with
// ErrCorruptSegment, and the manifest does not move past it.
func TestTierStreamedUploadOfCorruptSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // where the damage goes in the segment
		b    []byte
	}{
		{"bad length", 8, []byte{0x7f, 0xff, 0xff, 0xff}},
		{"bad magic", 16, []byte{9}},
		{"runs past the segment", 8, []byte{0, 0, 0x0f, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, Config{SegmentBytes: 4096, RetentionAge: -1})
			tier := NewTier(l, TierConfig{Store: bodyReadingStore{memStore(t, vfs.NewMem())}, Prefix: tierPrefix, BlockBytes: 1024,
				Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: -1}})
			if err := tier.Load(ctxTimeout(t)); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 40, 3, 100, 1000, 0)
			// The damage is in the second batch of the first segment.
			f, err := fsys.OpenReadWrite(filepath.Join(testDir, segmentName(0, logSuffix)))
			if err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 12)
			if _, err := f.ReadAt(first, 0); err != nil {
				t.Fatal(err)
			}
			second := 12 + int64(binary.BigEndian.Uint32(first[8:]))
			if _, err := f.WriteAt(tc.b, second+tc.at); err != nil {
				t.Fatal(err)
			}
			f.Close()
			_, err = tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
			if !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("upload of a damaged segment: %v, want ErrCorruptSegment", err)
			}
			if end := tier.UploadedEnd(); end != 0 {
				t.Fatalf("manifest moved to %d past a damaged segment", end)
			}
		})
	}
}

// An upload pass allocates no 1 MiB read window (nor copy buffer) after a
// garbage collection: its scan window comes from a free list that collections
// do not empty, and its small objects (a block index, the manifest) are copied
// through buffers of their own size. On the old code each pass after a
// collection allocated at least one new 1 MiB; BenchmarkTieredProduce's B/op
// went up and down with the number of collections in a run. (What a pass
// allocates besides, most of it the memory filesystem's copies for syncfs, is
// far less.)
func TestTierUploadAllocatesNoWindowAfterGC(t *testing.T) {
	_, l, tier, _ := linkedTier(t, 1<<30)
	const passes = 10
	var before, after runtime.MemStats
	for i := range passes + 1 {
		appendN(t, l, 14, 3, 100, 1000, 0) // more than one segment of 4 KiB
		// The flusher's fsync (which copies the file in the memory FS) must
		// not run, and allocate, during the upload.
		if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
		runtime.GC() // twice: sync.Pool keeps a victim cache for one cycle
		runtime.GC()
		runtime.ReadMemStats(&before)
		n, err := tier.Upload(ctxTimeout(t), l.LogEndOffset(), 0)
		runtime.ReadMemStats(&after)
		if err != nil || n == 0 {
			t.Fatalf("upload: %d segments, %v", n, err)
		}
		// The first pass fills the free list.
		if got := after.TotalAlloc - before.TotalAlloc; i > 0 && got >= uploadReadBytes {
			t.Fatalf("upload pass %d (%d segments of 4 KiB) after a collection allocated %d bytes, want no 1 MiB window", i, n, got)
		}
	}
}
