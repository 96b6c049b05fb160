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

// TestFanoutServedCost: the CPU charged to serving the readers is what the run
// with readers cost beyond producing its GB at the same round's cost per GB
// without readers.
func TestFanoutServedCost(t *testing.T) {
	r := fanoutRound{
		without: fanoutCost{brokerCPU: 2, clientCPU: 4, produced: 2},              // 1 and 2 s per GB produced
		with:    fanoutCost{brokerCPU: 2.5, clientCPU: 5, produced: 1, served: 5}, // 1.5 and 3 s beyond
	}
	broker, client, ok := r.servedCost()
	if !ok || broker != 0.3 || client != 0.6 {
		t.Errorf("servedCost = %v, %v, %v; want 0.3, 0.6, true", broker, client, ok)
	}
	if _, _, ok := (fanoutRound{with: r.with}).servedCost(); ok {
		t.Error("a round without its run without readers was costed")
	}
	got := fanoutCostSummary(map[string][]fanoutRound{"strata": {r}})
	want := "CPU seconds (medians; per GB served: the run's CPU with readers less the same round's CPU per GB produced without them, " +
		"times the GB produced, over the GB of Fetch responses): Strata broker 1.000 per GB produced, 0.300 per GB served (rounds 0.30); " +
		"load generator 2.000 per GB produced, 0.600 per GB read (rounds 0.60); Kafka no complete round."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
