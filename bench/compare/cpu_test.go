package main

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/bench"
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
	spin := time.Now()
	for time.Since(spin) < 20*time.Millisecond {
	}
	after, err := readClientCounts()
	if err != nil {
		t.Fatal(err)
	}
	got := after.since(before)
	if got.minorFaults < size/(2<<20) || got.gcCycles < 1 || got.cpuSeconds <= 0 {
		t.Fatalf("after touching %d MiB, a GC and 20 ms of work: %d page faults, %d GC cycles, %.3f CPU s", size>>20, got.minorFaults, got.gcCycles, got.cpuSeconds)
	}
}

// TestClientTable: the load generator's figures are medians over a produce
// workload's rounds, per system; failed rounds and other modes are left out.
func TestClientTable(t *testing.T) {
	wl := workload{name: "produce 100 B, acks=all", mode: "produce"}
	run := func(sys string, records int64, cpu float64, reqs, bytes int64) sample {
		return sample{Workload: wl.name, System: sys, Result: bench.Result{Mode: "produce", Records: records, ElapsedSeconds: 2},
			ClientCPUSeconds: cpu, ClientProduceRequests: reqs, ClientProduceBytes: bytes}
	}
	p := &pairing{Workloads: []workload{wl}, Samples: []sample{
		run("strata", 2_000_000, 1.8, 400, 400_000_000),
		run("strata", 4_000_000, 2.0, 800, 800_000_000),
		run("kafka", 2_000_000, 2.0, 200, 200_000_000),
		{Workload: wl.name, System: "kafka", Err: "failed", ClientCPUSeconds: 9},
	}}
	var out strings.Builder
	p.writeClientTable(&out)
	want := "| produce 100 B, acks=all | 0.7 / 1 | 0.95 / 1 | 300 / 100 | 1000 / 1000 |"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("client table:\n%s\nwant the row %q", out.String(), want)
	}
}
