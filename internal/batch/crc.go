package batch

import (
	"hash/crc32"
	"runtime"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcBlock is how much of a batch crc reads ahead before checksumming it.
const crcBlock = 4 << 10

// crc is the CRC-32C of b, as crc32.Checksum computes it. A produced batch
// is checksummed after the socket read has left it out of the CPU's caches,
// and the standard checksum's loads then wait on about one cache miss at a
// time. Loading one byte of each cache line of a 4 KiB block first lets those
// misses overlap, and the block is summed from the cache. BenchmarkChecksum on
// this project's 2-CPU benchmark machine: cold 1 MiB buffers 5.3-6.3 GB/s with
// crc32.Checksum, 13.9-15.3 GB/s with crc; cached ones 21-24 against 18-21.
// In a broker taking one producer's 1 MiB batches, its user CPU per GB fell
// from 0.16-0.27 s to 0.10-0.15 s (docs/benchmarks.md, session 30).
func crc(b []byte) uint32 {
	var sum uint32
	for len(b) > 0 {
		block := b[:min(len(b), crcBlock)]
		var t byte
		for i := 0; i < len(block); i += 64 {
			t += block[i]
		}
		runtime.KeepAlive(t) // keeps the loads
		sum = crc32.Update(sum, castagnoli, block)
		b = b[len(block):]
	}
	return sum
}
