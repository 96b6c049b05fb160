package main

import (
	"runtime"
	"testing"
)

func TestParseCPUs(t *testing.T) {
	set, err := parseCPUs("0,3")
	if err != nil || !set.IsSet(0) || !set.IsSet(3) || set.IsSet(1) || set.Count() != 2 {
		t.Fatalf("parseCPUs(0,3) = %v, %v", set, err)
	}
	for _, bad := range []string{"", "a", "1-2", "-1"} {
		if _, err := parseCPUs(bad); err == nil {
			t.Errorf("parseCPUs(%q) accepted", bad)
		}
	}
}

// TestClientCounts: touching fresh memory shows as page faults (at least one
// per 2 MiB, should the kernel back it with huge pages), and a forced
// collection as a GC cycle.
func TestClientCounts(t *testing.T) {
	before, err := readClientCounts()
	if err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	runtime.GC()
	after, err := readClientCounts()
	if err != nil {
		t.Fatal(err)
	}
	got := after.since(before)
	if got.minorFaults < size/(2<<20) || got.gcCycles < 1 {
		t.Fatalf("after touching %d MiB and a GC: %d page faults, %d GC cycles", size>>20, got.minorFaults, got.gcCycles)
	}
}
