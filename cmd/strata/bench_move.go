package main

// strata bench move: the cost of moving a partition (issue 13's figures). One
// partition is filled on one broker, moved whole to another unthrottled, then
// moved back under the replication throttle while a paced acks=all producer
// measures its latency, which is then measured again with nothing moving. The
// raw disk figure (sequential write + fsync of the same size) is taken first.
// internal/bench holds the figures and the disk measurement; the moves go
// through the same reassignment and throttle calls as `strata cluster
// rebalance`.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/rebalance"
	"github.com/strata-stream/strata/internal/vfs"
)

type benchMoveFlags struct {
	topic        string
	sizeMiB      int64
	recordSize   int
	throttle     int64
	from, to     int32
	diskDir      string
	latencyRate  int
	latencySize  int
	wait         time.Duration
	keepTopics   bool
	latencyTopic string
	timeline     time.Duration
	progress     progressFlags
}

// movePoll is how often a timed move is checked for completion: the bound on
// how much a move's measured time can overshoot.
const movePoll = 20 * time.Millisecond

func benchMoveCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	f := &benchMoveFlags{}
	cmd := &cobra.Command{
		Use:   "move",
		Short: "Time a partition move, unthrottled and throttled, against the raw disk, and a producer's latency during it",
		Long: `Time a partition move on a cluster of two brokers or more:
  1. raw disk: --size-mib MiB written sequentially and fsynced once, in a new file in
     --disk-dir (give a directory on the filesystem of the brokers' data);
  2. fill: a new topic's one partition on broker --from gets --size-mib MiB;
  3. move it to broker --to, which holds none of it, unthrottled, timed from the
     reassignment request until the controller lists it no longer;
  4. move it back to --from with --throttle bytes/s as the replication throttle (both
     brokers' leader and follower rates, and the topic's throttled replicas), while a
     producer sends --latency-rate records/s with acks=all to a second topic
     replicated on both brokers; the throttle is cleared when the move is done;
  5. run the same producer for as long again with nothing moving.
It prints the rates, the unthrottled move against the raw disk, the throttled one
against its throttle, and the producer's latency during the move against idle.
Both topics are deleted at the end unless --keep-topics. Each step is a line on
stderr, and the fill reports its records (--progress; none in auto mode with
--output json).`,
		Example: `  strata dev cluster --nodes 3 --base-dir /var/tmp/movebench &
  strata bench move --brokers 127.0.0.1:9092 --disk-dir /var/tmp/movebench --size-mib 1024 --throttle 50000000`,
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.topic, "topic", "t", "strata-bench-move", "topic to create and move (must not exist); the producer's is <topic>-latency")
	fl.Int64Var(&f.sizeMiB, "size-mib", 1024, "MiB of records to fill the partition with")
	fl.IntVarP(&f.recordSize, "record-size", "s", 16384, "value bytes per record of the fill")
	fl.Int64Var(&f.throttle, "throttle", 0, "replication throttle of the second move in bytes/s (0: half the unthrottled move's rate)")
	fl.Int32Var(&f.from, "from", -1, "broker the partition starts on (-1: the lowest id)")
	fl.Int32Var(&f.to, "to", -1, "broker it moves to (-1: the next id after --from)")
	fl.StringVar(&f.diskDir, "disk-dir", "", "directory for the raw disk measurement, on the filesystem of the brokers' data (required)")
	fl.IntVar(&f.latencyRate, "latency-rate", 500, "records/s of the latency producer")
	fl.IntVar(&f.latencySize, "latency-record-size", 1024, "value bytes per record of the latency producer")
	fl.DurationVar(&f.wait, "wait", 30*time.Minute, "bound on each move")
	fl.BoolVar(&f.keepTopics, "keep-topics", false, "keep both topics at the end")
	fl.DurationVar(&f.timeline, "timeline", 0, "also print the producer's p99 and max per window of this length, in both runs (0: none)")
	f.progress.bind(cmd)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		if err := f.validate(); err != nil {
			return cli.Usage(err)
		}
		setup, err := f.progress.setup(s, false)
		if err != nil {
			return err
		}
		f.latencyTopic = f.topic + "-latency"
		res, err := runBenchMove(ctx, s, f, setup)
		if err != nil {
			return err
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, res)
		}
		return res.WriteTable(s.env.stdout)
	})
	return cmd
}

// maxMoveSizeMiB bounds --size-mib (1 PiB): past it the byte count overflows.
const maxMoveSizeMiB = 1 << 30

func (f *benchMoveFlags) validate() error {
	switch {
	case f.topic == "":
		return errors.New("--topic must not be empty")
	case f.sizeMiB < 1 || f.sizeMiB > maxMoveSizeMiB:
		return fmt.Errorf("--size-mib %d: want 1 to %d", f.sizeMiB, maxMoveSizeMiB)
	case f.recordSize < 1 || f.recordSize > 1<<20:
		return fmt.Errorf("--record-size %d: want 1 to %d", f.recordSize, 1<<20)
	case f.throttle < 0:
		return fmt.Errorf("--throttle %d: want bytes per second (0: half the unthrottled rate)", f.throttle)
	case f.diskDir == "":
		return errors.New("--disk-dir is required: a directory on the filesystem of the brokers' data")
	case f.latencyRate < 1:
		return fmt.Errorf("--latency-rate %d: want at least 1 record/s", f.latencyRate)
	case f.latencySize < 0 || f.latencySize > 1<<20:
		return fmt.Errorf("--latency-record-size %d: want 0 to %d", f.latencySize, 1<<20)
	case f.timeline < 0:
		return fmt.Errorf("--timeline %v: want a window length (0: none)", f.timeline)
	case f.wait <= 0:
		return fmt.Errorf("--wait %v: want a positive duration", f.wait)
	case f.from < -1:
		return fmt.Errorf("--from %d: want a broker id (-1: the lowest)", f.from)
	case f.to < -1:
		return fmt.Errorf("--to %d: want a broker id (-1: the next after --from)", f.to)
	case f.from >= 0 && f.from == f.to:
		return fmt.Errorf("--from and --to are both %d", f.from)
	}
	if fi, err := os.Stat(f.diskDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--disk-dir %s: not a directory", f.diskDir)
	}
	return nil
}

// pickMoveBrokers resolves --from and --to against the registered brokers:
// --from defaults to the lowest id, --to to the next id after --from
// (wrapping round).
func pickMoveBrokers(ids []int32, from, to int32) (int32, int32, error) {
	ids = slices.Sorted(slices.Values(ids))
	if len(ids) < 2 {
		return 0, 0, fmt.Errorf("a move needs two brokers, the cluster has %v", ids)
	}
	if from < 0 {
		from = ids[0]
	}
	i := slices.Index(ids, from)
	if i < 0 {
		return 0, 0, fmt.Errorf("--from %d is not a broker of %v", from, ids)
	}
	if to < 0 {
		to = ids[(i+1)%len(ids)]
	}
	if !slices.Contains(ids, to) || to == from {
		return 0, 0, fmt.Errorf("--to %d is not a broker of %v other than %d", to, ids, from)
	}
	return from, to, nil
}

func runBenchMove(ctx context.Context, s *session, f *benchMoveFlags, setup cli.ProgressSetup) (bench.MoveResult, error) {
	res := bench.MoveResult{Topic: f.topic, DiskDir: f.diskDir, LatencyTopic: f.latencyTopic,
		LatencyRate: f.latencyRate, LatencyRecordSize: f.latencySize}
	if err := cli.Probe(ctx, s.opts); err != nil {
		return res, err
	}
	cl, adm, err := s.admin(ctx)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	// Each admin step gets --timeout of its own: the fill and the moves take
	// as long as they take.
	step := func(do func(context.Context) error) error {
		ctx, cancel := s.withTimeout(ctx)
		defer cancel()
		return do(ctx)
	}
	var md kadm.Metadata
	if err := step(func(ctx context.Context) (err error) { md, err = adm.Metadata(ctx); return err }); err != nil {
		return res, err
	}
	if res.From, res.To, err = pickMoveBrokers(md.Brokers.NodeIDs(), f.from, f.to); err != nil {
		return res, cli.Usage(err)
	}
	for _, topic := range []string{f.topic, f.latencyTopic} {
		if _, ok := md.Topics[topic]; ok {
			return res, cli.Usagef("topic %s exists: name a new one with --topic, or delete it", topic)
		}
	}
	size := f.sizeMiB << 20

	steps := cli.NewSteps(setup, "bench move")
	note := func(format string, args ...any) { steps(fmt.Sprintf(format, args...)) }
	note("raw disk: writing %d MiB to %s", f.sizeMiB, f.diskDir)
	if res.Disk, err = bench.DiskWrite(vfs.Default, f.diskDir, size); err != nil {
		return res, fmt.Errorf("measuring the disk in %s: %w", f.diskDir, err)
	}

	var created []string // deleted at the end, even when a later step fails
	if !f.keepTopics {
		defer func() {
			if len(created) == 0 {
				return
			}
			delCtx, cancel := s.withTimeout(context.WithoutCancel(ctx))
			defer cancel()
			if _, err := adm.DeleteTopics(delCtx, created...); err != nil {
				fmt.Fprintf(s.env.stderr, "bench move: deleting the topics: %v\n", err)
			}
		}()
	}
	for _, t := range []struct {
		name     string
		replicas []int32
	}{{f.topic, []int32{res.From}}, {f.latencyTopic, []int32{res.From, res.To}}} {
		if err := step(func(ctx context.Context) error { return createAssigned(ctx, cl, t.name, t.replicas) }); err != nil {
			return res, err
		}
		created = append(created, t.name)
	}
	base := bench.Config{
		Brokers: s.opts.Brokers, Partitions: 1, ReplicationFactor: 1, Acks: bench.AcksAll,
		Compression: "none", Producers: 1, DrainTimeout: s.opts.Timeout,
		ClientOpts: append([]kgo.Opt{kgo.ClientID("strata-bench-move")}, s.opts.ClientOpts()...),
	}
	fill := base
	fill.Topic, fill.RecordSize, fill.Linger = f.topic, f.recordSize, bench.DefaultLinger
	fill.Count = (size + int64(f.recordSize) - 1) / int64(f.recordSize)
	note("filling %s-0 on broker %d with %d records of %d B", f.topic, res.From, fill.Count, f.recordSize)
	prog := cli.NewProgress(setup, fmt.Sprintf("bench move fill %s-0", f.topic), cli.UnitRecords, fill.Count)
	fill.Progress = prog.Add
	r, err := bench.Produce(ctx, fill)
	prog.Finish()
	if err != nil {
		return res, fmt.Errorf("filling %s: %w", f.topic, err)
	}
	if r.Failed > 0 {
		return res, fmt.Errorf("filling %s: %d records failed", f.topic, r.Failed)
	}
	var bytes int64
	if err := step(func(ctx context.Context) (err error) {
		bytes, err = partitionSize(ctx, adm, f.topic, res.From)
		return err
	}); err != nil {
		return res, err
	}

	note("moving %d bytes from broker %d to %d, unthrottled", bytes, res.From, res.To)
	elapsed, err := timeMove(ctx, adm, f.topic, res.To, f.wait)
	if err != nil {
		return res, err
	}
	res.Unthrottled = bench.NewThroughput(bytes, elapsed)

	res.Throttle = f.throttle
	if res.Throttle == 0 {
		res.Throttle = bench.DefaultThrottle(res.Unthrottled)
	}
	latency := base
	latency.Topic, latency.RecordSize, latency.Rate, latency.Linger = f.latencyTopic, f.latencySize, f.latencyRate, 0
	latency.Timeline = f.timeline
	warm := latency
	warm.Count, warm.Rate, warm.Timeline = int64(f.latencyRate), 0, 0 // untimed: connections and metadata
	if _, err := bench.Produce(ctx, warm); err != nil {
		return res, fmt.Errorf("warming the producer up: %w", err)
	}

	note("moving it back to broker %d, throttled to %d bytes/s, with %d records/s produced to %s", res.From, res.Throttle, f.latencyRate, f.latencyTopic)
	back := []rebalance.Move{{Topic: f.topic, Partition: 0, From: []int32{res.To}, To: []int32{res.From}}}
	err = step(func(ctx context.Context) error { return setRebalanceThrottle(ctx, adm, back, res.Throttle) })
	var moving bench.Result
	if err == nil {
		moving, err = latencyDuring(ctx, latency, f.wait, func() error {
			var err error
			elapsed, err = timeMove(ctx, adm, f.topic, res.From, f.wait)
			return err
		})
	}
	// Cleared whatever happened: a throttle left behind would slow the
	// cluster's next moves.
	clearCtx, cancelClear := s.withTimeout(context.WithoutCancel(ctx))
	if cerr := clearRebalanceThrottle(clearCtx, adm, back); err == nil {
		err = cerr
	}
	cancelClear()
	if err != nil {
		return res, err
	}
	res.Throttled = bench.NewThroughput(bytes, elapsed)
	res.LatencyMoving, res.LatencyMovingFailed, res.TimelineMoving = moving.Latency, moving.Failed, moving.Timeline

	note("the same producer for %.1f s with nothing moving", elapsed.Seconds())
	idle := latency
	idle.Duration = max(elapsed, time.Second)
	r, err = bench.Produce(ctx, idle)
	if err != nil && r.ElapsedSeconds == 0 {
		return res, fmt.Errorf("the idle producer: %w", err)
	}
	res.LatencyIdle, res.LatencyIdleFailed, res.TimelineIdle = r.Latency, r.Failed, r.Timeline
	res.Finish()
	return res, nil
}

// latencyDuring runs the paced producer of c while during runs, and returns
// what it measured once during has returned.
func latencyDuring(ctx context.Context, c bench.Config, bound time.Duration, during func() error) (bench.Result, error) {
	c.Duration = bound
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	type produced struct {
		r   bench.Result
		err error
	}
	done := make(chan produced, 1)
	go func() {
		r, err := bench.Produce(pctx, c)
		done <- produced{r, err}
	}()
	err := during()
	stop()
	p := <-done
	if err != nil {
		return p.r, err
	}
	if p.err != nil && !errors.Is(p.err, context.Canceled) && p.r.ElapsedSeconds == 0 {
		return p.r, fmt.Errorf("the producer during the move: %w", p.err)
	}
	return p.r, nil
}

// timeMove reassigns topic's partition 0 to the broker to and returns the
// time from the request to the moment the controller lists the move no more.
func timeMove(ctx context.Context, adm *kadm.Client, topic string, to int32, wait time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{to})
	start := time.Now()
	if err := submitMoves(ctx, adm, req); err != nil {
		return 0, err
	}
	set := kadm.TopicsSet{}
	set.Add(topic, 0)
	tick := time.NewTicker(movePoll)
	defer tick.Stop()
	for {
		n, err := reassigning(ctx, adm, set)
		if err == nil && n == 0 {
			return time.Since(start), nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, fmt.Errorf("moving %s-0 to broker %d: not done after %v (last: %v)", topic, to, wait, err)
		}
	}
}

// createAssigned creates topic with one partition on replicas and waits until
// it has a leader.
func createAssigned(ctx context.Context, cl *kgo.Client, topic string, replicas []int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.TopicAlreadyExists) {
				return cli.Usagef("topic %s exists: name a new one with --topic, or delete it", topic)
			}
			return brokerError("creating "+topic, err, deref(t.ErrorMessage))
		}
	}
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(movePoll)
	defer tick.Stop()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && p.Err == nil && p.Leader >= 0 {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s has no leader: %w", topic, ctx.Err())
		}
	}
}

// partitionSize is the bytes of topic's partition 0 on broker id, as
// DescribeLogDirs reports them.
func partitionSize(ctx context.Context, adm *kadm.Client, topic string, id int32) (int64, error) {
	set := kadm.TopicsSet{}
	set.Add(topic, 0)
	dirs, err := adm.DescribeBrokerLogDirs(ctx, id, set)
	if err != nil {
		return 0, fmt.Errorf("the size of %s-0 on broker %d: %w", topic, id, err)
	}
	var size int64 = -1
	for _, d := range dirs {
		if d.Err != nil {
			return 0, fmt.Errorf("the size of %s-0 on broker %d: %w", topic, id, d.Err)
		}
		if p, ok := d.Topics[topic][0]; ok {
			size = p.Size
		}
	}
	if size < 0 {
		return 0, fmt.Errorf("broker %d lists no %s-0 in its log dirs", id, topic)
	}
	return size, nil
}
