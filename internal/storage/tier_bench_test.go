package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkTierUpload measures Tier.Upload of 1 MiB segments of 16 KiB batches
// (1 KiB records) to a file:// store on the real disk (a temp dir), 8 segments
// per op: what one upload pass costs the broker while it also takes produce
// traffic. Besides time (ns/op: meaningless on a loaded machine) and
// allocations it reports the process CPU time per segment (inflated far less by
// load than wall time). store=counted runs the store over an ErrorFS that counts
// its filesystem operations per segment, which do not depend on load: creates,
// fsyncs of files and of directories, writes (it hides the operating-system
// files, so the store copies through its buffer there). The store is on the
// log's filesystem, so it links the segments (remote.FileLinker); the copy
// variants hide vfs.Linker from it, as a store on another filesystem sees.
func BenchmarkTierUpload(b *testing.B) {
	b.Run("store=os", func(b *testing.B) { benchTierUpload(b, nil, false) })
	b.Run("store=counted", func(b *testing.B) { benchTierUpload(b, newOpCounter(), false) })
	b.Run("store=os-link", func(b *testing.B) { benchTierUpload(b, nil, true) })
	b.Run("store=counted-link", func(b *testing.B) { benchTierUpload(b, newOpCounter(), true) })
}

func benchTierUpload(b *testing.B, ops *opCounter, link bool) {
	const segBytes, segsPerOp = 1 << 20, 8
	dir := b.TempDir()
	l, err := Open(vfs.Default, filepath.Join(dir, "log", "t-0"), Config{SegmentBytes: segBytes, RetentionAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	storeFS := vfs.Default
	if ops != nil {
		storeFS = vfs.NewErrorFS(vfs.Default, ops)
	}
	if !link {
		storeFS = noLinkFS{storeFS}
	}
	store, err := remote.NewFile(storeFS, filepath.Join(dir, "remote"))
	if err != nil {
		b.Fatal(err)
	}
	tier := NewTier(l, TierConfig{Store: store, Prefix: "t/0",
		Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: 0}})
	ctx := context.Background()
	if err := tier.Load(ctx); err != nil {
		b.Fatal(err)
	}
	proto, _ := benchBatch(1024)
	buf := make([]byte, len(proto))
	fill := func() {
		// Enough batches to close segsPerOp more segments.
		for range segsPerOp * (segBytes / len(proto)) {
			copy(buf, proto)
			if _, err := l.Append(buf, 0); err != nil {
				b.Fatal(err)
			}
		}
		// The flusher's fsyncs must not run during (and count against) the upload.
		if err := l.WaitDurable(ctx, l.LogEndOffset()-1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(segsPerOp * segBytes)
	var segments int64
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		ops.counting(true)
		cpu0 := processCPU()
		n, err := tier.Upload(ctx, l.LogEndOffset(), 0)
		cpu += processCPU() - cpu0
		ops.counting(false)
		if err != nil {
			b.Fatal(err)
		}
		segments += int64(n)
		b.StopTimer()
		// Local retention (0 bytes) deletes what was uploaded: the disk holds
		// the remote copy only.
		if _, _, err := tier.EnforceRetention(ctx, l.LogEndOffset(), 0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if segments == 0 {
		b.Fatal("nothing uploaded")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(segments), "cpu-us/segment")
	if ops == nil {
		return
	}
	for _, m := range []struct {
		kind vfs.OpKind
		unit string
	}{
		{vfs.OpCreate, "creates/segment"},
		{vfs.OpSync, "fsyncs/segment"},
		{vfs.OpSyncDir, "dirsyncs/segment"},
		{vfs.OpWrite, "writes/segment"},
		{vfs.OpRead, "reads/segment"},
		{vfs.OpLink, "links/segment"},
	} {
		n, _ := ops.get(m.kind)
		b.ReportMetric(float64(n)/float64(segments), m.unit)
	}
}

// counting switches counting on or off; a nil counter counts nothing.
func (c *opCounter) counting(on bool) {
	if c != nil {
		c.on.Store(on)
	}
}
