package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/bench"
)

// TestParseTxnFlags: -txn-records and -txn-producers, and what each refuses.
func TestParseTxnFlags(t *testing.T) {
	for _, tc := range []struct {
		records, producers string
		sizes, counts      []int
		bad                string
	}{
		{records: "100,1000", producers: "1", sizes: []int{100, 1000}, counts: []int{1}},
		{records: "", producers: "1", counts: []int{1}},
		{records: "1000", producers: "1, 2,4,8", sizes: []int{1000}, counts: []int{1, 2, 4, 8}},
		{records: "1000", producers: "4", sizes: []int{1000}, counts: []int{4}},
		{records: "0", producers: "1", bad: "-txn-records"},
		{records: "1000", producers: "", bad: "-txn-producers"},
		{records: "1000", producers: "0", bad: "-txn-producers"},
		{records: "1000", producers: "2,x", bad: "-txn-producers"},
		{records: "1000", producers: "2,2", bad: "2 twice"},
		{records: "1000", producers: "65", bad: "at most 64"},
	} {
		sizes, counts, err := parseTxnFlags(tc.records, tc.producers)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q, %q: error %v, want one naming %q", tc.records, tc.producers, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(sizes, tc.sizes) || !slices.Equal(counts, tc.counts) {
			t.Errorf("%q, %q: %v, %v, %v; want %v, %v", tc.records, tc.producers, sizes, counts, err, tc.sizes, tc.counts)
		}
	}
}

// TestTxnWorkloads: the rows of each producer count, each run with its
// producers, the single-producer rows named as before.
func TestTxnWorkloads(t *testing.T) {
	only := workloads(options{txnOnly: true, txnRecords: []int{100}, txnProducers: []int{1, 4}})
	var names []string
	for _, wl := range only {
		names = append(names, wl.name)
	}
	want := []string{
		plainProduceRow,
		"produce 1 KiB in 100-record transactions, acks=all",
		"produce 1 KiB, acks=all, 4 producers",
		"produce 1 KiB in 100-record transactions, acks=all, 4 producers",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("-txn-only rows:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	slugs := map[string]bool{}
	for i, producers := range []int{1, 1, 4, 4} {
		c := workloadConfig(options{nodes: 1}, only[i], 1, []string{"127.0.0.1:1"})
		if c.Producers != producers || c.Partitions != 1 || c.Acks != bench.AcksAll || slugs[only[i].slug] ||
			(only[i].target != 0) != (i == 0) { // the base row's target only
			t.Errorf("%s: %d producers on %d partitions, acks %s, slug %q (seen: %v)", only[i].name, c.Producers, c.Partitions, c.Acks, only[i].slug, slugs[only[i].slug])
		}
		slugs[only[i].slug] = true
	}
	// The base rows hold the single-producer plain row once; no plain row
	// without transactional rows.
	base := workloads(options{txnRecords: []int{1000}, txnProducers: []int{1, 2}, e2eRates: []int{1000}})
	plain := 0
	for _, wl := range base {
		if wl.name == plainProduceRow {
			plain++
		}
	}
	if plain != 1 || len(txnWorkloads(nil, []int{1, 8}, 1)) != 0 {
		t.Fatalf("plain rows %d in the base rows; rows without transaction sizes %v", plain, txnWorkloads(nil, []int{1, 8}, 1))
	}
}

// TestTxnWorkloadsOverPartitions: with -txn-partitions every transactional
// row and the plain row it is set against run over that many partitions, the
// base plain row still over one, and the table pairs each with its own.
func TestTxnWorkloadsOverPartitions(t *testing.T) {
	only := workloads(options{txnOnly: true, txnRecords: []int{1000}, txnProducers: []int{1, 4}, txnPartitions: 4})
	want := []struct {
		name                  string
		producers, partitions int
	}{
		{plainProduceRow, 1, 1},
		{"produce 1 KiB, acks=all, 4 partitions", 1, 4},
		{"produce 1 KiB in 1000-record transactions, acks=all, 4 partitions", 1, 4},
		{"produce 1 KiB, acks=all, 4 producers, 4 partitions", 4, 4},
		{"produce 1 KiB in 1000-record transactions, acks=all, 4 producers, 4 partitions", 4, 4},
	}
	if len(only) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(only), len(want), only)
	}
	slugs := map[string]bool{}
	for i, w := range want {
		c := workloadConfig(options{nodes: 1}, only[i], 1, []string{"127.0.0.1:1"})
		if only[i].name != w.name || c.Producers != w.producers || int(c.Partitions) != w.partitions || slugs[only[i].slug] {
			t.Errorf("row %d: %q, %d producers on %d partitions, slug %q; want %q, %d on %d", i, only[i].name, c.Producers, c.Partitions, only[i].slug, w.name, w.producers, w.partitions)
		}
		slugs[only[i].slug] = true
	}
	p := &pairing{Name: "defaults", Workloads: only}
	for _, s := range []sample{
		{Workload: only[0].name, System: "strata", Value: 900},
		{Workload: only[1].name, System: "strata", Value: 600},
		{Workload: only[2].name, System: "strata", Value: 480, Result: bench.Result{CommitLatency: &bench.Latency{P50: 2, P99: 4}}},
	} {
		p.add(s)
	}
	var out bytes.Buffer
	p.writeTxnTable(&out)
	if !strings.Contains(out.String(), "| produce 1 KiB in 1000-record transactions, acks=all, 4 partitions | 2 | 0 | - | 4 | 0 | - | 0.80 | - |") {
		t.Fatalf("the 4-partition row is not set against its own plain row:\n%s", out.String())
	}
}

// TestTxnTable: the transactional rows' commit latencies (medians over rounds
// of p50 and p99) and each system's throughput over its own plain produce
// with as many producers.
func TestTxnTable(t *testing.T) {
	wls := append([]workload{plainRow(1, 1)}, txnWorkloads([]int{100}, []int{1, 4}, 1)...)
	if len(wls) != 4 || wls[1].txnRecords != 100 || wls[1].acks != bench.AcksAll || wls[3].producers != 4 {
		t.Fatalf("workloads %+v", wls)
	}
	p := &pairing{Name: "defaults", Workloads: wls}
	for _, s := range []struct {
		sys           string
		producers     int
		plain, txn    float64
		p50, p99      float64
		failed, noLat bool
	}{
		{"strata", 1, 200, 100, 4, 9, false, false},
		{"strata", 1, 200, 120, 6, 11, false, false},
		{"strata", 1, 200, 0, 0, 0, true, false},
		{"kafka", 1, 100, 80, 2, 3, false, false},
		{"kafka", 1, 100, 80, 2, 3, false, true},
		{"strata", 4, 400, 360, 8, 20, false, false},
		{"kafka", 4, 50, 10, 30, 60, false, false},
	} {
		plainName, txnName := wls[0].name, wls[1].name
		if s.producers == 4 {
			plainName, txnName = wls[2].name, wls[3].name
		}
		p.add(sample{Workload: plainName, System: s.sys, Value: s.plain})
		r := bench.Result{CommitLatency: &bench.Latency{P50: s.p50, P99: s.p99}}
		if s.noLat {
			r.CommitLatency = nil
		}
		ts := sample{Workload: txnName, System: s.sys, Value: s.txn, Result: r}
		if s.failed {
			ts.Err = "broker gone"
		}
		p.add(ts)
	}
	var out bytes.Buffer
	p.writeTxnTable(&out)
	for _, want := range []string{
		"| produce 1 KiB in 100-record transactions, acks=all | 5 | 2 | 2.50 | 10 | 3 | 3.33 | 0.55 | 0.80 |",
		"| produce 1 KiB in 100-record transactions, acks=all, 4 producers | 8 | 30 | 0.27 | 20 | 60 | 0.33 | 0.90 | 0.20 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	(&pairing{Workloads: wls[:1]}).writeTxnTable(&out)
	if out.Len() != 0 {
		t.Fatalf("a pairing without transactional rows printed:\n%s", out.String())
	}
}

// TestOnlyFiltersRows: -only keeps the rows whose name matches, in order.
func TestOnlyFiltersRows(t *testing.T) {
	o := options{e2eRates: []int{1000, 10000}, txnRecords: []int{1000}, txnProducers: []int{1}, only: regexp.MustCompile("e2e")}
	var names []string
	for _, wl := range workloads(o) {
		names = append(names, wl.name)
	}
	want := []string{"e2e 1 KiB at 1000/s, acks=all, linger 0", "e2e 1 KiB at 10000/s, acks=all, linger 0"}
	if !slices.Equal(names, want) {
		t.Fatalf("-only e2e rows %q, want %q", names, want)
	}
}
