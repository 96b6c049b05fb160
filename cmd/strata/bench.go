package main

// strata bench: produce, consume and end-to-end load with throughput and latency
// percentiles (internal/bench does the work); bench move is in bench_move.go.

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/cli"
)

func benchCmd() *cobra.Command { return newBenchCmd(processEnv()) }

func newBenchCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "bench", "Measure throughput and latency (produce, consume, end to end, share groups, tiered storage, connection set-up) and the cost of a partition move")
	cmd.Long = `Load generators on the franz-go client. Each prints throughput (records/s and MB/s,
MB = 10^6 value bytes) and latency percentiles (p50, p99, p99.9, max) from an HDR
histogram; --output json prints the same as one JSON document. The topic is
created when missing (--partitions, --replication-factor, --config). "bench move"
times a partition move, unthrottled and throttled, and "bench tiered" compares a
tiered topic with a plain one (see their --help). The load generator runs with
GOGC=400 unless GOGC is set, so that its garbage collection takes less of its CPU.`
	cmd.PersistentPreRun = func(*cobra.Command, []string) { bench.TuneGC() }
	cmd.AddCommand(
		benchModeCmd(env, g, "produce", "Produce records as fast as possible or at --rate; latency is send to acknowledgement",
			`  strata bench produce --record-size 1024 --duration 30s --acks all
  strata bench produce --count 1000000 --producers 4 --partitions 8 --compression lz4
  strata bench produce --record-size 1024 --producers 4 --transaction-records 1000`),
		benchModeCmd(env, g, "consume", "Read the topic from its start (producing --count records first if it holds fewer); latency is per poll",
			`  strata bench consume --count 1000000 --consumers 2
  strata bench consume --topic orders`),
		benchModeCmd(env, g, "e2e", "Produce at --rate while consumers read; latency is from each record's due time to its arrival",
			`  strata bench e2e --rate 1000 --duration 30s --acks all`),
		benchTieredCmd(env, g),
		benchModeCmd(env, g, "share", "Read the topic with a new share group of --consumers members (producing --count records first if it holds fewer)",
			`  strata bench share --count 200000 --record-size 1024 --consumers 4
  strata bench share --ack ack-each --count 50000
  strata bench share --ack reject --dead-letter-topic dlq.bench --count 20000
  strata bench share --ack classic --count 200000`),
		benchModeCmd(env, g, "connect", "Set up connections one after another (TCP, TLS, SASL, one ApiVersions round trip) and count them per second",
			`  strata bench connect --duration 30s --connectors 4 --tls-ca-file ca.pem --sasl-mechanism SCRAM-SHA-512 --sasl-user bench`),
		benchMoveCmd(env, g),
	)
	return cmd
}

type benchFlags struct {
	topic       string
	recordSize  int
	payload     string
	count       int64
	duration    time.Duration
	rate        int
	acks        string
	compression string
	partitions  int32
	replication int16
	configs     []string
	producers   int
	consumers   int
	linger      time.Duration
	batchBytes  int32
	txnRecords  int
	fanout      int
	fanoutRaw   bool
	group       string
	shareAck    string
	deadLetters string
	connectors  int
	progress    progressFlags
}

// benchDefaultRate is e2e's --rate: end-to-end latency means little when the
// producers are saturating the broker.
const benchDefaultRate = 1000

func benchModeCmd(env *clientEnv, g *globalFlags, mode, short, example string) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:               mode,
		Short:             short,
		Example:           example,
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	if mode == "connect" {
		fl := cmd.Flags()
		fl.Int64VarP(&f.count, "count", "n", 0, "connections to set up (0: run for --duration)")
		fl.DurationVarP(&f.duration, "duration", "d", 10*time.Second, "how long to run when --count is 0 (an upper bound otherwise; 0: none)")
		fl.IntVar(&f.connectors, "connectors", 1, "workers, each setting up one connection after another")
	} else {
		benchRecordFlags(cmd, f, mode)
	}
	f.progress.bind(cmd)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, cmd *cobra.Command, _ []string) error {
		if err := benchUnusedFlags(cmd, f, mode); err != nil {
			return err
		}
		return runBench(ctx, s, f, mode)
	})
	return cmd
}

// benchRecordFlags are the flags of the modes that move records.
func benchRecordFlags(cmd *cobra.Command, f *benchFlags, mode string) {
	fl := cmd.Flags()
	fl.StringVarP(&f.topic, "topic", "t", "strata-bench", "topic to use (created if missing)")
	// Consume and share runs produce only to fill the topic to --count: the
	// producer flags say so, and benchUnusedFlags refuses them without --count.
	prefill := ""
	if mode == "consume" || mode == "share" {
		prefill = "with --count, for the records produced to fill the topic: "
	}
	fl.IntVarP(&f.recordSize, "record-size", "s", 100, prefill+"value bytes per record")
	fl.StringVar(&f.payload, "payload", bench.PayloadLetters, prefill+"what values hold: letters (one random value in every record, as Kafka's producer perf test sends; codecs squeeze it to almost nothing) or text (a different slice of JSON event lines in each record, compressible as application events are)")
	count := "records to produce (0: run for --duration)"
	switch mode {
	case "consume", "share":
		count = "fill the topic to this many records first, then read the whole topic (0: read what it holds)"
		if mode == "consume" {
			count = "fill the topic to this many records first, then read this many (0: read what the topic holds)"
		}
	case "e2e":
		count = "records to produce and read (0: run for --duration)"
	}
	fl.Int64VarP(&f.count, "count", "n", 0, count)
	defaultDuration := 10 * time.Second
	switch mode {
	case "consume":
		defaultDuration = 0
	case "share":
		defaultDuration = 2 * time.Minute // a bound: the run ends when the group has read the topic
	}
	fl.DurationVarP(&f.duration, "duration", "d", defaultDuration, "how long to run when --count is 0 (an upper bound otherwise; 0: none)")
	if mode == "produce" || mode == "e2e" { // the prefill is unthrottled
		defaultRate := 0
		if mode == "e2e" {
			defaultRate = benchDefaultRate
		}
		fl.IntVar(&f.rate, "rate", defaultRate, "target records/s over all producers (0: unthrottled)")
	}
	fl.StringVar(&f.acks, "acks", "all", prefill+"acknowledgement: 0 (none), 1 (leader) or all (in-sync replicas)")
	fl.StringVar(&f.compression, "compression", "none", prefill+"batch compression: none, gzip, snappy, lz4 or zstd")
	fl.Int32VarP(&f.partitions, "partitions", "p", 1, "partitions when creating the topic")
	fl.Int16VarP(&f.replication, "replication-factor", "r", 1, "replicas per partition when creating the topic")
	fl.StringArrayVarP(&f.configs, "config", "c", nil, "topic config key=value when creating the topic (repeatable)")
	fl.IntVar(&f.producers, "producers", 1, prefill+"producer clients")
	consumers := "consumer clients (each reads a share of the partitions)"
	switch mode {
	case "produce":
		consumers = "with --fanout (not raw): consumer clients of each reader (each reads a share of the partitions)"
	case "share":
		consumers = "members of the group"
	}
	fl.IntVar(&f.consumers, "consumers", 1, consumers)
	defaultLinger := bench.DefaultLinger
	if mode == "e2e" {
		defaultLinger = 0 // else the linger is most of the latency measured
	}
	fl.DurationVar(&f.linger, "linger", defaultLinger, prefill+"how long a producer waits to fill a batch (0: send at once)")
	fl.Int32Var(&f.batchBytes, "batch-max-bytes", 0, prefill+"largest record batch a producer builds, as Kafka's batch.size (0: the client's default, about 1 MB)")
	if mode == "produce" {
		fl.IntVar(&f.txnRecords, "transaction-records", 0, "make each producer transactional, with its own transactional id, committing every N records (0: no transactions)")
		fl.IntVar(&f.fanout, "fanout", 0, "readers that each read every record while it is produced, as that many consumer groups would")
		fl.BoolVar(&f.fanoutRaw, "fanout-raw", false, "make the --fanout readers raw: each reads every byte of its fetch answers but decodes only batch headers (no CRC check, decompression or record decoding), so the readers cost this process little beside the brokers")
	}
	if mode == "share" {
		fl.StringVar(&f.group, "group", "", "the group to read with; it must be new (default: strata-bench-share-<unix seconds>)")
		fl.StringVar(&f.shareAck, "ack", bench.ShareAccept, "accept (at the next poll), ack-each (accept and wait for the broker after every poll; latency is that wait), reject, or classic (a classic consumer group instead)")
		fl.StringVar(&f.deadLetters, "dead-letter-topic", "", "with --ack reject: the group's dead-letter topic (created when missing); the run ends when every record is there")
		completeValues(cmd, "ack", bench.ShareAccept, bench.ShareAckEach, bench.ShareReject, bench.ShareClassic)
	}
	completeValues(cmd, "acks", "all", "1", "0")
	completeValues(cmd, "compression", "none", "gzip", "snappy", "lz4", "zstd")
	completeValues(cmd, "payload", bench.PayloadLetters, bench.PayloadText)
}

// benchPrefillFlags shape the records a consume or share run produces to fill
// the topic to --count, and nothing else.
var benchPrefillFlags = []string{"record-size", "payload", "acks", "compression", "producers", "linger", "batch-max-bytes"}

// benchUnusedFlags refuses a flag given where the mode would ignore it: a
// consume or share run's producer flags without --count, and produce's
// --consumers without readers that use it.
func benchUnusedFlags(cmd *cobra.Command, f *benchFlags, mode string) error {
	fl := cmd.Flags()
	switch mode {
	case "produce":
		if fl.Changed("consumers") && (f.fanout == 0 || f.fanoutRaw) {
			return cli.Usagef("--consumers is the consumer clients of each --fanout reader (raw readers have none): give --fanout without --fanout-raw")
		}
	case "consume", "share":
		if f.count > 0 {
			return nil
		}
		for _, name := range benchPrefillFlags {
			if fl.Changed(name) {
				return cli.Usagef("--%s shapes the records produced to fill the topic to --count: give --count", name)
			}
		}
	}
	return nil
}

// benchBaseConfig is what every bench mode's Config takes from the session: the
// brokers, the client options and timeouts, and acks (-1 meaning all).
func benchBaseConfig(s *session, acks string) bench.Config {
	cfg := bench.Config{
		Brokers: s.opts.Brokers, Acks: acks, DrainTimeout: s.opts.Timeout,
		ClientOpts: append([]kgo.Opt{kgo.ClientID("strata-bench"), kgo.DialTimeout(min(s.opts.Timeout, 5*time.Second))}, s.opts.ClientOpts()...),
	}
	if acks == "-1" {
		cfg.Acks = bench.AcksAll
	}
	return cfg
}

func runBench(ctx context.Context, s *session, f *benchFlags, mode string) error {
	if f.fanoutRaw && (s.opts.TLS != nil || s.opts.SASL != nil) {
		return cli.Usagef("--fanout-raw readers connect over plaintext without SASL: leave out --tls and --sasl-*")
	}
	cfg := benchBaseConfig(s, f.acks)
	cfg.Topic, cfg.Partitions, cfg.ReplicationFactor = f.topic, f.partitions, f.replication
	cfg.RecordSize, cfg.Count, cfg.Duration, cfg.Rate = f.recordSize, f.count, f.duration, f.rate
	cfg.Compression, cfg.Producers, cfg.Consumers, cfg.Linger = f.compression, f.producers, f.consumers, f.linger
	cfg.Payload = f.payload
	cfg.TransactionRecords, cfg.Fanout, cfg.FanoutRaw = f.txnRecords, f.fanout, f.fanoutRaw
	cfg.BatchMaxBytes = f.batchBytes
	cfg.Group, cfg.ShareAck, cfg.DeadLetterTopic = f.group, f.shareAck, f.deadLetters
	cfg.Connectors = f.connectors
	for _, kv := range f.configs {
		k, v, err := cli.ParseKeyValue("--config", kv)
		if err != nil {
			return err
		}
		if cfg.TopicConfigs == nil {
			cfg.TopicConfigs = map[string]string{}
		}
		cfg.TopicConfigs[k] = v
	}
	if mode == "share" && cfg.Group == "" {
		cfg.Group = fmt.Sprintf("strata-bench-share-%d", time.Now().Unix())
	}
	if err := cfg.Validate(mode); err != nil {
		return cli.Usage(err)
	}
	if err := cli.Probe(ctx, s.opts); err != nil {
		return err
	}
	setup, err := f.progress.setup(s, false)
	if err != nil {
		return err
	}
	label := "bench " + mode
	if f.topic != "" {
		label += " " + f.topic
	}
	prog := cli.NewProgress(setup, label, cli.UnitRecords, f.count)
	cfg.Progress = prog.Add

	var res bench.Result
	switch mode {
	case "produce":
		res, err = bench.Produce(ctx, cfg)
	case "consume":
		res, err = bench.Consume(ctx, cfg)
	case "share":
		res, err = bench.Share(ctx, cfg)
	case "connect":
		res, err = bench.Connect(ctx, cfg)
	default:
		res, err = bench.E2E(ctx, cfg)
	}
	prog.Finish()
	if err != nil && res.ElapsedSeconds == 0 { // nothing was measured
		return err
	}
	var werr error
	if s.json() {
		werr = cli.WriteJSON(s.env.stdout, res)
	} else {
		werr = res.WriteTable(s.env.stdout)
	}
	if err != nil {
		return fmt.Errorf("bench %s: %w", mode, err)
	}
	return werr
}
