package main

// Transactional rows (-txn-records): one franz-go transactional producer per
// run, committing a transaction every N records of 1 KiB (acks=all, as
// transactions require), against both systems. franz-go runs transaction
// version 2 against both: Kafka 4.4 and Strata finalize it, so the first produce
// of each transaction adds its partition implicitly. Compared on records/s in
// the main table; writeTxnTable adds the commit latency (flush and EndTxn) and
// each system's transactional throughput against its own plain acks=all
// produce, the figure issue 15's goal is set on (>= 0.8x at 1,000 records).

import (
	"fmt"
	"io"

	"github.com/strata-stream/strata/internal/bench"
)

// plainProduceRow is the row each system's transactional throughput is set
// against.
const plainProduceRow = "produce 1 KiB, acks=all"

// txnWorkloads are the transactional produce rows, one per transaction size.
func txnWorkloads(sizes []int) []workload {
	var wls []workload
	for _, n := range sizes {
		wls = append(wls, workload{name: fmt.Sprintf("produce 1 KiB in %d-record transactions, acks=all", n),
			slug: fmt.Sprintf("txn%d", n), mode: "produce", size: 1024, acks: bench.AcksAll, txnRecords: n})
	}
	return wls
}

// txnOnlyWorkloads are the rows of a -txn-only run: the plain produce row of
// base and the transactional rows.
func txnOnlyWorkloads(base []workload, sizes []int) []workload {
	var wls []workload
	for _, wl := range base {
		if wl.name == plainProduceRow {
			wls = append(wls, wl)
		}
	}
	return append(wls, txnWorkloads(sizes)...)
}

// writeTxnTable prints, per transactional row, the medians over rounds of the
// commit latency's p50 and p99, and each system's records/s over its own
// plain produce's (medians of both rows).
func (p *pairing) writeTxnTable(w io.Writer) {
	type commits struct{ p50, p99 []float64 }
	rows := 0
	for _, wl := range p.Workloads {
		if wl.txnRecords == 0 {
			continue
		}
		by := map[string]*commits{"strata": {}, "kafka": {}}
		for _, s := range p.Samples {
			c := by[s.System]
			if s.Workload != wl.name || s.Err != "" || s.Result.CommitLatency == nil || c == nil {
				continue
			}
			c.p50 = append(c.p50, s.Result.CommitLatency.P50)
			c.p99 = append(c.p99, s.Result.CommitLatency.P99)
		}
		if rows == 0 {
			fmt.Fprintln(w, "| transactions | commit p50 ms, Strata | Kafka | Strata / Kafka | commit p99 ms, Strata | Kafka | Strata / Kafka | records/s over plain produce, Strata | Kafka |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		}
		rows++
		s50, k50 := median(by["strata"].p50), median(by["kafka"].p50)
		s99, k99 := median(by["strata"].p99), median(by["kafka"].p99)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", wl.name,
			figure(s50), figure(k50), ratioText(s50, k50), figure(s99), figure(k99), ratioText(s99, k99),
			ratioText(median(p.resultsByWS[[2]string{wl.name, "strata"}]), median(p.resultsByWS[[2]string{plainProduceRow, "strata"}])),
			ratioText(median(p.resultsByWS[[2]string{wl.name, "kafka"}]), median(p.resultsByWS[[2]string{plainProduceRow, "kafka"}])))
	}
	if rows > 0 {
		fmt.Fprintln(w)
	}
}

// ratioText is a/b to two decimals, or "-" without both.
func ratioText(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
