package main

import (
	"os"
	"testing"
)

func TestProcessCPUReadsThisProcess(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 200_000_000 { // burn some CPU so the clock ticks
		x += i % 7
	}
	after, err := processCPU(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("CPU time %.2f s then %.2f s (%v, %d)", before, after, err, x)
	}
}

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
