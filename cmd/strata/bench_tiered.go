package main

// strata bench tiered: produce with remote-storage uploads on against off, and
// remote reads (cold, cached) against local ones (internal/bench.Tiered).

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/cli"
)

type benchTieredFlags struct {
	topic       string
	recordSize  int
	count       int64
	duration    time.Duration
	acks        string
	compression string
	partitions  int32
	replication int16
	linger      time.Duration
	opts        bench.TieredOptions
	progress    progressFlags
}

func benchTieredCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	f := &benchTieredFlags{}
	cmd := &cobra.Command{
		Use:   "tiered",
		Short: "Produce with remote-storage uploads on against off, and read remote data (cold, cached) against local",
		Long: `Needs brokers started with --remote-storage. Each round produces for --duration (or
--count records) to a fresh plain topic and to a fresh topic with remote.storage.enable=true (both with
--segment-bytes; the tiered one with --local-retention-bytes), alternating which goes
first, and waits for the brokers to finish uploading after each tiered run. Then it
reads --read-records from the start of the last round's tiered topic (served from the
object store: cold, then cached) and of its plain topic, twice each. The brokers'
--log-cleanup-interval decides how soon data leaves local storage; a few seconds
keeps the run short. Every run starts with the brokers done with the one before
(uploads caught up, or quiet as long), and each round's tiered / plain ratio is
printed beside the ratio of the medians. With --broker-pid (brokers on this
machine) each run is also charged the brokers' CPU seconds and the bytes they wrote
to disk per GB produced, from /proc: counts that a loaded machine changes far less
than rates. Each finished step is a line on stderr (--progress; none in auto mode
with --output json).`,
		Example: `  strata bench tiered --record-size 1024 --duration 5s --rounds 3 --output json
  strata bench tiered --count 200000 --rounds 6 --broker-pid "$SERVER_PID"`,
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	f.bind(cmd)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, cmd *cobra.Command, _ []string) error {
		return runBenchTiered(ctx, s, cmd.Flags(), f)
	})
	return cmd
}

func (f *benchTieredFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.topic, "topic", "t", "strata-bench-tiered", "topic name prefix (each run creates <prefix>-plain-rN and <prefix>-tiered-rN)")
	fl.IntVarP(&f.recordSize, "record-size", "s", 1024, "value bytes per record")
	fl.Int64VarP(&f.count, "count", "n", 0, "records each produce run sends (0: run for --duration)")
	fl.DurationVarP(&f.duration, "duration", "d", 5*time.Second, "length of each produce run without --count")
	fl.StringVar(&f.acks, "acks", "all", "acknowledgement: 0 (none), 1 (leader) or all (in-sync replicas)")
	fl.StringVar(&f.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.Int32VarP(&f.partitions, "partitions", "p", 1, "partitions of each topic")
	fl.Int16VarP(&f.replication, "replication-factor", "r", 1, "replicas per partition")
	fl.DurationVar(&f.linger, "linger", bench.DefaultLinger, "how long a producer waits to fill a batch (0: send at once)")
	fl.IntVar(&f.opts.Rounds, "rounds", 3, "produce rounds, each running both topics")
	fl.Int64Var(&f.opts.SegmentBytes, "segment-bytes", 1<<20, "segment.bytes of every topic (small segments make uploads run all the time)")
	fl.Int64Var(&f.opts.LocalRetentionBytes, "local-retention-bytes", 8<<20, "local.retention.bytes of the tiered topics")
	fl.Int64Var(&f.opts.ReadRecords, "read-records", 100_000, "records each read pass reads, at most those the tiered topic holds only remotely (keep their bytes under the brokers' --remote-cache-size for a cached pass)")
	fl.DurationVar(&f.opts.SettleTimeout, "settle-timeout", 3*time.Minute, "how long to wait for the brokers' uploads and local retention each time")
	fl.IntSliceVar(&f.opts.BrokerPIDs, "broker-pid", nil, "process id of a broker on this machine (repeatable): charge each produce run the brokers' CPU seconds and disk writes per GB")
	completeValues(cmd, "acks", "all", "1", "0")
	completeValues(cmd, "compression", "none", "gzip", "snappy", "lz4", "zstd")
	f.progress.bind(cmd)
}

// config is the run's Config on base (brokers, client options, acks) from
// the flags fl holds; a bad flag is a usage error.
func (f *benchTieredFlags) config(base bench.Config, fl *pflag.FlagSet) (bench.Config, error) {
	cfg := base
	cfg.Topic, cfg.Partitions, cfg.ReplicationFactor = f.topic, f.partitions, f.replication
	cfg.RecordSize, cfg.Count, cfg.Duration = f.recordSize, f.count, f.duration
	cfg.Compression, cfg.Producers, cfg.Consumers, cfg.Linger = f.compression, 1, 1, f.linger
	if f.count > 0 {
		if fl.Changed("duration") {
			return cfg, cli.Usagef("--duration is the length of each produce run without --count: give one of them")
		}
		cfg.Duration = 0
	}
	if err := cfg.Validate("produce"); err != nil {
		return cfg, cli.Usage(err)
	}
	if err := f.opts.Validate(); err != nil {
		return cfg, cli.Usage(err)
	}
	for _, pid := range f.opts.BrokerPIDs {
		if err := bench.ProcessReadable(pid); err != nil {
			return cfg, cli.Usagef("--broker-pid %d: %v", pid, err)
		}
	}
	return cfg, nil
}

func runBenchTiered(ctx context.Context, s *session, fl *pflag.FlagSet, f *benchTieredFlags) error {
	cfg, err := f.config(benchBaseConfig(s, f.acks), fl)
	if err != nil {
		return err
	}
	setup, err := f.progress.setup(s, false)
	if err != nil {
		return err
	}
	if err := cli.Probe(ctx, s.opts); err != nil {
		return err
	}
	opts := f.opts
	opts.Step = cli.NewSteps(setup, "bench tiered")
	res, err := bench.Tiered(ctx, cfg, opts)
	if err != nil {
		return fmt.Errorf("bench tiered: %w", err)
	}
	if s.json() {
		return cli.WriteJSON(s.env.stdout, res)
	}
	return res.WriteTable(s.env.stdout)
}
