package storage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkTieredProduce is what uploads cost a producer: appenders doing what
// an acks=all produce to a one-replica partition does (Append, then
// WaitDurable) on a log of 1 MiB segments in a temp dir, while, for the tiered
// variants, a tiering goroutine uploads to a file:// store in the same temp dir
// (the same disk) and applies 8 MiB of local retention every 100 ms, as
// `--remote-upload-interval` and the cleaner do. An op is 16 MiB appended.
//
//	plain        no tier
//	tiered-copy  the store cannot link (its filesystem hides vfs.Linker): every
//	             segment is copied into a .seg object and fsynced (before links)
//	tiered-link  the store links each sealed segment (now)
//	tiered-link-keep  the same without local retention: what retention adds
//
// Every variant's filesystem counts its operations, so besides time (ns/op and
// the waits: meaningless on a loaded machine) it reports, per MiB appended,
// counts that do not depend on load: bytes written through the filesystem (and
// sent to the disk, /proc/self/io), files created, renamed and linked; fsyncs
// of files and directories and syncfs calls (the flusher's group commits among them, whose
// number does depend on timing); and the process CPU per MiB (inflated by load
// far less than time). append-us is the mean time
// an Append took (the append lock, the write, and any roll, which fsyncs under
// that lock), append-p99-us and append-max-us its 99th percentile and worst
// case (a retention pass holding the lock shows there); durable-us the mean
// wait for the flusher's fsync.
func BenchmarkTieredProduce(b *testing.B) {
	for _, v := range []string{"plain", "tiered-copy", "tiered-link", "tiered-link-keep"} {
		b.Run(v, func(b *testing.B) { benchTieredProduce(b, v) })
	}
}

// noLinkFS hides the inner FS's vfs.Linker.
type noLinkFS struct{ vfs.FS }

// fsCounts counts a filesystem's operations, and the bytes its writes ask for.
type fsCounts struct {
	syncs, syncDirs, syncFSs, creates, renames, links, writeBytes atomic.Int64
}

func (c *fsCounts) MaybeError(op vfs.Op) error {
	switch op.Kind {
	case vfs.OpSync:
		c.syncs.Add(1)
	case vfs.OpSyncDir:
		c.syncDirs.Add(1)
	case vfs.OpSyncFS:
		c.syncFSs.Add(1)
	case vfs.OpCreate:
		c.creates.Add(1)
	case vfs.OpRename:
		c.renames.Add(1)
	case vfs.OpLink:
		c.links.Add(1)
	case vfs.OpWrite:
		c.writeBytes.Add(int64(op.Len))
	}
	return nil
}

func benchTieredProduce(b *testing.B, variant string) {
	const (
		segBytes  = 1 << 20
		appenders = 4
		opBytes   = 16 << 20
	)
	dir := b.TempDir()
	var counts fsCounts
	fsys := vfs.NewErrorFS(vfs.Default, &counts)
	l, err := Open(fsys, filepath.Join(dir, "log", "t-0"), Config{SegmentBytes: segBytes, RetentionAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var tiering sync.WaitGroup
	b.Cleanup(func() { cancel(); tiering.Wait() })
	if variant != "plain" {
		var storeFS vfs.FS = fsys
		if variant == "tiered-copy" {
			storeFS = noLinkFS{fsys}
		}
		store, err := remote.NewFile(storeFS, filepath.Join(dir, "remote"))
		if err != nil {
			b.Fatal(err)
		}
		localBytes := int64(8 << 20)
		if variant == "tiered-link-keep" {
			localBytes = -1
		}
		tier := NewTier(l, TierConfig{Store: store, Prefix: "t/0",
			Retention: TierRetention{Age: -1, Bytes: -1, LocalAge: -1, LocalBytes: localBytes}})
		if err := tier.Load(ctx); err != nil {
			b.Fatal(err)
		}
		tiering.Add(1)
		go func() {
			defer tiering.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				durable := l.DurableOffset()
				if _, err := tier.Upload(ctx, durable, 0); err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
				if _, _, err := tier.EnforceRetention(ctx, durable, 0); err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	proto, _ := benchBatch(1024)
	var appendNanos, durableNanos, appendsDone atomic.Int64
	syncs0 := func() int64 { return counts.syncs.Load() + counts.syncDirs.Load() + counts.syncFSs.Load() }
	var latMu sync.Mutex
	var appendLat []time.Duration
	start := struct{ syncs, creates, renames, links, bytes, ioBytes int64 }{}
	b.SetBytes(opBytes)
	b.ReportAllocs()
	cpu0 := processCPU()
	start.syncs, start.creates, start.renames, start.links, start.bytes = syncs0(), counts.creates.Load(), counts.renames.Load(), counts.links.Load(), counts.writeBytes.Load()
	start.ioBytes = procWriteBytes()
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(opBytes)
		for range appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, len(proto))
				var lat []time.Duration
				defer func() {
					latMu.Lock()
					appendLat = append(appendLat, lat...)
					latMu.Unlock()
				}()
				for left.Add(-int64(len(proto))) > -int64(len(proto)) {
					copy(buf, proto)
					t0 := time.Now()
					info, err := l.Append(buf, 0)
					t1 := time.Now()
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.WaitDurable(ctx, info.LastOffset); err != nil {
						b.Error(err)
						return
					}
					appendNanos.Add(int64(t1.Sub(t0)))
					lat = append(lat, t1.Sub(t0))
					durableNanos.Add(int64(time.Since(t1)))
					appendsDone.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	mib := float64(b.N) * opBytes / (1 << 20)
	b.ReportMetric(float64(syncs0()-start.syncs)/mib, "fsyncs/MiB")
	b.ReportMetric(float64(counts.writeBytes.Load()-start.bytes)/mib/(1<<20), "written-MiB/MiB")
	if io := procWriteBytes(); io >= 0 && start.ioBytes >= 0 {
		b.ReportMetric(float64(io-start.ioBytes)/mib/(1<<20), "disk-MiB/MiB")
	}
	b.ReportMetric(float64(counts.creates.Load()-start.creates)/mib, "creates/MiB")
	b.ReportMetric(float64(counts.renames.Load()-start.renames)/mib, "renames/MiB")
	b.ReportMetric(float64(counts.links.Load()-start.links)/mib, "links/MiB")
	b.ReportMetric(float64(cpu.Microseconds())/1000/mib, "cpu-ms/MiB")
	if n := appendsDone.Load(); n > 0 {
		b.ReportMetric(float64(appendNanos.Load())/float64(n)/1000, "append-us")
		b.ReportMetric(float64(durableNanos.Load())/float64(n)/1000, "durable-us")
	}
	if len(appendLat) > 0 {
		slices.Sort(appendLat)
		b.ReportMetric(float64(appendLat[len(appendLat)*99/100].Microseconds()), "append-p99-us")
		b.ReportMetric(float64(appendLat[len(appendLat)-1].Microseconds()), "append-max-us")
	}
}

// procWriteBytes is the process's write_bytes from /proc/self/io (bytes it
// caused to be sent to the disk, copy_file_range included), or -1.
func procWriteBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
