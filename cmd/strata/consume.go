package main

// strata consume: read records directly from partitions or as a group member.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/cli"
)

// groupPollWait bounds one poll of a group consumer that is not following, so that it
// notices when its assigned partitions are all read to the end.
const groupPollWait = 500 * time.Millisecond

func consumeCmd() *cobra.Command { return newConsumeCmd(processEnv()) }

type consumeFlags struct {
	group      string
	from       string
	count      int64
	follow     bool
	format     string
	partitions []int32
	progress   progressFlags
}

func newConsumeCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	f := &consumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Print records of a topic, one per line, read directly from its partitions or, with
--group, as a member of a consumer group (committing what it printed).

Without --follow it stops at the end of the partitions as they were when it
started; with --follow it waits for new records until interrupted or --count is
reached. A group member without --follow stops when the partitions assigned to it
are read to their end.

--from is where to start (for a group: where partitions without a committed offset
start): earliest, latest, an offset, an RFC3339 time, or unix milliseconds (@MS, or
any number of 13+ digits).

--format is a ` + cli.FormatHelp,
		Example: `  strata consume orders
  strata consume orders --from latest --follow
  strata consume orders --from 2024-05-01T00:00:00Z --count 10 --format '%p/%o %k=%v'
  strata consume orders --group billing --output json`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.group, "group", "g", "", "consume as a member of this consumer group (else directly from the partitions)")
	fl.StringVar(&f.from, "from", "earliest", "start: earliest, latest, OFFSET, RFC3339 time or unix ms")
	fl.Int64VarP(&f.count, "count", "n", 0, "stop after this many records (0: no limit)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep waiting for new records")
	fl.StringVar(&f.format, "format", "%v", "record template (see above)")
	fl.Int32SliceVarP(&f.partitions, "partition", "p", nil, "read only these partitions (not with --group)")
	f.progress.bind(cmd)
	completeValues(cmd, "from", "earliest", "latest")
	cmd.RegisterFlagCompletionFunc("group", completeGroups(env, g))
	return newLeafCmd(env, g, cmd, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		return consume(ctx, s, f, args[0])
	})
}

// resetOffset is where a group member starts in a partition without a committed offset.
func resetOffset(spec admin.OffsetSpec) kgo.Offset {
	switch spec.Kind {
	case admin.OffsetLatest:
		return kgo.NewOffset().AtEnd()
	case admin.OffsetExact:
		return kgo.NewOffset().At(spec.Offset)
	case admin.OffsetTime:
		return kgo.NewOffset().AfterMilli(spec.Millis)
	}
	return kgo.NewOffset().AtStart()
}

// consumeTracker knows where each partition stands against the end offsets taken at
// the start, to stop a consumer that does not follow. Assignment callbacks run on the
// client's goroutines.
type consumeTracker struct {
	end map[int32]int64 // high-water marks at the start
	pos map[int32]int64 // next offset to print

	mu       sync.Mutex
	assigned map[int32]bool // group members: partitions assigned now; nil for direct reads
}

func (t *consumeTracker) caughtUp(p int32) bool { return t.pos[p] >= t.end[p] }

// done says whether every partition read (or assigned) is at its end.
func (t *consumeTracker) done() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.assigned == nil {
		for p := range t.pos {
			if !t.caughtUp(p) {
				return false
			}
		}
		return true
	}
	if len(t.assigned) == 0 {
		return false
	}
	for p := range t.assigned {
		if !t.caughtUp(p) {
			return false
		}
	}
	return true
}

func (t *consumeTracker) assign(topic string, changes map[string][]int32, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range changes[topic] {
		if on {
			t.assigned[p] = true
		} else {
			delete(t.assigned, p)
		}
	}
}

func consume(ctx context.Context, s *session, f *consumeFlags, topic string) error {
	spec, err := cli.ParseOffsetSpec("--from", f.from)
	if err != nil {
		return err
	}
	var tmpl *cli.RecordFormat
	if !s.json() {
		if tmpl, err = cli.ParseRecordFormat(f.format); err != nil {
			return err
		}
	}
	progress, err := f.progress.setup(s, true)
	if err != nil {
		return err
	}
	switch {
	case f.count < 0:
		return cli.Usagef("--count must not be negative, got %d", f.count)
	case f.group != "" && len(f.partitions) > 0:
		return cli.Usagef("--partition and --group exclude each other: a group assigns partitions itself")
	}

	tr := &consumeTracker{}
	var opts []kgo.Opt
	if f.group != "" {
		tr.assigned = map[int32]bool{}
		opts = append(opts,
			kgo.ConsumerGroup(f.group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(resetOffset(spec)),
			kgo.AutoCommitMarks(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(topic, m, true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(topic, m, false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(topic, m, false) }),
		)
	}
	cl, err := cli.Connect(ctx, s.opts, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	lookupCtx, cancel := s.withTimeout(ctx)
	defer cancel()
	if f.group != "" {
		if err := cli.RequireAPIs(lookupCtx, adm, apiFindCoordinator, apiJoinGroup, apiSyncGroup, apiHeartbeat, apiOffsetFetch, apiOffsetCommit); err != nil {
			return err
		}
	}
	bounds, err := admin.ListBounds(lookupCtx, adm, topic)
	if err != nil {
		return err
	}
	for _, p := range f.partitions {
		if _, ok := bounds[p]; !ok {
			return fmt.Errorf("topic %q has no partition %d (it has %d)", topic, p, len(bounds))
		}
	}
	if len(f.partitions) > 0 {
		for p := range bounds {
			if !slices.Contains(f.partitions, p) {
				delete(bounds, p)
			}
		}
	}
	start, err := spec.Resolve(lookupCtx, adm, topic, bounds)
	if err != nil {
		return err
	}
	if f.group != "" {
		committed, err := fetchCommitted(lookupCtx, adm, f.group)
		if err != nil {
			return err
		}
		for p, b := range bounds {
			if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
				start[p] = min(max(c.At, b.Start), b.End)
			}
		}
	}
	tr.end, tr.pos = map[int32]int64{}, map[int32]int64{}
	var total int64
	for p, b := range bounds {
		tr.end[p], tr.pos[p] = b.End, start[p]
		total += b.End - start[p]
	}
	if f.follow {
		total = 0
	}
	if f.count > 0 && (total == 0 || f.count < total) {
		total = f.count
	}
	if f.group == "" {
		offsets := map[int32]kgo.Offset{}
		for p, o := range start {
			offsets[p] = kgo.NewOffset().At(o)
		}
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})
	}

	prog := cli.NewProgress(progress, "consume "+topic, cli.UnitRecords, total)
	defer prog.Finish()

	out := bufio.NewWriterSize(s.env.stdout, 64<<10)
	defer out.Flush()
	var line []byte
	printed := int64(0)
	err = func() error {
		for {
			if !f.follow && tr.done() {
				return nil
			}
			pollCtx, cancelPoll := ctx, context.CancelFunc(func() {})
			if f.group != "" && !f.follow {
				pollCtx, cancelPoll = context.WithTimeout(ctx, groupPollWait)
			}
			fetches := cl.PollRecords(pollCtx, 10_000)
			cancelPoll()
			if ctx.Err() != nil {
				return nil // interrupted: what was printed stands
			}
			for _, fe := range fetches.Errors() {
				if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
					continue
				}
				return fmt.Errorf("topic %q partition %d: %w", fe.Topic, fe.Partition, fe.Err)
			}
			for it := fetches.RecordIter(); !it.Done(); {
				r := it.Next()
				if !f.follow && r.Offset >= tr.end[r.Partition] {
					// Past the end taken at the start (or the log start moved past it).
					tr.mu.Lock()
					tr.pos[r.Partition] = max(tr.pos[r.Partition], tr.end[r.Partition])
					tr.mu.Unlock()
					continue
				}
				if s.json() {
					b, err := json.Marshal(cli.NewRecordJSON(r))
					if err != nil {
						return err
					}
					line = append(b, '\n')
				} else {
					line = append(tmpl.Append(line[:0], r), '\n')
				}
				if _, err := out.Write(line); err != nil {
					return err
				}
				tr.mu.Lock()
				tr.pos[r.Partition] = r.Offset + 1
				tr.mu.Unlock()
				if f.group != "" {
					cl.MarkCommitRecords(r)
				}
				prog.Add(1)
				if printed++; f.count > 0 && printed >= f.count {
					return nil
				}
			}
			if err := out.Flush(); err != nil {
				return err
			}
		}
	}()
	if flushErr := out.Flush(); err == nil {
		err = flushErr
	}
	if f.group != "" {
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
		defer cancel()
		if cerr := cl.CommitMarkedOffsets(commitCtx); cerr != nil && err == nil {
			err = fmt.Errorf("group %q: committing offsets: %w", f.group, cerr)
		}
	}
	return err
}
