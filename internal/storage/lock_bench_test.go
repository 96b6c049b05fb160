package storage

import (
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// The in-memory benchmarks time the log's own work on the produce and fetch
// paths (validation, locking, indexing, publishing; no disk): what a change
// to the locks shows in, where BenchmarkAppend's figures are the disk's.

// BenchmarkAppendInMemory appends one small batch per operation to a log on
// the in-memory file system, as a leader (Append) and as a follower
// (AppendAsFollower). Every 4096 appends the log is emptied, off the clock, so
// that the file system's memory stays small.
func BenchmarkAppendInMemory(b *testing.B) {
	const emptyEvery = 4096
	for _, c := range []struct {
		name     string
		follower bool
	}{{"leader", false}, {"follower", true}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := Open(vfs.NewMem(), testDir, Config{IndexMaxBytes: testIndexBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			proto := mkBatch(4, 64, 1000)
			buf := make([]byte, len(proto))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%emptyEvery == emptyEvery-1 {
					b.StopTimer()
					if err := l.Truncate(0); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				copy(buf, proto)
				if c.follower {
					// The leader's offsets: the batch follows the log end.
					stampBatches(buf, l.LogEndOffset(), 0, -1)
					_, err = l.AppendAsFollower(buf)
				} else {
					_, err = l.Append(buf, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads one batch per operation, each time at the next offset,
// from a log of 4096 small batches on the in-memory file system, as a fetch
// does (Read, then Release), without copying the bytes.
func BenchmarkRead(b *testing.B) {
	const batches, records = 4096, 4
	l, err := Open(vfs.NewMem(), testDir, Config{IndexMaxBytes: testIndexBytes})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for range batches {
		if _, err := l.Append(mkBatch(records, 64, 1000), 0); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c, err := l.Read(int64(i%batches)*records, 1, leo)
		if err != nil || c.Size == 0 {
			b.Fatalf("Read: %d bytes, %v", c.Size, err)
		}
		c.Release()
	}
}
