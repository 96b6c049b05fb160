package bench

import (
	"os"
	"testing"
)

func TestProcessCPUReadsThisProcess(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 200_000_000 { // burn some CPU so the clock ticks
		x += i % 7
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("CPU time %.2f s then %.2f s (%v, %d)", before, after, err, x)
	}
}

func TestReadCounters(t *testing.T) {
	if _, err := readCounters([]int{os.Getpid(), os.Getpid()}); err != nil {
		t.Fatalf("this process's counters: %v", err)
	}
	if _, err := readCounters([]int{-1}); err == nil {
		t.Fatal("counters of pid -1: no error")
	}
}
