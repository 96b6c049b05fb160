package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, tc.q); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its argument")
	}
}

func TestFetchSessionSummary(t *testing.T) {
	got := fetchSessionSummary(1000, map[string][2]float64{"strata": {31000, 120}, "kafka": {31000, 29000}})
	want := "Fetch requests of an idle consumer of 1000 partitions: Strata first 31k B, median of the rest 120 B: " +
		"incremental (later requests under a tenth of the first); Kafka first 31k B, median of the rest 29k B: **not incremental**."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = fetchSessionSummary(10, map[string][2]float64{})
	want = "Fetch requests of an idle consumer of 10 partitions: Strata no fetches recorded; Kafka no fetches recorded."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
