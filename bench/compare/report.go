package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/strata-stream/strata/internal/bench"
)

// workload is one line of the comparison.
type workload struct {
	name string // as printed
	slug string // in topic names
	mode string // produce, pre-encoded (preencoded.go), consume or e2e
	size int
	acks string
	// compression is the producers' codec; "" = none.
	compression string
	rate        int   // records/s; 0 = unthrottled
	txnRecords  int   // records per transaction (transactions.go); 0 = none
	producers   int   // producer clients (produce rows); 0 = 1
	partitions  int32 // of the row's topic; 0 = 1
	// topicCodec is the compression.type its topic is created with (the
	// brokers compress); "" = the brokers' default.
	topicCodec string
	// payload is what its records' values hold (bench.PayloadText or, when
	// "", bench.PayloadLetters).
	payload string
	// lowerIsBetter: the metric is a latency (e2e p99), not a throughput.
	lowerIsBetter bool
	// target is the Strata/Kafka ratio the issue asks for: at least it for a
	// throughput, at most it for a latency; 0 = none.
	target float64
}

func (w workload) codec() string {
	if w.compression == "" {
		return "none"
	}
	return w.compression
}

// metric is the figure a workload is compared on.
func (w workload) metric(r bench.Result) float64 {
	if w.mode == "e2e" {
		return r.Latency.P99
	}
	return r.RecordsPerSec
}

func (w workload) unit() string {
	if w.mode == "e2e" {
		return "p99 ms"
	}
	return "records/s"
}

// sample is one measured run.
type sample struct {
	Pairing  string       `json:"pairing"`
	Workload string       `json:"workload"`
	System   string       `json:"system"`
	Round    int          `json:"round"`
	Value    float64      `json:"value"` // the workload's metric
	Result   bench.Result `json:"result"`
	// BrokerCPUSeconds is the user and system CPU time the broker processes
	// used during the run (/proc/PID/stat).
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds"`
	// ClientMinorFaults and ClientGCCycles are what the run cost the load
	// generator (this process): page faults and garbage-collection cycles.
	ClientMinorFaults int64  `json:"client_minor_faults"`
	ClientGCCycles    uint64 `json:"client_gc_cycles"`
	// ClientCPUSeconds is the load generator's user and system CPU time
	// during the run; ClientProduceRequests and ClientProduceBytes are the
	// Produce requests its clients wrote and their bytes.
	ClientCPUSeconds      float64 `json:"client_cpu_seconds"`
	ClientProduceRequests int64   `json:"client_produce_requests"`
	ClientProduceBytes    int64   `json:"client_produce_bytes"`
	// StrataTxnCounts are a transactional run's counts on one Strata node,
	// per transaction (txncounts.go).
	StrataTxnCounts *txnCounts `json:"strata_txn_counts,omitempty"`
	// HostReportedKiB is the free memory the kernel reported to its host
	// during the run (hostmem.go).
	HostReportedKiB int64  `json:"host_reported_kib,omitempty"`
	Err             string `json:"error,omitempty"`
}

// pairing is one configuration of the two systems and everything measured in it.
type pairing struct {
	Name        string                  `json:"name"`
	Kafka       string                  `json:"kafka"` // how Kafka was configured
	Note        string                  `json:"note,omitempty"`
	Samples     []sample                `json:"samples"`
	StartupMS   map[string]float64      `json:"startup_ms"`
	RSSKiB      map[string]int64        `json:"rss_kib"`
	PeakRSSKiB  map[string]int64        `json:"peak_rss_kib"`
	PerfTest    map[string]perfTestRun  `json:"perf_test,omitempty"`
	Workloads   []workload              `json:"-"`
	Errors      []string                `json:"errors,omitempty"`
	Extras      []*extraTable           `json:"extras,omitempty"`
	resultsByWS map[[2]string][]float64 // (workload, system) -> values in round order
	cpuPerGBWS  map[[2]string][]float64 // (workload, system) -> broker CPU s per GB of values
}

// perfTestRun is one run of Kafka's ProducerPerformance.
type perfTestRun struct {
	Args   string `json:"args"`
	Output string `json:"output"`
	Err    string `json:"error,omitempty"`
	// The run's wall time, from the JVM's start to its exit, and the CPU
	// seconds the JVM (user + system) and the brokers took in that time: a
	// client near one core is the run's bound, whichever broker it measures.
	WallSeconds      float64 `json:"wall_seconds,omitempty"`
	ClientCPUSeconds float64 `json:"client_cpu_seconds,omitempty"`
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
}

func (p *pairing) add(s sample) {
	p.Samples = append(p.Samples, s)
	if s.Err != "" {
		p.Errors = append(p.Errors, fmt.Sprintf("%s, %s, round %d: %s", s.Workload, s.System, s.Round, s.Err))
		return
	}
	if p.resultsByWS == nil {
		p.resultsByWS = map[[2]string][]float64{}
	}
	k := [2]string{s.Workload, s.System}
	p.resultsByWS[k] = append(p.resultsByWS[k], s.Value)
	if s.BrokerCPUSeconds > 0 && s.Result.Bytes > 0 {
		if p.cpuPerGBWS == nil {
			p.cpuPerGBWS = map[[2]string][]float64{}
		}
		p.cpuPerGBWS[k] = append(p.cpuPerGBWS[k], s.BrokerCPUSeconds/(float64(s.Result.Bytes)/1e9))
	}
}

// median of the values (0 if none).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// verdict says whether ratio meets target ("" when there is no target or no
// ratio).
func verdict(ratio, target float64, lowerIsBetter bool) string {
	switch {
	case target == 0 || ratio == 0:
		return ""
	case lowerIsBetter && ratio <= target, !lowerIsBetter && ratio >= target:
		return "met"
	}
	return "**not met**"
}

// figure prints a value compactly: 3 significant digits, k/M suffixes for large.
func figure(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func figures(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = figure(v)
	}
	return strings.Join(parts, " / ")
}

// rssTarget is the bound on Strata's RSS relative to Kafka's.
const rssTarget = 0.2

// cpuTarget is the bound on Strata's broker CPU per GB relative to Kafka's.
const cpuTarget = 0.3

// writeTable prints the pairing as a Markdown table of Strata/Kafka ratios.
func (p *pairing) writeTable(w io.Writer) {
	fmt.Fprintf(w, "#### %s (Kafka: %s)\n\n", p.Name, p.Kafka)
	fmt.Fprintln(w, "| workload | metric | Strata (median) | Kafka (median) | Strata / Kafka | target | Strata rounds | Kafka rounds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, wl := range p.Workloads {
		s := p.resultsByWS[[2]string{wl.name, "strata"}]
		k := p.resultsByWS[[2]string{wl.name, "kafka"}]
		ms, mk := median(s), median(k)
		ratio := 0.0
		if mk > 0 {
			ratio = ms / mk
		}
		target := ""
		if wl.target > 0 {
			op := ">="
			if wl.lowerIsBetter {
				op = "<="
			}
			target = fmt.Sprintf("%s %.2g: %s", op, wl.target, verdict(ratio, wl.target, wl.lowerIsBetter))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | **%.2f** | %s | %s | %s |\n",
			wl.name, wl.unit(), figure(ms), figure(mk), ratio, target, figures(s), figures(k))
	}
	if rs, rk := p.RSSKiB["strata"], p.RSSKiB["kafka"]; rs > 0 && rk > 0 {
		r := float64(rs) / float64(rk)
		fmt.Fprintf(w, "| broker RSS after the runs | MiB | %.0f | %.0f | **%.2f** | <= %.2g: %s | | |\n",
			float64(rs)/1024, float64(rk)/1024, r, rssTarget, verdict(r, rssTarget, true))
	}
	if rs, rk := p.PeakRSSKiB["strata"], p.PeakRSSKiB["kafka"]; rs > 0 && rk > 0 {
		fmt.Fprintf(w, "| broker peak RSS (VmHWM) | MiB | %.0f | %.0f | %.2f | | | |\n",
			float64(rs)/1024, float64(rk)/1024, float64(rs)/float64(rk))
	}
	if ss, sk := p.StartupMS["strata"], p.StartupMS["kafka"]; ss > 0 && sk > 0 {
		fmt.Fprintf(w, "| startup to first ApiVersions + Metadata | ms | %.0f | %.0f | %.2f | | | |\n", ss, sk, ss/sk)
	}
	fmt.Fprintln(w)
	p.writeTxnTable(w)
	p.writeTxnCountsTable(w)
	p.writeCPUTable(w)
	p.writeClientTable(w)
	writeNoteAndFailures(w, p.Note, p.Errors)
}

// writeNoteAndFailures prints a table's note and its failed runs.
func writeNoteAndFailures(w io.Writer, note string, failures []string) {
	if note != "" {
		fmt.Fprintf(w, "%s\n\n", note)
	}
	if len(failures) > 0 {
		fmt.Fprintln(w, "Failed runs (not in the medians):")
		fmt.Fprintln(w)
		for _, e := range failures {
			fmt.Fprintf(w, "- %s\n", e)
		}
		fmt.Fprintln(w)
	}
}

// writeCPUTable prints the brokers' CPU seconds per GB of record values moved,
// per workload. Throughput runs are unthrottled, so the two brokers moved
// different amounts in the same time: per GB is what compares.
func (p *pairing) writeCPUTable(w io.Writer) {
	if len(p.cpuPerGBWS) == 0 {
		return
	}
	fmt.Fprintln(w, "| workload | broker CPU s per GB, Strata (median) | Kafka (median) | Strata / Kafka | target | Strata rounds | Kafka rounds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, wl := range p.Workloads {
		s := p.cpuPerGBWS[[2]string{wl.name, "strata"}]
		k := p.cpuPerGBWS[[2]string{wl.name, "kafka"}]
		if len(s) == 0 || len(k) == 0 {
			continue
		}
		ms, mk := median(s), median(k)
		ratio := ms / mk
		fmt.Fprintf(w, "| %s | %s | %s | **%.2f** | <= %.2g: %s | %s | %s |\n",
			wl.name, figure(ms), figure(mk), ratio, cpuTarget, verdict(ratio, cpuTarget, true), figures(s), figures(k))
	}
	fmt.Fprintln(w)
}

// writeClientTable prints, per produce workload, what the load generator did
// against each system (medians over rounds): its CPU per record and the share
// of a core it used (near 1 with -pin-client: the client, not the broker,
// bounds the rate), and the Produce requests it wrote: per second and their
// mean size.
func (p *pairing) writeClientTable(w io.Writer) {
	type figs struct{ usPerRecord, cores, reqPerSec, kbPerReq []float64 }
	by := map[[2]string]*figs{}
	for _, s := range p.Samples {
		r := s.Result
		if s.Err != "" || r.Mode != "produce" || r.Records == 0 || r.ElapsedSeconds <= 0 || s.ClientCPUSeconds <= 0 {
			continue
		}
		k := [2]string{s.Workload, s.System}
		f := by[k]
		if f == nil {
			f = &figs{}
			by[k] = f
		}
		f.usPerRecord = append(f.usPerRecord, s.ClientCPUSeconds/float64(r.Records)*1e6)
		f.cores = append(f.cores, s.ClientCPUSeconds/r.ElapsedSeconds)
		f.reqPerSec = append(f.reqPerSec, float64(s.ClientProduceRequests)/r.ElapsedSeconds)
		if s.ClientProduceRequests > 0 {
			f.kbPerReq = append(f.kbPerReq, float64(s.ClientProduceBytes)/float64(s.ClientProduceRequests)/1e3)
		}
	}
	if len(by) == 0 {
		return
	}
	fmt.Fprintln(w, "| workload | load generator CPU µs per record, Strata / Kafka | cores it used, Strata / Kafka | Produce requests per s, Strata / Kafka | kB per request, Strata / Kafka |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, wl := range p.Workloads {
		s, k := by[[2]string{wl.name, "strata"}], by[[2]string{wl.name, "kafka"}]
		if s == nil || k == nil {
			continue
		}
		pair := func(a, b []float64) string { return figure(median(a)) + " / " + figure(median(b)) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", wl.name, pair(s.usPerRecord, k.usPerRecord),
			pair(s.cores, k.cores), pair(s.reqPerSec, k.reqPerSec), pair(s.kbPerReq, k.kbPerReq))
	}
	fmt.Fprintln(w)
}

// writePerfTests prints the ProducerPerformance runs.
func (p *pairing) writePerfTests(w io.Writer) {
	for _, sys := range []string{"strata", "kafka"} {
		run, ok := p.PerfTest[sys]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "ProducerPerformance against %s (`%s`)", sys, run.Args)
		if run.Err != "" {
			fmt.Fprintf(w, ", **failed: %s**", run.Err)
		}
		fmt.Fprintf(w, ":\n\n```\n%s\n```\n\n", strings.TrimSpace(run.Output))
		if run.WallSeconds > 0 && run.ClientCPUSeconds > 0 {
			fmt.Fprintf(w, "Over its %.1f s, from the JVM's start to its exit: client CPU %.1f s (%.2f cores), broker CPU %.1f s (%.2f cores).\n\n",
				run.WallSeconds, run.ClientCPUSeconds, run.ClientCPUSeconds/run.WallSeconds,
				run.BrokerCPUSeconds, run.BrokerCPUSeconds/run.WallSeconds)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
