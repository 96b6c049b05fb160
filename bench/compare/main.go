// Command compare runs the same workloads against a Strata node and an Apache Kafka
// broker on this machine and prints Strata/Kafka ratios as Markdown: `make
// bench-kafka` runs it after bench/run.sh has resolved Kafka's jars from Maven
// Central. It is a measuring tool, not a test: CI never runs it.
//
// One run, for each of two pairings:
//
//  1. Start a fresh single-node KRaft Kafka (own temp log dir, probed free loopback
//     ports, the JVM options of Kafka's start scripts) and a fresh Strata node, the
//     order alternating between pairings; time each from process start to its
//     first ApiVersions + Metadata answer.
//  2. Warm each up with untimed produce and e2e runs (-warmup: the JVM compiles
//     its hot paths; Kafka's first timed run was 4x slower than its second
//     without, and its e2e p99 fell from round to round when only e2e rows ran
//     and so nothing warmed it, before session 25).
//     For every workload, run Strata, then Kafka, then Strata, ... for -rounds
//     rounds, so that drift in a shared machine hits both; before each run, sync
//     the page cache so no run pays for the previous one's writeback. Produce and
//     e2e runs each use a fresh topic whose first record has been acknowledged
//     (untimed), so they measure the steady state, and deleted after the run,
//     its files freed before the next run (cleanup.go: every run and workload
//     deletes the topics and groups it made); consume re-reads one topic,
//     filled on both systems and then read once from each before the first
//     round, by untimed steps whose broker CPU no round is charged (so that no
//     round pays for this process's first read, nor Strata's for a first read
//     from the disk).
//  3. In the first pairing, run Kafka's ProducerPerformance against both.
//  4. Read each broker's VmRSS and VmHWM from /proc, stop both, delete their data.
//
// Pairings: "defaults" (Strata fsyncs before acknowledging; Kafka leaves data in
// the page cache) and "equal durability" (Kafka with log.flush.interval.messages=1,
// i.e. flush.messages=1 on every topic: an fsync per append, before the ack).
//
// The load generator is internal/bench on franz-go for both brokers, so client
// differences cancel out: franz-go's defaults (a 10ms linger) for throughput, no
// linger for e2e latency. At 100 B, and at 1 KiB over four partitions, franz-go
// on one pinned core bounds the rate whichever broker it writes to;
// -pre-encoded adds rows whose load generator writes one pre-encoded batch per
// partition again and again (preencoded.go), so they measure the brokers.
//
// Extra workloads, each its own table under its pairing and off unless asked for
// (extras.go): share groups (-share, share.go), OMB-style rate steps (-omb-rates,
// omb.go), fan-out (-fanout, fanout.go) and many partitions (-partitions,
// partitions.go), TLS (-tls, tls.go) and the Java client (-java-txn,
// javatxn.go); -base=false runs them without the rows above.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

type options struct {
	strata, jars, java string
	rounds, nodes      int
	duration, warmup   time.Duration
	consumeRecords     int64
	e2eRates           []int
	txnRecords         []int          // records per transaction of the transactional rows
	txnProducers       []int          // producer counts of the transactional rows (transactions.go)
	txnPartitions      int32          // partitions of the transactional rows' topics
	txnOnly            bool           // only the transactional rows and their plain produce rows
	only               *regexp.Regexp // when set, only the rows whose name it matches
	preEncoded         bool           // add the 100 B rows of the pre-encoded producer (preencoded.go)
	codecs             []string
	brokerCodecs       []string // topic compression.type values of the broker-compressed rows
	codecPayload       string   // what the values of the compressed rows hold
	perfRecords        int
	workdir            string
	mdOut, jsonOut     string
	pinBrokers         string // CPUs the brokers run on (taskset -c); "" = anywhere
	pinClient          string // CPUs this process (the load generator) runs on
	extras             extraOptions
	sec                *benchTLS // the certificate of the -tls rows, made by run
}

func main() {
	var o options
	flag.StringVar(&o.strata, "strata", "bin/strata", "the strata binary")
	flag.StringVar(&o.jars, "kafka-jars", "", "directory of Kafka's runtime jars (bench/run.sh fills it)")
	flag.StringVar(&o.java, "java", "java", "the java command")
	flag.IntVar(&o.rounds, "rounds", 5, "alternations per workload")
	flag.IntVar(&o.nodes, "nodes", 1, "brokers per system: 1, or a cluster (strata dev cluster; a KRaft cluster) with topics replicated to every node")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of each produce and e2e run")
	flag.DurationVar(&o.warmup, "warmup", 8*time.Second, "untimed produce and e2e runs against each system after start-up (the JIT compiles Kafka's hot paths)")
	flag.Int64Var(&o.consumeRecords, "consume-records", 250_000, "1 KiB records in the consume topic")
	e2eRates := flag.String("e2e-rates", "1000", "records/s of the e2e workloads, comma-separated (one row each)")
	txnRecords := flag.String("txn-records", "100,1000", "records per transaction of the transactional produce rows, comma-separated (one row each; \"\": none)")
	txnProducers := flag.String("txn-producers", "1", "producer counts of the transactional rows, comma-separated: each count runs every -txn-records row with that many transactional producers at once (own transactional ids, one partition) and, above 1, the plain 1 KiB acks=all row with as many")
	txnPartitions := flag.Int("txn-partitions", 1, "partitions of the transactional rows' topics (default 1): above 1, each producer spreads its transactions over them, and the plain rows they are set against run over as many")
	only := flag.String("only", "", "run only the rows whose name matches this regular expression (e.g. 'e2e', '^produce 1 KiB'); the extras (ProducerPerformance, start-up, memory) run as set by their own flags")
	flag.BoolVar(&o.txnOnly, "txn-only", false, "run only the transactional rows and the plain 1 KiB acks=all produce rows they are set against")
	flag.BoolVar(&o.preEncoded, "pre-encoded", false, "add produce rows (100 B; 1 KiB over one and four partitions) whose load generator writes one pre-encoded ~1 MB batch per partition again and again (one node only): there franz-go on one core, not the broker, bounds the rate")
	codecs := flag.String("codecs", "", "compression codecs to add produce and consume rows for, comma-separated (gzip, snappy, lz4, zstd)")
	brokerCodecs := flag.String("broker-codecs", "", "topic compression.type values to add produce rows for, comma-separated (gzip, snappy, lz4, zstd, uncompressed, producer): the producer sends uncompressed 1 KiB records, acks=all, to a topic created with compression.type=<codec>, so each broker compresses")
	flag.StringVar(&o.codecPayload, "codec-payload", bench.PayloadText, "what the values of the -codecs and -broker-codecs rows hold: text (a different slice of JSON event lines in each record) or letters (one random value in every record, which any codec squeezes to almost nothing)")
	flag.StringVar(&o.pinBrokers, "pin-brokers", "", "CPUs the brokers run on, taskset -c style (e.g. 0); with -pin-client the ratio measures brokers, not the load generator")
	flag.StringVar(&o.pinClient, "pin-client", "", "CPUs the load generator (this process) runs on (e.g. 1)")
	flag.IntVar(&o.perfRecords, "perf-records", 300_000, "records ProducerPerformance sends (0: skip it)")
	flag.StringVar(&o.workdir, "workdir", "", "where the brokers keep their data (default: a temp dir)")
	flag.StringVar(&o.mdOut, "out", "", "also write the Markdown report here")
	flag.StringVar(&o.jsonOut, "json", "", "also write every sample as JSON here")
	o.extras.register(flag.CommandLine)
	flag.Parse()
	bench.TuneGC() // this process is the load generator
	if err := o.extras.parse(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	var err error
	if o.e2eRates, err = parseInts(*e2eRates); err != nil || len(o.e2eRates) == 0 {
		fmt.Fprintf(os.Stderr, "compare: -e2e-rates %q: want positive integers, comma-separated\n", *e2eRates)
		os.Exit(2)
	}
	if o.txnRecords, o.txnProducers, err = parseTxnFlags(*txnRecords, *txnProducers); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if *txnPartitions < 1 || *txnPartitions > maxTxnPartitions {
		fmt.Fprintf(os.Stderr, "compare: -txn-partitions %d: want 1 to %d\n", *txnPartitions, maxTxnPartitions)
		os.Exit(2)
	}
	o.txnPartitions = int32(*txnPartitions)
	if *codecs != "" {
		o.codecs = strings.Split(*codecs, ",")
	}
	if o.brokerCodecs, err = parseBrokerCodecs(*brokerCodecs); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if o.codecPayload != bench.PayloadText && o.codecPayload != bench.PayloadLetters {
		fmt.Fprintf(os.Stderr, "compare: -codec-payload %q: want %s or %s\n", o.codecPayload, bench.PayloadText, bench.PayloadLetters)
		os.Exit(2)
	}
	if *only != "" {
		if o.only, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(os.Stderr, "compare: -only: %v\n", err)
			os.Exit(2)
		}
	}
	if o.preEncoded && o.nodes != 1 {
		fmt.Fprintln(os.Stderr, "compare: -pre-encoded runs with -nodes 1 only")
		os.Exit(2)
	}
	if o.extras.tls && o.nodes != 1 {
		fmt.Fprintln(os.Stderr, "compare: -tls runs with -nodes 1 only")
		os.Exit(2)
	}
	if o.jars == "" || o.nodes < 1 || o.rounds < 1 {
		fmt.Fprintln(os.Stderr, "compare: -kafka-jars is required (run bench/run.sh); -nodes and -rounds must be positive")
		os.Exit(2)
	}
	brokerCPUs = o.pinBrokers
	if o.pinClient != "" {
		if err := pinSelf(o.pinClient); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// workloads are the comparison's rows, in order: those -only matches.
func workloads(o options) []workload {
	wls := allWorkloads(o)
	if o.only != nil {
		wls = slices.DeleteFunc(wls, func(wl workload) bool { return !o.only.MatchString(wl.name) })
	}
	return wls
}

// allWorkloads are the rows the options ask for, before -only.
func allWorkloads(o options) []workload {
	wls := []workload{
		{name: "produce 100 B, acks=1", slug: "p100-a1", mode: "produce", size: 100, acks: bench.AcksLeader, target: 1.5},
		{name: "produce 100 B, acks=all", slug: "p100-aall", mode: "produce", size: 100, acks: bench.AcksAll, target: 1.5},
		{name: "produce 1 KiB, acks=1", slug: "p1k-a1", mode: "produce", size: 1024, acks: bench.AcksLeader, target: 1.5},
		plainRow(1, 1),
		{name: "consume 1 KiB", slug: "c1k", mode: "consume", size: 1024, acks: bench.AcksAll, target: 1.5},
	}
	if o.txnOnly {
		return txnOnlyWorkloads(wls, o.txnRecords, o.txnProducers, o.txnPartitions)
	}
	if o.preEncoded {
		wls = append(wls,
			workload{name: "produce 100 B pre-encoded, acks=1", slug: "r100-a1", mode: "pre-encoded", size: 100, acks: bench.AcksLeader, target: 1.5},
			workload{name: "produce 100 B pre-encoded, acks=all", slug: "r100-aall", mode: "pre-encoded", size: 100, acks: bench.AcksAll, target: 1.5},
			workload{name: "produce 1 KiB pre-encoded, acks=all", slug: "r1k-aall", mode: "pre-encoded", size: 1024, acks: bench.AcksAll, target: 1.5},
			workload{name: "produce 1 KiB pre-encoded, acks=all, 4 partitions", slug: "r1k-aall-p4", mode: "pre-encoded", size: 1024,
				acks: bench.AcksAll, partitions: 4, target: 1.5})
	}
	// The compressed rows name a text payload: their ratios differ from the
	// letters payload's by far.
	size, payload, slug := "1 KiB", "", ""
	if o.codecPayload == bench.PayloadText {
		size, payload, slug = "1 KiB text", bench.PayloadText, "-t"
	}
	for _, codec := range o.codecs {
		wls = append(wls,
			workload{name: "produce " + size + " " + codec + ", acks=all", slug: "p1k-" + codec + slug, mode: "produce", size: 1024,
				acks: bench.AcksAll, compression: codec, payload: payload, target: 1.5},
			workload{name: "consume " + size + " " + codec, slug: "c1k-" + codec + slug, mode: "consume", size: 1024,
				acks: bench.AcksAll, compression: codec, payload: payload, target: 1.5})
	}
	for _, codec := range o.brokerCodecs {
		wls = append(wls, workload{name: "produce " + size + ", acks=all, broker " + codec, slug: "p1k-b" + codec + slug, mode: "produce", size: 1024,
			acks: bench.AcksAll, topicCodec: codec, payload: payload, target: 1.5})
	}
	wls = append(wls, txnWorkloads(o.txnRecords, o.txnProducers, o.txnPartitions)...)
	for _, rate := range o.e2eRates {
		wls = append(wls, workload{name: fmt.Sprintf("e2e 1 KiB at %d/s, acks=all, linger 0", rate), slug: fmt.Sprintf("e2e-%d", rate),
			mode: "e2e", size: 1024, acks: bench.AcksAll, rate: rate, lowerIsBetter: true, target: 0.5})
	}
	return wls
}

// parseInts reads positive integers, comma-separated.
func parseInts(list string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad value %q", part)
		}
		out = append(out, n)
	}
	return out, nil
}

// topicCodecs are the values of a topic's compression.type.
var topicCodecs = []string{"gzip", "snappy", "lz4", "zstd", "uncompressed", "producer"}

// parseBrokerCodecs reads -broker-codecs: topic compression.type values,
// comma-separated, each once.
func parseBrokerCodecs(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for part := range strings.SplitSeq(list, ",") {
		codec := strings.TrimSpace(part)
		if !slices.Contains(topicCodecs, codec) || slices.Contains(out, codec) {
			return nil, fmt.Errorf("-broker-codecs %q: want each of %s at most once", list, strings.Join(topicCodecs, ", "))
		}
		out = append(out, codec)
	}
	return out, nil
}

// What each pairing's durability really is, printed under its table.
const (
	defaultsNote = "Strata at its defaults: acks=all and every consumer read wait for the " +
		"group-commit fsync; acks=1 is acknowledged after the append, before the fsync. " +
		"Kafka fsyncs nothing before acknowledging, at any acks."
	equalNote = "Equal durability holds for the acks=all rows, consume and e2e: both fsync " +
		"before acknowledging. At acks=1 it does not: Strata acknowledges before its " +
		"fsync while this Kafka fsyncs every append first, so the acks=1 rows favour Strata."
)

type report struct {
	Date        string     `json:"date"`
	Machine     machine    `json:"machine"`
	Command     string     `json:"command"`
	PinBrokers  string     `json:"pin_brokers,omitempty"`
	PinClient   string     `json:"pin_client,omitempty"`
	LoadBefore  string     `json:"load_before"`
	LoadAfter   string     `json:"load_after"`
	WallSeconds float64    `json:"wall_seconds"`
	Pairings    []*pairing `json:"pairings"`
}

func run(ctx context.Context, o options) error {
	began := time.Now()
	rep := &report{
		Date:       began.UTC().Format("2006-01-02 15:04 UTC"),
		Machine:    describeMachine(o.workdir),
		Command:    strings.Join(os.Args, " "),
		PinBrokers: o.pinBrokers,
		PinClient:  o.pinClient,
		LoadBefore: bench.LoadAverage(),
	}
	logf("machine: %+v", rep.Machine)
	logf("load before: %s", rep.LoadBefore)
	if o.extras.tls {
		dir, err := os.MkdirTemp(o.workdir, "strata-vs-kafka-tls-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if o.sec, err = newBenchTLS(ctx, dir); err != nil {
			return err
		}
	}
	for i, pc := range []struct {
		name, kafka, note string
		flushEach         bool
	}{
		{"defaults", "defaults: no flush.messages, data left in the page cache", defaultsNote, false},
		{"equal durability", "log.flush.interval.messages=1: fsync before every ack", equalNote, true},
	} {
		if !o.extras.runsPairing(strings.Fields(pc.name)[0]) {
			continue
		}
		name := pc.name
		if o.nodes > 1 {
			name = fmt.Sprintf("%s, %d nodes, replication factor %d", pc.name, o.nodes, o.nodes)
		}
		wls := workloads(o)
		if !o.extras.base {
			wls = nil
		}
		p := &pairing{Name: name, Kafka: pc.kafka, Note: pc.note, Workloads: wls,
			StartupMS: map[string]float64{}, RSSKiB: map[string]int64{}, PeakRSSKiB: map[string]int64{}}
		rep.Pairings = append(rep.Pairings, p)
		if err := runPairing(ctx, o, p, pc.flushEach, i%2 == 1, i == 0); err != nil {
			return fmt.Errorf("%s: %w", pc.name, err)
		}
	}
	rep.LoadAfter = bench.LoadAverage()
	rep.WallSeconds = time.Since(began).Seconds()
	logf("load after: %s; %.0f s in all", rep.LoadAfter, rep.WallSeconds)

	outs := []io.Writer{os.Stdout}
	if o.mdOut != "" {
		f, err := os.Create(o.mdOut)
		if err != nil {
			return err
		}
		defer f.Close()
		outs = append(outs, f)
	}
	rep.writeMarkdown(io.MultiWriter(outs...))
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runPairing starts both brokers, runs every workload alternating between them,
// measures memory, and stops them.
func runPairing(ctx context.Context, o options, p *pairing, flushEach, strataFirst, perfTest bool) error {
	dir, err := os.MkdirTemp(o.workdir, "strata-vs-kafka-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, sub := range []string{"kafka", "strata"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	brokers := map[string]*system{}
	defer func() {
		for _, b := range brokers {
			b.stop()
		}
	}()
	order := []string{"kafka", "strata"}
	if strataFirst {
		order = []string{"strata", "kafka"}
	}
	for _, sys := range order {
		var b *system
		if sys == "kafka" {
			b, err = startKafka(ctx, o.java, o.jars, filepath.Join(dir, "kafka"), o.nodes, flushEach, o.sec)
		} else {
			b, err = startStrata(ctx, o.strata, filepath.Join(dir, "strata"), o.nodes, nil)
		}
		if err != nil {
			return err
		}
		brokers[sys] = b
		p.StartupMS[sys] = ms(b.startup)
		logf("[%s] %s up at %s in %s", p.Name, sys, strings.Join(b.seeds, ","), b.startup.Round(time.Millisecond))
	}

	if o.warmup > 0 {
		// Every single-producer produce and e2e workload, a quarter of
		// -warmup each, untimed.
		wo := o
		wo.duration = o.warmup / 4
		for _, sys := range order {
			for _, wl := range workloads(o) {
				if (wl.mode != "produce" && wl.mode != "e2e") || wl.producers > 1 {
					continue
				}
				wl.slug = "warmup-" + wl.slug
				sc := openScope(ctx, fmt.Sprintf("[%s] %s warm-up %s", p.Name, sys, wl.name), false, brokers[sys])
				res, err := runWorkload(ctx, wo, wl, 0, brokers[sys].seeds)
				logf("[%s] %s warm-up %s: %s records/s%s", p.Name, sys, wl.name, figure(res.RecordsPerSec), errSuffix(err))
				sc.close(ctx)
			}
		}
	}

	for _, wl := range p.Workloads {
		if err := runMainWorkload(ctx, o, p, brokers, wl); err != nil {
			return err
		}
	}

	if err := runExtras(ctx, o, p, brokers); err != nil {
		return err
	}

	if perfTest && o.perfRecords > 0 && o.extras.base {
		p.PerfTest = map[string]perfTestRun{}
		for _, sys := range []string{"strata", "kafka"} {
			sc := openScope(ctx, fmt.Sprintf("[%s] ProducerPerformance against %s", p.Name, sys), false, brokers[sys])
			syscall.Sync()
			run := producerPerformance(ctx, o, brokers[sys])
			p.PerfTest[sys] = run
			logf("[%s] ProducerPerformance against %s:\n%s%s", p.Name, sys, run.Output, errSuffix(nilIfEmpty(run.Err)))
			sc.close(ctx)
		}
	}

	for sys, b := range brokers {
		if err := b.alive(); err != nil {
			return err
		}
		rss, peak, err := b.memory()
		if err != nil {
			return fmt.Errorf("%s memory: %w", sys, err)
		}
		p.RSSKiB[sys], p.PeakRSSKiB[sys] = rss, peak
		logf("[%s] %s RSS %d MiB, peak %d MiB", p.Name, sys, rss/1024, peak/1024)
	}
	return nil
}

// runMainWorkload runs every round of wl against both brokers into p, then
// deletes on both what the workload made (cleanup.go): each run's topic after
// the run, the consume topic after the last round.
func runMainWorkload(ctx context.Context, o options, p *pairing, brokers map[string]*system, wl workload) error {
	wsc := openScope(ctx, fmt.Sprintf("[%s] %s", p.Name, wl.name), true, brokers["strata"], brokers["kafka"])
	defer wsc.close(ctx)
	var unfilled map[string]error
	if wl.mode == "consume" {
		unfilled = prepareConsume(ctx, o, []consumeTarget{
			{name: "strata", wl: wl, seeds: brokers["strata"].seeds},
			{name: "kafka", wl: wl, seeds: brokers["kafka"].seeds}})
	}
	for round := 1; round <= o.rounds; round++ {
		for _, sys := range []string{"strata", "kafka"} {
			b := brokers[sys]
			if err := b.alive(); err != nil {
				return err
			}
			if err := unfilled[sys]; err != nil {
				p.add(sample{Pairing: p.Name, Workload: wl.name, System: sys, Round: round, Err: "prefilling: " + err.Error()})
				logf("[%s] %s, round %d, %s: prefilling failed: %v", p.Name, wl.name, round, sys, err)
				continue
			}
			sc := openScope(ctx, fmt.Sprintf("[%s] %s, round %d, %s", p.Name, wl.name, round, sys), true, b)
			syscall.Sync()
			cpuBefore, cpuErr := b.cpuSeconds()
			clientBefore, clientErr := readClientCounts()
			reportedBefore, reporting := hostReportedKiB()
			var before map[counterKey]float64 // Strata's counters (txncounts.go)
			if wl.txnRecords > 0 && b.metricsURL != "" {
				var scrapeErr error
				if before, scrapeErr = scrapeCounters(b.metricsURL); scrapeErr != nil {
					logf("[%s] %s, round %d: no counts: %v", p.Name, wl.name, round, scrapeErr)
				}
			}
			res, err := runWorkload(ctx, o, wl, round, b.seeds)
			clientAfter, clientErr2 := readClientCounts()
			cpuAfter, cpuErr2 := b.cpuSeconds()
			s := sample{Pairing: p.Name, Workload: wl.name, System: sys, Round: round, Value: wl.metric(res), Result: res}
			if reportedAfter, ok := hostReportedKiB(); reporting && ok {
				s.HostReportedKiB = reportedAfter - reportedBefore
			}
			if before != nil && res.CommitLatency != nil {
				if after, err := scrapeCounters(b.metricsURL); err != nil {
					logf("[%s] %s, round %d: no counts: %v", p.Name, wl.name, round, err)
				} else {
					s.StrataTxnCounts = perTransaction(before, after, res.CommitLatency.Count, workloadConfig(o, wl, round, b.seeds).Topic)
				}
			}
			if cpuErr == nil && cpuErr2 == nil {
				s.BrokerCPUSeconds = cpuAfter - cpuBefore
			}
			if clientErr == nil && clientErr2 == nil {
				c := clientAfter.since(clientBefore)
				s.ClientMinorFaults, s.ClientGCCycles = c.minorFaults, c.gcCycles
				s.ClientCPUSeconds, s.ClientProduceRequests, s.ClientProduceBytes = c.cpuSeconds, c.produceWrites, c.produceBytes
			}
			if err != nil {
				s.Err = err.Error()
			}
			p.add(s)
			logf("[%s] %s, round %d, %s: %s %s (%.0f records in %.1f s; client: %.2f CPU s, %d Produce requests, %d page faults, %d GC cycles; %d MiB reported to the host)%s", p.Name, wl.name, round, sys,
				figure(s.Value), wl.unit(), float64(res.Records), res.ElapsedSeconds, s.ClientCPUSeconds, s.ClientProduceRequests, s.ClientMinorFaults, s.ClientGCCycles, s.HostReportedKiB>>10, errSuffix(err))
			sc.close(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// consumeConfig is what a consume round reads: every round re-reads one topic,
// filled and read once before the first round (prepareConsume).
func consumeConfig(c bench.Config, o options, wl workload) bench.Config {
	c.Topic, c.Count, c.Duration = wl.slug, o.consumeRecords, 0
	return c
}

// consumeTarget is one system's side of a consume workload: the topic wl.slug
// on the brokers at seeds, opts (TLS) added to the clients'.
type consumeTarget struct {
	name  string
	wl    workload
	seeds []string
	opts  []kgo.Opt
}

// prepareConsume readies a consume workload before its first round: it fills
// every target's topic, then reads each topic once, in the order given; none of
// it is timed or charged. It returns the fills that failed, by target name (a
// failed read is only logged: the timed rounds meet it again).
//
// Without the reads, the first timed round (always Strata's) paid for the load
// generator's first read of the workload: its heap grows to hold a fetch's
// decompressed batches (about 31,500 page faults and 5 GC cycles for 100,000
// lz4 records of 1 KiB, against ~10,000 and 3 for the next read and almost no
// faults after that: docs/benchmarks.md, session 13), and on Strata it read
// from the disk what the page cache had dropped behind the log's cached tail
// (--log-cache-tail-bytes), which Kafka's reads found in memory. After both
// reads the rounds re-read a topic from memory with a client that has grown
// to the workload, for both systems.
func prepareConsume(ctx context.Context, o options, targets []consumeTarget) map[string]error {
	unfilled := map[string]error{}
	for _, t := range targets {
		if err := prefillConsume(ctx, o, t.wl, t.seeds, t.opts...); err != nil {
			unfilled[t.name] = err
		}
	}
	for _, t := range targets {
		if unfilled[t.name] != nil {
			continue
		}
		res, err := runWorkload(ctx, o, t.wl, 0, t.seeds, t.opts...)
		logf("%s: read %s once (untimed, not charged): %.0f records%s", t.name, t.wl.slug, float64(res.Records), errSuffix(err))
	}
	return unfilled
}

// prefillConsume fills a consume workload's topic (untimed), so no round's
// broker CPU includes the production. opts (TLS) are added to the clients'.
func prefillConsume(ctx context.Context, o options, wl workload, seeds []string, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	n, err := bench.Prefill(ctx, consumeConfig(workloadConfig(o, wl, 0, seeds, opts...), o, wl))
	if n > 0 {
		logf("prefilled %s with %d records (untimed, not charged)", wl.slug, n)
	}
	return err
}

// runWorkload runs one workload once against the brokers at seeds; opts (TLS)
// are added to the clients'.
func runWorkload(ctx context.Context, o options, wl workload, round int, seeds []string, opts ...kgo.Opt) (bench.Result, error) {
	c := workloadConfig(o, wl, round, seeds, opts...)
	ctx, cancel := context.WithTimeout(ctx, o.duration+3*time.Minute)
	defer cancel()
	if wl.mode != "consume" {
		if err := primeTopic(ctx, c, opts...); err != nil {
			return bench.Result{}, err
		}
	}
	switch wl.mode {
	case "produce":
		return bench.Produce(ctx, c)
	case "e2e":
		return bench.E2E(ctx, c)
	case "pre-encoded":
		return preEncodedProduce(ctx, c)
	}
	return bench.Consume(ctx, consumeConfig(c, o, wl))
}

// workloadConfig is the load generator's configuration for one run, opts
// added to its clients'.
func workloadConfig(o options, wl workload, round int, seeds []string, opts ...kgo.Opt) bench.Config {
	c := bench.Config{
		Brokers: seeds, Topic: fmt.Sprintf("%s-r%d", wl.slug, round),
		Partitions: max(1, wl.partitions), ReplicationFactor: int16(o.nodes),
		RecordSize: wl.size, Duration: o.duration, Rate: wl.rate,
		Acks: wl.acks, Compression: wl.codec(), Producers: max(1, wl.producers), Consumers: 1, TransactionRecords: wl.txnRecords,
		Payload:    wl.payload,
		Linger:     bench.DefaultLinger,
		ClientOpts: append([]kgo.Opt{kgo.ClientID("strata-vs-kafka"), kgo.WithHooks(&produceWrites)}, opts...),
	}
	if wl.topicCodec != "" {
		c.TopicConfigs = map[string]string{"compression.type": wl.topicCodec}
	}
	if wl.mode == "e2e" {
		c.Linger = 0 // franz-go's 10ms linger would be most of what e2e measures
	}
	return c
}

// producerPerformance runs Kafka's own producer benchmark against the seeds.
func producerPerformance(ctx context.Context, o options, b *system) perfTestRun {
	args := []string{"--topic", "producer-performance", "--num-records", fmt.Sprint(o.perfRecords),
		"--record-size", "100", "--throughput", "-1",
		"--producer-props", "bootstrap.servers=" + strings.Join(b.seeds, ","), "acks=all"}
	run := perfTestRun{Args: "ProducerPerformance " + strings.Join(args, " ")}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.java, append([]string{"-Xmx512M",
		"-cp", filepath.Join(o.jars, "*"), "org.apache.kafka.tools.ProducerPerformance"}, args...)...)
	cpuBefore, cpuErr := b.cpuSeconds()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	run.WallSeconds = time.Since(start).Seconds()
	cpuAfter, cpuErr2 := b.cpuSeconds()
	run.Output = string(out)
	if err != nil {
		run.Err = err.Error()
	}
	if cmd.ProcessState != nil {
		run.ClientCPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if cpuErr == nil && cpuErr2 == nil {
		run.BrokerCPUSeconds = cpuAfter - cpuBefore
	}
	return run
}

func (r *report) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Run %s on %d CPUs (%s), %s; load average before %s, after %s; %.0f s in all.\n\n",
		r.Date, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.Disk, r.LoadBefore, r.LoadAfter, r.WallSeconds)
	fmt.Fprintf(w, "```\n%s\n```\n\n", r.Command)
	if r.PinBrokers != "" || r.PinClient != "" {
		fmt.Fprintf(w, "Brokers pinned to CPUs %q, the load generator to %q.\n\n", r.PinBrokers, r.PinClient)
	}
	r.writeHostReporting(w)
	for _, p := range r.Pairings {
		p.writeTable(w)
		p.writePerfTests(w)
		p.writeExtras(w)
	}
}

// machine is what the report says about where it ran.
type machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	Disk     string `json:"disk"` // device and filesystem of the data directories
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	// PageReporting: the kernel reports free memory to its host (hostmem.go).
	PageReporting bool `json:"page_reporting"`
}

func describeMachine(workdir string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if workdir == "" {
		workdir = os.TempDir()
	}
	if out, err := exec.Command("df", "-T", workdir).Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(f) >= 2 {
			m.Disk = fmt.Sprintf("%s on %s (%s)", f[1], f[0], workdir)
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	_, m.PageReporting = hostReportedKiB()
	return m
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " FAILED: " + err.Error()
}

func nilIfEmpty(s string) error {
	if s == "" {
		return nil
	}
	return fmt.Errorf("%s", s)
}
