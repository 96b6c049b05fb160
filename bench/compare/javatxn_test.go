package main

import (
	"testing"
)

func TestParsePerfSummary(t *testing.T) {
	for _, tc := range []struct {
		name      string
		out       string
		rate, lat float64
		ok        bool
	}{
		{"closing line after periodic ones", `SLF4J: No SLF4J providers were found.
120346 records sent, 24069.2 records/sec (23.51 MB/sec), 1109.1 ms avg latency, 1553.0 ms max latency.
300000 records sent, 25431.730303 records/sec (24.84 MB/sec), 1065.49 ms avg latency, 1601.00 ms max latency, 1041 ms 50th, 1479 ms 95th, 1563 ms 99th, 1597 ms 99.9th.
`, 25431.730303, 1065.49, true},
		{"no summary", "Exception in thread \"main\" org.apache.kafka.common.errors.TimeoutException\n", 0, 0, false},
	} {
		got, err := parsePerfSummary(tc.out)
		if (err == nil) != tc.ok {
			t.Fatalf("%s: error %v, want ok %v", tc.name, err, tc.ok)
		}
		if got.recordsPerSec != tc.rate || got.avgLatencyMS != tc.lat {
			t.Errorf("%s: %v records/s, %v ms; want %v, %v", tc.name, got.recordsPerSec, got.avgLatencyMS, tc.rate, tc.lat)
		}
	}
}

func TestStrataProduceCounts(t *testing.T) {
	before := map[counterKey]float64{
		{fsyncsOf, javaTxnTopic + "/0"}:     10,
		{fsyncsOf, "other/0"}:               5,
		{requestsOf, "Produce"}:             100,
		{requestsOf, "EndTxn"}:              1,
		{fsyncsOf, "__transaction_state/3"}: 2,
	}
	after := map[counterKey]float64{
		{fsyncsOf, javaTxnTopic + "/0"}:     70,
		{fsyncsOf, "other/0"}:               500,
		{requestsOf, "Produce"}:             400,
		{requestsOf, "EndTxn"}:              4,
		{fsyncsOf, "__transaction_state/3"}: 9,
	}
	got := map[string]float64{}
	for _, m := range strataProduceCounts(before, after, 3) {
		got[m.metric] = m.value
	}
	want := map[string]float64{
		"data fsyncs per MB":          20,
		"Produce requests per MB":     100,
		"Produce requests per fsync":  5,
		"data fsyncs per transaction": 20,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("measures %v, want %v", got, want)
	}
}
