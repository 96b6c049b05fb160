package main

import (
	"testing"

	"github.com/strata-stream/strata/internal/bench"
)

func TestOMBMeasures(t *testing.T) {
	res := bench.Result{ProducedPerSec: 9500, Latency: bench.Latency{P99: 12},
		ProduceLatency: &bench.Latency{P50: 2, P99: 7}}
	got := ombMeasures(res)
	want := []measure{
		{metric: "achieved records/s", value: 9500},
		{metric: "publish p50 ms", value: 2, lowerIsBetter: true},
		{metric: "publish p99 ms", value: 7, lowerIsBetter: true},
		{metric: "e2e p99 ms", value: 12, lowerIsBetter: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("measure %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOMBSummary(t *testing.T) {
	for _, tc := range []struct {
		sustained, saturated map[string]int
		want                 string
	}{
		{map[string]int{"strata": 50_000, "kafka": 20_000}, map[string]int{"strata": 100_000, "kafka": 50_000},
			"Strata kept up with 50k records/s, fell behind at 100k; Kafka kept up with 20k records/s, fell behind at 50k."},
		{map[string]int{"strata": 200_000}, map[string]int{"kafka": 1000},
			"Strata kept up with 200k records/s (the highest step); Kafka kept up with no step, fell behind at 1000."},
	} {
		if got := ombSummary(tc.sustained, tc.saturated); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
