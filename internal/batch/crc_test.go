package batch

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRCMatchesStandard(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 3*crcBlock+200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	// Every length around the block edges, from every alignment.
	for _, n := range []int{0, 1, 63, 64, 65, crcBlock - 1, crcBlock, crcBlock + 1, 2*crcBlock + 7, 3 * crcBlock} {
		for off := range 9 {
			b := buf[off : off+n]
			if got, want := crc(b), crc32.Checksum(b, castagnoli); got != want {
				t.Fatalf("len %d at %d: crc %08x, crc32.Checksum %08x", n, off, got, want)
			}
		}
	}
	for range 200 {
		off := rng.IntN(len(buf))
		b := buf[off : off+rng.IntN(len(buf)-off+1)]
		if got, want := crc(b), crc32.Checksum(b, castagnoli); got != want {
			t.Fatalf("len %d at %d: crc %08x, crc32.Checksum %08x", len(b), off, got, want)
		}
	}
}

// BenchmarkChecksum sets crc against crc32.Checksum on one cached 1 MiB
// buffer and on 1 MiB slices of a 256 MiB one, each out of the caches by the
// time it is summed again, as a batch just read from a socket is.
func BenchmarkChecksum(b *testing.B) {
	const size = 1 << 20
	sums := []struct {
		name string
		sum  func([]byte) uint32
	}{
		{"crc32.Checksum", func(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }},
		{"crc", crc},
	}
	for _, cold := range []bool{false, true} {
		buf := make([]byte, size)
		if cold {
			buf = make([]byte, 256*size)
		}
		for i := range buf {
			buf[i] = byte(i)
		}
		for _, s := range sums {
			b.Run(fmt.Sprintf("cold=%t/%s", cold, s.name), func(b *testing.B) {
				b.SetBytes(size)
				i := 0
				for b.Loop() {
					off := i * size % len(buf)
					s.sum(buf[off : off+size])
					i++
				}
			})
		}
	}
}
