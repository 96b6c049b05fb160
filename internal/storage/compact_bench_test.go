package storage

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkCompact measures compaction passes over a freshly written log of
// benchCompactBytes in 8 MiB segments of ~16 KiB batches of 100-byte records
// whose keys are drawn from half as many keys as records, so a first pass drops
// a bit over half the records and rewrites most batches. MB/s is segment bytes
// read (cleaned) per second; cpu-MB/s the same per second of process CPU time
// (user + system, GC included), steadier on a shared machine; written/read is the
// output's share.
//
//	fs=mem|disk          MemFS (CPU cost only) or a temp dir on the real disk
//	codec=none|snappy    batch compression (rewritten batches are recompressed)
//	pass=first           every sealed segment dirty
//	pass=steady          a second pass after one more dirty segment: the clean
//	                     section is read again and mostly copied unchanged
func BenchmarkCompact(b *testing.B) {
	for _, c := range []struct {
		fs     string
		codec  int8
		steady bool
	}{
		{"mem", 0, false}, {"mem", 2, false}, {"mem", 0, true}, {"disk", 0, false},
	} {
		codec := map[int8]string{0: "none", 2: "snappy"}[c.codec]
		pass := map[bool]string{false: "first", true: "steady"}[c.steady]
		b.Run(fmt.Sprintf("fs=%s/codec=%s/pass=%s", c.fs, codec, pass), func(b *testing.B) {
			benchCompact(b, c.fs == "disk", c.codec, c.steady)
		})
	}
}

const benchCompactBytes = 48 << 20

func benchCompact(b *testing.B, disk bool, codec int8, steady bool) {
	b.ReportAllocs()
	var read, written int64
	var cpu time.Duration
	for i := range b.N {
		b.StopTimer()
		l := benchCompactLog(b, disk, codec, i)
		if steady {
			if _, err := l.Compact(l.LogEndOffset(), CompactOptions{}); err != nil {
				b.Fatal(err)
			}
			benchWrite(b, l, codec, 8<<20, rand.New(rand.NewPCG(2, uint64(i))))
		}
		b.StartTimer()
		cpu0 := processCPU()
		st, err := l.Compact(l.LogEndOffset(), CompactOptions{})
		cpu += processCPU() - cpu0
		b.StopTimer()
		if err != nil || !st.Cleaned {
			b.Fatalf("%+v %v", st, err)
		}
		read, written = read+st.BytesRead, written+st.BytesWritten
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(read)/1e6/b.Elapsed().Seconds(), "MB/s")
	if cpu > 0 {
		b.ReportMetric(float64(read)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
	b.ReportMetric(float64(written)/float64(read), "written/read")
}

// benchCompactLog writes a log to compact; run numbers give distinct directories.
func benchCompactLog(b *testing.B, disk bool, codec int8, run int) *Log {
	fsys, dir := vfs.FS(vfs.NewMem()), testDir
	if disk {
		fsys, dir = vfs.Default, filepath.Join(b.TempDir(), fmt.Sprint("p-", run))
	}
	l, err := Open(fsys, dir, Config{SegmentBytes: 8 << 20, RetentionAge: -1, Flush: FlushPolicy{Mode: Interval}})
	if err != nil {
		b.Fatal(err)
	}
	benchWrite(b, l, codec, benchCompactBytes, rand.New(rand.NewPCG(1, 1)))
	return l
}

// benchWrite appends about size bytes of keyed 100-byte records, then rolls.
func benchWrite(b *testing.B, l *Log, codec int8, size int64, rng *rand.Rand) {
	const perBatch = 140
	keys := int(size / 110 / 2)
	value := make([]byte, 100)
	ts := time.Now().UnixMilli()
	for start := l.Size(); l.Size()-start < size; {
		recs := make([]batchtest.Record, perBatch)
		for i := range recs {
			for j := range value {
				value[j] = byte('a' + rng.IntN(26))
			}
			recs[i] = batchtest.Record{Key: fmt.Appendf(nil, "key-%09d", rng.IntN(keys)), Value: append([]byte(nil), value...), TimestampDelta: int64(i)}
		}
		if _, err := l.Append(batchtest.Build(batchtest.Options{FirstTimestamp: ts, Codec: codec, Records: recs}), 0); err != nil {
			b.Fatal(err)
		}
	}
	// Roll, so everything written lies in sealed segments.
	l.appendMu.Lock()
	_, err := l.rollLocked(time.Now())
	l.appendMu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
}
