package main

// Transactional rows (-txn-records): franz-go transactional producers
// committing a transaction every N records of 1 KiB (acks=all, as
// transactions require), against both systems. franz-go runs transaction
// version 2 against both: Kafka 4.4 and Strata finalize it, so the first produce
// of each transaction adds its partition implicitly. Compared on records/s in
// the main table; writeTxnTable adds the commit latency (flush and EndTxn) and
// each system's transactional throughput against its own plain acks=all
// produce, the figure issue 15's goal is set on (>= 0.8x at 1,000 records).
//
// -txn-producers runs the rows with several producers at once, as real
// transactional applications do (a Kafka Streams application with
// exactly_once_v2 has one per stream thread, Flink one per sink subtask): each
// with its own transactional id, all on the topic's one partition. For every
// count above 1 the plain acks=all row runs with as many producers, so that
// each system's own ratio sets equal concurrency against equal concurrency.
// The single-producer rows keep their names, so earlier figures compare.
//
// -txn-partitions spreads the rows over a topic of that many partitions: each
// producer's transactions then span them (franz-go's default partitioner
// moves on every 64 KiB), as a stream thread's output does, and the plain
// rows they are set against run over as many.

import (
	"fmt"
	"io"

	"github.com/strata-stream/strata/internal/bench"
)

// plainProduceRow is the row each system's single-producer transactional
// throughput is set against.
const plainProduceRow = "produce 1 KiB, acks=all"

// producersSuffix names a row's producer and partition counts: nothing for
// one of each.
func producersSuffix(n int, partitions int32) string {
	return countsSuffix(n, partitions, ", %d producers", ", %d partitions")
}

// plainRow is the plain acks=all produce row with n producers over a topic
// of partitions; only the single-producer, single-partition row, a base row,
// carries the target.
func plainRow(n int, partitions int32) workload {
	wl := workload{name: plainProduceRow + producersSuffix(n, partitions), slug: "p1k-aall" + slugSuffix(n, partitions), mode: "produce",
		size: 1024, acks: bench.AcksAll, producers: n, partitions: partitions}
	if n <= 1 && partitions <= 1 {
		wl.target = 1.5
	}
	return wl
}

// slugSuffix is producersSuffix in a topic name.
func slugSuffix(n int, partitions int32) string {
	return countsSuffix(n, partitions, "-p%d", "-n%d")
}

// countsSuffix formats n with producers and partitions with parts, each only
// when above 1.
func countsSuffix(n int, partitions int32, producers, parts string) string {
	s := ""
	if n > 1 {
		s = fmt.Sprintf(producers, n)
	}
	if partitions > 1 {
		s += fmt.Sprintf(parts, partitions)
	}
	return s
}

// maxTxnProducers bounds -txn-producers: every producer is a client of its
// own in this one load generator.
const maxTxnProducers = 64

// maxTxnPartitions bounds -txn-partitions: a transaction of 1,000 records
// over more partitions than that holds a record or none in each.
const maxTxnPartitions = 1000

// parseTxnFlags reads -txn-records ("": no transactional rows) and
// -txn-producers.
func parseTxnFlags(records, producers string) (sizes, counts []int, err error) {
	if records != "" {
		if sizes, err = parseInts(records); err != nil {
			return nil, nil, fmt.Errorf("-txn-records %q: want positive integers, comma-separated", records)
		}
	}
	if counts, err = parseInts(producers); err != nil {
		return nil, nil, fmt.Errorf("-txn-producers %q: want positive integers, comma-separated", producers)
	}
	seen := map[int]bool{}
	for _, n := range counts {
		switch {
		case n > maxTxnProducers:
			return nil, nil, fmt.Errorf("-txn-producers %q: at most %d producers", producers, maxTxnProducers)
		case seen[n]:
			return nil, nil, fmt.Errorf("-txn-producers %q: %d twice", producers, n)
		}
		seen[n] = true
	}
	return sizes, counts, nil
}

// txnWorkloads are the transactional produce rows over topics of partitions:
// per producer count, the plain acks=all row with that many producers and
// partitions (except for one of each: that one is a base row) and one row
// per transaction size.
func txnWorkloads(sizes, producers []int, partitions int32) []workload {
	var wls []workload
	for _, p := range producers {
		if (p > 1 || partitions > 1) && len(sizes) > 0 {
			wls = append(wls, plainRow(p, partitions))
		}
		for _, n := range sizes {
			wls = append(wls, workload{name: fmt.Sprintf("produce 1 KiB in %d-record transactions, acks=all", n) + producersSuffix(p, partitions),
				slug: fmt.Sprintf("txn%d", n) + slugSuffix(p, partitions), mode: "produce", size: 1024, acks: bench.AcksAll,
				txnRecords: n, producers: p, partitions: partitions})
		}
	}
	return wls
}

// txnOnlyWorkloads are the rows of a -txn-only run: the plain produce row of
// base and the transactional rows.
func txnOnlyWorkloads(base []workload, sizes, producers []int, partitions int32) []workload {
	var wls []workload
	for _, wl := range base {
		if wl.name == plainProduceRow {
			wls = append(wls, wl)
		}
	}
	return append(wls, txnWorkloads(sizes, producers, partitions)...)
}

// writeTxnTable prints, per transactional row, the medians over rounds of the
// commit latency's p50 and p99, and each system's records/s over its own
// plain produce's with as many producers (medians of both rows).
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
		plain := plainRow(wl.producers, wl.partitions).name
		s50, k50 := median(by["strata"].p50), median(by["kafka"].p50)
		s99, k99 := median(by["strata"].p99), median(by["kafka"].p99)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", wl.name,
			figure(s50), figure(k50), ratioText(s50, k50), figure(s99), figure(k99), ratioText(s99, k99),
			ratioText(median(p.resultsByWS[[2]string{wl.name, "strata"}]), median(p.resultsByWS[[2]string{plain, "strata"}])),
			ratioText(median(p.resultsByWS[[2]string{wl.name, "kafka"}]), median(p.resultsByWS[[2]string{plain, "kafka"}])))
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
