package main

import "testing"

func TestFanoutSummary(t *testing.T) {
	got := fanoutSummary(5, map[string][]float64{"strata": {0.95, 0.85, 0.97}, "kafka": {0.8}})
	want := "Producer throughput with 5 readers over without, median of the per-round ratios: " +
		"Strata 0.95 (rounds 0.95 / 0.85 / 0.97), goal >= 0.9: met; Kafka 0.80 (rounds 0.80)."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = fanoutSummary(5, map[string][]float64{"strata": {0.5}})
	want = "Producer throughput with 5 readers over without, median of the per-round ratios: " +
		"Strata 0.50 (rounds 0.50), goal >= 0.9: **not met**; Kafka no complete round."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
