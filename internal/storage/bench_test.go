package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

// benchBatchBytes is the target size of one produced batch.
const benchBatchBytes = 16 << 10

// benchBatch builds a batch of about benchBatchBytes holding recordSize-byte records.
func benchBatch(recordSize int) (b []byte, records int) {
	records = max(benchBatchBytes/(recordSize+12), 1)
	return batchtest.Build(batchtest.Options{Records: batchtest.Values(records, recordSize)}), records
}

// BenchmarkAppend measures append throughput on the real disk (a temp dir) with
// the durability each policy gives, next to a raw baseline that writes the same
// batches to a plain file with write+fsync in the same grouping:
//
//	group-commit/writers=1  one appender, Append then WaitDurable each batch
//	                        vs raw: write + fsync per batch
//	group-commit/writers=8  eight appenders, each Append then WaitDurable
//	                        vs raw: 8 writes + one fsync (ideal grouping)
//	interval                one appender, no waiting, fsync every 64 batches
//	                        (IntervalMessages) vs raw: 64 writes + one fsync
//
// The group-commit cases run again with Preallocate (".../prealloc/log"). Each
// log case reports the mean fsync time (us/fsync) and, on Linux, the bytes the
// process sent to the disk per byte appended (disk-B/B: zeros, journal and
// whole pages rewritten by each fsync included; Close's included).
func BenchmarkAppend(b *testing.B) {
	for _, recordSize := range []int{100, 1024} {
		for _, c := range []struct {
			name    string
			mode    FlushMode
			writers int
			group   int // batches per fsync in the raw baseline
		}{
			{"group-commit/writers=1", GroupCommit, 1, 1},
			{"group-commit/writers=8", GroupCommit, 8, 8},
			{"interval", Interval, 1, 64},
		} {
			name := fmt.Sprintf("record=%dB/%s", recordSize, c.name)
			b.Run(name+"/log", func(b *testing.B) { benchLog(b, recordSize, c.mode, c.writers, c.group, false) })
			if c.mode == GroupCommit {
				b.Run(name+"/prealloc/log", func(b *testing.B) { benchLog(b, recordSize, c.mode, c.writers, c.group, true) })
			}
			b.Run(name+"/raw", func(b *testing.B) { benchRaw(b, recordSize, c.group) })
		}
	}
}

func reportThroughput(b *testing.B, batchBytes, records int) {
	b.SetBytes(int64(batchBytes))
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}

func benchLog(b *testing.B, recordSize int, mode FlushMode, writers, group int, prealloc bool) {
	proto, records := benchBatch(recordSize)
	cfg := Config{Flush: FlushPolicy{Mode: mode}, SegmentBytes: 256 << 20, Preallocate: prealloc}
	if mode == Interval {
		cfg.Flush.IntervalMessages = int64(group * records)
	}
	l, err := Open(vfs.Default, filepath.Join(b.TempDir(), "p-0"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	written, ioOK := processWriteBytes()
	var wg sync.WaitGroup
	for w := range writers {
		n := b.N / writers
		if w < b.N%writers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := append([]byte(nil), proto...)
			for range n {
				info, err := l.Append(buf, 0)
				if err != nil {
					b.Error(err)
					return
				}
				if mode == GroupCommit {
					if err := l.WaitDurable(context.Background(), info.LastOffset); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	// Close makes everything durable, as the baseline's last fsync does.
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportThroughput(b, len(proto), records)
	st := l.Stats()
	b.ReportMetric(float64(b.N)/float64(max(st.Syncs, 1)), "batches/fsync")
	b.ReportMetric(float64(st.SyncTime.Microseconds())/float64(max(st.Syncs, 1)), "us/fsync")
	if after, ok := processWriteBytes(); ok && ioOK {
		b.ReportMetric(float64(after-written)/float64(b.N*len(proto)), "disk-B/B")
	}
}

// processWriteBytes returns the bytes this process has sent to storage
// (write_bytes of /proc/self/io, Linux); false where it cannot be read.
func processWriteBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func benchRaw(b *testing.B, recordSize, group int) {
	proto, records := benchBatch(recordSize)
	f, err := os.Create(filepath.Join(b.TempDir(), "raw.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Write(proto); err != nil {
			b.Fatal(err)
		}
		if (i+1)%group == 0 || i == b.N-1 {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportThroughput(b, len(proto), records)
	b.ReportMetric(float64(group), "batches/fsync")
}
