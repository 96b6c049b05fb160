package keyhash

import (
	"encoding/hex"
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// javaVectors were computed by the Java client itself, not by this package: kafka-clients
// 4.1.2 via interop/java's Murmur2Vectors program (Utils.murmur2 and
// BuiltInPartitioner.partitionForKey), run as
//
//	java -cp 'target/classes:target/dependency/*' io.strata.interop.Murmur2Vectors HEX...
//
// and its output pasted here. parts[i] is the partition for partitionCounts[i].
var partitionCounts = [...]int32{1, 2, 3, 7, 12, 100}

var javaVectors = []struct {
	hex     string
	murmur2 int32
	parts   [len(partitionCounts)]int32
}{
	{"", 275646681, [6]int32{0, 1, 0, 2, 9, 81}},
	{"00", 375494588, [6]int32{0, 0, 2, 0, 8, 88}},
	{"61", -1563381124, [6]int32{0, 0, 1, 5, 4, 24}},
	{"6162", 316155434, [6]int32{0, 0, 2, 0, 2, 34}},
	{"616263", 479470107, [6]int32{0, 1, 0, 4, 3, 7}},
	{"61626364", -1323649548, [6]int32{0, 0, 2, 5, 8, 0}},
	{"6162636465", 461995741, [6]int32{0, 1, 1, 4, 1, 41}},
	{"616263646566", 1870650108, [6]int32{0, 0, 0, 5, 0, 8}},
	{"61626364656667", -346467175, [6]int32{0, 1, 1, 4, 1, 73}},
	{"6162636465666768", -955427363, [6]int32{0, 1, 0, 0, 9, 85}},
	// High bytes: the Java code masks every byte with 0xff, so no sign extension.
	{"ff", -311467685, [6]int32{0, 1, 0, 5, 3, 63}},
	{"80", 857690492, [6]int32{0, 0, 2, 1, 8, 92}},
	{"ffff", -1642832928, [6]int32{0, 0, 2, 0, 8, 20}},
	{"fffefd", 998637092, [6]int32{0, 0, 2, 5, 8, 92}},
	{"fffefdfc", 2136149935, [6]int32{0, 1, 1, 3, 7, 35}},
	{"fffefdfcfb", 524068735, [6]int32{0, 1, 1, 1, 7, 35}},
	{"80000000", -65415266, [6]int32{0, 0, 0, 2, 6, 82}},
	{"6b61666b61", -798503068, [6]int32{0, 0, 1, 3, 4, 80}},             // "kafka"
	{"68656c6c6f20776f726c64", 1221641059, [6]int32{0, 1, 1, 2, 7, 59}}, // "hello world"
	{"6b65792d3030", -896837752, [6]int32{0, 0, 1, 3, 4, 96}},           // "key-00", as the interop clients send
	{"6b65792d3031", 1943113947, [6]int32{0, 1, 0, 5, 3, 47}},           // "key-01"
	{"6b65792d3037", -1578031205, [6]int32{0, 1, 0, 0, 3, 43}},          // "key-07"
	{"6b65792d3139", -1594098818, [6]int32{0, 0, 0, 5, 6, 30}},          // "key-19"
	{"e697a5e69cace8aa9e", 1431860170, [6]int32{0, 0, 1, 6, 10, 70}},    // "日本語" in UTF-8
	{"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f", -1328036143, [6]int32{0, 1, 1, 2, 1, 5}},
}

func TestMatchesJavaClient(t *testing.T) {
	for _, v := range javaVectors {
		key, err := hex.DecodeString(v.hex)
		if err != nil {
			t.Fatalf("bad vector %q: %v", v.hex, err)
		}
		if got := Murmur2(key); got != v.murmur2 {
			t.Errorf("Murmur2(%q) = %d, Java says %d", v.hex, got, v.murmur2)
		}
		for i, n := range partitionCounts {
			if got := Partition(key, n); got != v.parts[i] {
				t.Errorf("Partition(%q, %d) = %d, Java says %d", v.hex, n, got, v.parts[i])
			}
		}
	}
}

func TestNilKeyHashesLikeEmpty(t *testing.T) {
	if Murmur2(nil) != Murmur2([]byte{}) {
		t.Fatalf("Murmur2(nil) = %d, Murmur2(empty) = %d", Murmur2(nil), Murmur2([]byte{}))
	}
}

func TestPartitionWithoutPartitions(t *testing.T) {
	for _, n := range []int32{0, -1, math.MinInt32} {
		if got := Partition([]byte("k"), n); got != -1 {
			t.Errorf("Partition(k, %d) = %d, want -1", n, got)
		}
	}
}

func TestToPositive(t *testing.T) {
	for _, c := range []struct{ in, want int32 }{
		{0, 0},
		{1, 1},
		{math.MaxInt32, math.MaxInt32},
		{-1, math.MaxInt32},
		{math.MinInt32, 0}, // where an absolute value would overflow
		{-1563381124, 584102524},
	} {
		if got := toPositive(c.in); got != c.want {
			t.Errorf("toPositive(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPartitionInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		n := rapid.Int32Range(1, math.MaxInt32).Draw(t, "n")
		p := Partition(key, n)
		if p < 0 || p >= n {
			t.Fatalf("Partition(%x, %d) = %d, outside [0, %d)", key, n, p, n)
		}
		if p != Partition(key, n) {
			t.Fatalf("Partition(%x, %d) is not deterministic", key, n)
		}
	})
}

func TestNoAllocs(t *testing.T) {
	key := []byte("key-with-some-length")
	if a := testing.AllocsPerRun(100, func() { Partition(key, 12) }); a != 0 {
		t.Fatalf("Partition allocates %v times per call", a)
	}
}

func BenchmarkPartition(b *testing.B) {
	for _, size := range []int{8, 64, 1024} {
		key := make([]byte, size)
		for i := range key {
			key[i] = byte(i)
		}
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				Partition(key, 12)
			}
		})
	}
}
