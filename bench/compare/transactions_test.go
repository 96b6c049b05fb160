package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/bench"
)

// TestTxnTable: the transactional rows' commit latencies (medians over rounds
// of p50 and p99) and each system's throughput over its own plain produce.
func TestTxnTable(t *testing.T) {
	wls := append([]workload{{name: plainProduceRow, mode: "produce"}}, txnWorkloads([]int{100})...)
	if wls[1].txnRecords != 100 || wls[1].acks != bench.AcksAll {
		t.Fatalf("transactional workload %+v", wls[1])
	}
	if only := workloads(options{txnOnly: true, txnRecords: []int{100}}); len(only) != 2 || only[0].name != plainProduceRow || only[1].name != wls[1].name {
		t.Fatalf("-txn-only rows %+v", only)
	}
	p := &pairing{Name: "defaults", Workloads: wls}
	for _, s := range []struct {
		sys           string
		plain, txn    float64
		p50, p99      float64
		failed, noLat bool
	}{
		{"strata", 200, 100, 4, 9, false, false},
		{"strata", 200, 120, 6, 11, false, false},
		{"strata", 200, 0, 0, 0, true, false},
		{"kafka", 100, 80, 2, 3, false, false},
		{"kafka", 100, 80, 2, 3, false, true},
	} {
		p.add(sample{Workload: plainProduceRow, System: s.sys, Value: s.plain})
		r := bench.Result{CommitLatency: &bench.Latency{P50: s.p50, P99: s.p99}}
		if s.noLat {
			r.CommitLatency = nil
		}
		ts := sample{Workload: wls[1].name, System: s.sys, Value: s.txn, Result: r}
		if s.failed {
			ts.Err = "broker gone"
		}
		p.add(ts)
	}
	var out bytes.Buffer
	p.writeTxnTable(&out)
	want := "| produce 1 KiB in 100-record transactions, acks=all | 5 | 2 | 2.50 | 10 | 3 | 3.33 | 0.55 | 0.80 |"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	(&pairing{Workloads: wls[:1]}).writeTxnTable(&out)
	if out.Len() != 0 {
		t.Fatalf("a pairing without transactional rows printed:\n%s", out.String())
	}
}
