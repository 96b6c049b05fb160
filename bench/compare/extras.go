package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// Workloads beyond the produce/consume/e2e rows, each printed as its own table
// under its pairing (share groups, OMB-style rate steps, fan-out, many
// partitions, TLS, the Java client's pattern). Each is off unless its flag is given; -base=false leaves out
// the rows above, so one of these can run alone.

// extraOptions are the flags of the extra workloads.
type extraOptions struct {
	base bool // run the produce, consume and e2e rows and ProducerPerformance

	share             bool
	shareRecords      int64
	shareSmallRecords int64
	shareMembers      []int

	ombRates    []int
	ombDuration time.Duration

	fanout          int
	fanoutDuration  time.Duration
	fanoutDecode    bool
	fanoutRate      int
	partitions      int
	tls             bool
	javaTxnMillis   []int // -java-txn: transaction durations (javatxn.go)
	javaTxnRecords  int
	rawJavaTxn      string
	pairings        []string
	rawShareMembers string
	rawOMBRates     string
	rawPairings     string
}

func (e *extraOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&e.base, "base", true, "run the produce, consume and e2e rows and ProducerPerformance (false: only the extra workloads asked for)")
	fs.BoolVar(&e.share, "share", false, "share-group rows: -share-members members on one partition, a classic group, acknowledgement latency, dead-lettering")
	fs.Int64Var(&e.shareRecords, "share-records", 100_000, "1 KiB records each share-group and classic-group run reads")
	fs.Int64Var(&e.shareSmallRecords, "share-small-records", 50_000, "1 KiB records each acknowledgement-latency and dead-lettering run reads")
	fs.StringVar(&e.rawShareMembers, "share-members", "1,4,16", "share-group sizes to measure, comma-separated")
	fs.StringVar(&e.rawOMBRates, "omb-rates", "", "OMB-style workload: 4 producers, 16 partitions, 2 consumers, 1 KiB, one step per rate in records/s, comma-separated, rising (\"\": skip it)")
	fs.DurationVar(&e.ombDuration, "omb-duration", 10*time.Second, "length of each OMB-style rate step")
	fs.IntVar(&e.fanout, "fanout", 0, "fan-out rows: produce without readers and with this many raw readers of every record (fanout.go; 0: skip them)")
	fs.DurationVar(&e.fanoutDuration, "fanout-duration", 5*time.Second, "length of each fan-out produce run")
	fs.BoolVar(&e.fanoutDecode, "fanout-decode", false, "fan-out readers that decode every record (franz-go consumers, the rows before session 14) instead of raw readers")
	fs.IntVar(&e.fanoutRate, "fanout-rate", 0, "records/s the fan-out producer offers (0: unthrottled)")
	fs.IntVar(&e.partitions, "partitions", 0, "many-partitions rows (partitions.go): a topic of this many partitions, produce and consume over up to 1,000 of them, a broker restart (0: skip them)")
	fs.BoolVar(&e.tls, "tls", false, "TLS rows (tls.go): produce and consume over PLAINTEXT and over SSL on both systems, Kafka with an SSL listener beside its PLAINTEXT one (-nodes 1 only)")
	fs.StringVar(&e.rawJavaTxn, "java-txn", "", "Java client rows (javatxn.go): ProducerPerformance with 1 KiB records, acks=all, without transactions and with transactions of each of these durations in ms, comma-separated (\"\": skip them)")
	fs.IntVar(&e.javaTxnRecords, "java-txn-records", 300_000, "records of each -java-txn run")
	fs.StringVar(&e.rawPairings, "pairings", "defaults,equal", "pairings to run: defaults, equal (durability), or both")
}

// parse checks the flags after flag.Parse.
func (e *extraOptions) parse() error {
	var err error
	if e.shareMembers, err = parseInts(e.rawShareMembers); err != nil {
		return fmt.Errorf("-share-members %q: %w", e.rawShareMembers, err)
	}
	if e.rawOMBRates != "" {
		if e.ombRates, err = parseInts(e.rawOMBRates); err != nil {
			return fmt.Errorf("-omb-rates %q: %w", e.rawOMBRates, err)
		}
	}
	if e.rawJavaTxn != "" {
		if e.javaTxnMillis, err = parseInts(e.rawJavaTxn); err != nil {
			return fmt.Errorf("-java-txn %q: %w", e.rawJavaTxn, err)
		}
	}
	for part := range strings.SplitSeq(e.rawPairings, ",") {
		switch p := strings.TrimSpace(part); p {
		case "defaults", "equal":
			e.pairings = append(e.pairings, p)
		default:
			return fmt.Errorf("-pairings: %q is not defaults or equal", p)
		}
	}
	switch {
	case e.shareRecords < 1 || e.shareSmallRecords < 1:
		return fmt.Errorf("-share-records and -share-small-records must be positive")
	case e.ombDuration <= 0 || e.fanoutDuration <= 0:
		return fmt.Errorf("-omb-duration and -fanout-duration must be positive")
	case e.javaTxnRecords < 1:
		return fmt.Errorf("-java-txn-records must be positive")
	case e.fanout < 0 || e.partitions < 0 || e.fanoutRate < 0:
		return fmt.Errorf("-fanout, -fanout-rate and -partitions must not be negative")
	}
	return nil
}

// runsPairing says whether the pairing (by its short name) is to run.
func (e *extraOptions) runsPairing(short string) bool {
	for _, p := range e.pairings {
		if p == short {
			return true
		}
	}
	return false
}

// runExtras runs the extra workloads the flags ask for against a pairing's
// brokers, each into its own table of p, and after each deletes on both
// brokers what it made (cleanup.go).
func runExtras(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	for _, x := range []struct {
		name string
		on   bool
		run  func(context.Context, options, *pairing, map[string]*system) error
	}{
		{"share groups", o.extras.share, runShare},
		{"OMB-style workload", len(o.extras.ombRates) > 0, runOMB},
		{"fan-out", o.extras.fanout > 0, runFanout},
		{"many partitions", o.extras.partitions > 0, runPartitions},
		{"TLS", o.extras.tls, runTLS},
		{"Java client", len(o.extras.javaTxnMillis) > 0, runJavaTxn},
	} {
		if !x.on {
			continue
		}
		sc := openScope(ctx, fmt.Sprintf("[%s] %s", p.Name, x.name), true, brokers["strata"], brokers["kafka"])
		err := x.run(ctx, o, p, brokers)
		sc.close(ctx)
		if err != nil {
			return err
		}
	}
	return nil
}

// measure is one figure of an extra run.
type measure struct {
	metric        string
	value         float64
	lowerIsBetter bool
}

// extraSample is one figure of one run of an extra workload.
type extraSample struct {
	Row           string  `json:"row"`
	Metric        string  `json:"metric"`
	LowerIsBetter bool    `json:"lower_is_better,omitempty"`
	System        string  `json:"system"`
	Round         int     `json:"round"`
	Value         float64 `json:"value"`
}

// extraTable is an extra workload's results in one pairing.
type extraTable struct {
	Title   string        `json:"title"`
	Note    string        `json:"note,omitempty"`
	Samples []extraSample `json:"samples"`
	Errors  []string      `json:"errors,omitempty"`
	Details []any         `json:"details,omitempty"` // each run's full result
	// Summary lines printed under the table (derived figures).
	Summary []string `json:"summary,omitempty"`
}

func (t *extraTable) add(row, sys string, round int, ms []measure, err error) {
	if err != nil {
		t.Errors = append(t.Errors, fmt.Sprintf("%s, %s, round %d: %v", row, sys, round, err))
		return
	}
	for _, m := range ms {
		t.Samples = append(t.Samples, extraSample{Row: row, Metric: m.metric, LowerIsBetter: m.lowerIsBetter, System: sys, Round: round, Value: m.value})
	}
}

// values are the figures of one row, metric and system, in round order.
func (t *extraTable) values(row, metric, sys string) []float64 {
	var out []float64
	for _, s := range t.Samples {
		if s.Row == row && s.Metric == metric && s.System == sys {
			out = append(out, s.Value)
		}
	}
	return out
}

// write prints the table: one line per row and metric, in the order first
// measured, with each system's median, the ratio and every round.
func (t *extraTable) write(w io.Writer) {
	fmt.Fprintf(w, "##### %s\n\n", t.Title)
	type key struct{ row, metric string }
	var keys []key
	seen := map[key]bool{}
	for _, s := range t.Samples {
		if k := (key{s.Row, s.Metric}); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		fmt.Fprintln(w, "| workload | metric | Strata (median) | Kafka (median) | Strata / Kafka | Strata rounds | Kafka rounds |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, k := range keys {
			s, kf := t.values(k.row, k.metric, "strata"), t.values(k.row, k.metric, "kafka")
			ms, mk := median(s), median(kf)
			ratio := "-"
			if ms > 0 && mk > 0 {
				ratio = fmt.Sprintf("**%.2f**", ms/mk)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", k.row, k.metric, medianCell(s), medianCell(kf), ratio, figures(s), figures(kf))
		}
		fmt.Fprintln(w)
	}
	for _, line := range t.Summary {
		fmt.Fprintf(w, "%s\n\n", line)
	}
	writeNoteAndFailures(w, t.Note, t.Errors)
}

// medianCell is the median of vs, or "-" when there is none (every run failed,
// or the system ran no such step).
func medianCell(vs []float64) string {
	if len(vs) == 0 {
		return "-"
	}
	return figure(median(vs))
}

// writeExtras prints the pairing's extra tables.
func (p *pairing) writeExtras(w io.Writer) {
	for _, t := range p.Extras {
		t.write(w)
	}
}

// extraRun is one run of an extra workload against one system.
type extraRun func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error)

// alternate runs run for every round, Strata then Kafka, into row of t, after
// checking both brokers are alive and syncing the page cache (as the rows
// above do).
func alternate(ctx context.Context, o options, p *pairing, brokers map[string]*system, t *extraTable, row string, run extraRun) error {
	for round := 1; round <= o.rounds; round++ {
		for _, sys := range []string{"strata", "kafka"} {
			if err := runOnce(ctx, p, brokers, t, row, sys, round, run); err != nil {
				return err
			}
		}
	}
	return nil
}

// runOnce is one run of alternate; what it made on the system is deleted after it.
func runOnce(ctx context.Context, p *pairing, brokers map[string]*system, t *extraTable, row, sys string, round int, run extraRun) error {
	b := brokers[sys]
	if err := b.alive(); err != nil {
		return err
	}
	sc := openScope(ctx, fmt.Sprintf("[%s] %s, round %d, %s", p.Name, row, round, sys), false, b)
	defer sc.close(ctx)
	syscall.Sync()
	ms, detail, err := run(ctx, sys, b.seeds, round)
	t.add(row, sys, round, ms, err)
	if detail != nil {
		t.Details = append(t.Details, map[string]any{"row": row, "system": sys, "round": round, "result": detail})
	}
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s %s", figure(m.value), m.metric))
	}
	logf("[%s] %s, round %d, %s: %s%s", p.Name, row, round, sys, strings.Join(parts, ", "), errSuffix(err))
	return ctx.Err()
}
