// Package keyhash owns the mapping from a record key to a partition that Kafka's Java
// client uses for keyed records by default, so that Strata's own producers (CLI, HTTP
// API) place a key on the same partition a Java producer would.
//
// The Java client hashes the key bytes with its variant of MurmurHash2 (seed 0x9747b28c,
// 4-byte little-endian blocks, tail bytes folded in high to low), clears the sign bit of
// the result and takes it modulo the partition count:
//
//	partition = (murmur2(key) & 0x7fffffff) % n
//
// Records with a null key do not go through this path in the Java client (it uses
// sticky partitioning), so Partition treats nil like an empty key and leaves that choice
// to the caller.
//
// Everything here is a pure function of its arguments and safe for concurrent use.
package keyhash

const (
	murmurSeed = 0x9747b28c
	murmurM    = 0x5bd1e995
	murmurR    = 24
)

// Murmur2 returns the 32-bit MurmurHash2 of b exactly as
// org.apache.kafka.common.utils.Utils.murmur2 computes it, as a signed int32 like Java's.
func Murmur2(b []byte) int32 {
	n := len(b)
	h := uint32(murmurSeed) ^ uint32(n)

	blocks := n &^ 3
	for i := 0; i < blocks; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= murmurM
		k ^= k >> murmurR
		k *= murmurM
		h *= murmurM
		h ^= k
	}

	tail := b[blocks:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= murmurM
	}

	h ^= h >> 13
	h *= murmurM
	h ^= h >> 15
	return int32(h)
}

// Partition returns the partition among n that the Java client's default partitioner
// picks for a record with this key. It returns -1 when n is not positive: there is no
// partition to pick.
func Partition(key []byte, n int32) int32 {
	if n <= 0 {
		return -1
	}
	return toPositive(Murmur2(key)) % n
}

// toPositive clears the sign bit, as the Java client's Utils.toPositive does; unlike
// taking an absolute value it maps math.MinInt32 to 0 instead of overflowing.
func toPositive(h int32) int32 {
	return h & 0x7fffffff
}
