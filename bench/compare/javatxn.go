package main

// The Java client's produce pattern (-java-txn): Kafka's ProducerPerformance
// (the Java client at its defaults: 16 KiB batches, linger 5 ms, up to five
// requests in flight, idempotent) sends 1 KiB records with acks=all, without
// transactions and with transactions of each duration asked for
// (--transaction-duration-ms), against both systems in alternating rounds.
// Each run takes the brokers' CPU and the client's, both per MB, so a
// client-bound run shows as one. On a one-node Strata each run also reads
// /metrics before and after: the data partition's fsyncs and the Produce requests per MB, and the fsyncs per
// transaction (per EndTxn). franz-go's transactional rows send a transaction
// of 1 KiB records as one 1 MB batch; this is the pattern of the Java client
// and of Kafka Streams with exactly_once_v2.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// javaTxnTopic is the topic of every -java-txn run (deleted after each run).
const javaTxnTopic = "java-txn"

func runJavaTxn(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	t := &extraTable{Title: fmt.Sprintf("Java client, %d records of 1 KiB, acks=all (ProducerPerformance)", o.extras.javaTxnRecords)}
	p.Extras = append(p.Extras, t)
	durations := append([]int{0}, o.extras.javaTxnMillis...)
	for _, ms := range durations {
		row := "no transactions"
		if ms > 0 {
			row = fmt.Sprintf("transactions of %d ms", ms)
		}
		run := func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
			return javaTxnRun(ctx, o, brokers[sys], ms, round)
		}
		if err := alternate(ctx, o, p, brokers, t, row, run); err != nil {
			return err
		}
	}
	return nil
}

// javaTxnRun runs ProducerPerformance once against b, with transactions of
// ms (0: none), and measures it.
func javaTxnRun(ctx context.Context, o options, b *system, ms, round int) ([]measure, any, error) {
	args := []string{"--topic", javaTxnTopic, "--num-records", strconv.Itoa(o.extras.javaTxnRecords),
		"--record-size", "1024", "--throughput", "-1"}
	if ms > 0 {
		args = append(args, "--transactional-id", fmt.Sprintf("java-txn-%d-r%d", ms, round),
			"--transaction-duration-ms", strconv.Itoa(ms))
	}
	args = append(args, "--producer-props", "bootstrap.servers="+strings.Join(b.seeds, ","), "acks=all")
	var before map[counterKey]float64
	if b.metricsURL != "" {
		var err error
		if before, err = scrapeCounters(b.metricsURL); err != nil {
			return nil, nil, err
		}
	}
	cpuBefore, err := b.cpuSeconds()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// The child inherits this process's CPUs (-pin-client).
	cmd := exec.CommandContext(ctx, o.java, append([]string{"-Xmx512M",
		"-cp", filepath.Join(o.jars, "*"), "org.apache.kafka.tools.ProducerPerformance"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(out), fmt.Errorf("ProducerPerformance: %w", err)
	}
	summary, err := parsePerfSummary(string(out))
	if err != nil {
		return nil, string(out), err
	}
	cpuAfter, err := b.cpuSeconds()
	if err != nil {
		return nil, summary.line, err
	}
	mb := float64(o.extras.javaTxnRecords) * 1024 / 1e6
	clientCPU := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	measures := []measure{
		{metric: "records/s", value: summary.recordsPerSec},
		{metric: "avg latency ms", value: summary.avgLatencyMS, lowerIsBetter: true},
		{metric: "broker CPU ms per MB", value: (cpuAfter - cpuBefore) * 1000 / mb, lowerIsBetter: true},
		{metric: "client CPU ms per MB", value: clientCPU * 1000 / mb, lowerIsBetter: true},
	}
	if before == nil {
		return measures, summary.line, nil
	}
	after, err := scrapeCounters(b.metricsURL)
	if err != nil {
		return nil, summary.line, err
	}
	measures = append(measures, strataProduceCounts(before, after, mb)...)
	return measures, summary.line, nil
}

// strataProduceCounts are the data partition's fsyncs and the Produce
// requests per MB between two scrapes, requests per fsync, and with
// transactions the fsyncs per transaction.
func strataProduceCounts(before, after map[counterKey]float64, mb float64) []measure {
	delta := func(k counterKey) float64 { return after[k] - before[k] }
	var fsyncs float64
	for k := range after {
		if k.kind == fsyncsOf && strings.HasPrefix(k.label, javaTxnTopic+"/") {
			fsyncs += delta(k)
		}
	}
	produces := delta(counterKey{requestsOf, "Produce"})
	ms := []measure{
		{metric: "data fsyncs per MB", value: fsyncs / mb, lowerIsBetter: true},
		{metric: "Produce requests per MB", value: produces / mb, lowerIsBetter: true},
	}
	if fsyncs > 0 {
		ms = append(ms, measure{metric: "Produce requests per fsync", value: produces / fsyncs})
	}
	if txns := delta(counterKey{requestsOf, "EndTxn"}); txns > 0 {
		ms = append(ms, measure{metric: "data fsyncs per transaction", value: fsyncs / txns, lowerIsBetter: true})
	}
	return ms
}

// perfSummary is ProducerPerformance's closing line.
type perfSummary struct {
	line          string
	recordsPerSec float64
	avgLatencyMS  float64
}

var perfSummaryLine = regexp.MustCompile(`\d+ records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), ([\d.]+) ms avg latency`)

// parsePerfSummary reads the last summary line of ProducerPerformance's
// output: the closing one, over the whole run (the periodic lines before it
// have the same form, over a few seconds each).
func parsePerfSummary(out string) (perfSummary, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m := perfSummaryLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		rate, err1 := strconv.ParseFloat(m[1], 64)
		lat, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil {
			break
		}
		return perfSummary{line: strings.TrimSpace(lines[i]), recordsPerSec: rate, avgLatencyMS: lat}, nil
	}
	return perfSummary{}, fmt.Errorf("no ProducerPerformance summary line in its output")
}
