package main

// strata topic: create, list, describe, alter-config, add-partitions, delete.

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/cli"
)

func topicCmd() *cobra.Command { return newTopicCmd(processEnv()) }

func newTopicCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "topic", "Create, list, describe, configure and delete topics")
	cmd.AddCommand(
		topicCreateCmd(env, g),
		topicListCmd(env, g),
		topicDescribeCmd(env, g),
		topicAlterConfigCmd(env, g),
		topicAddPartitionsCmd(env, g),
		topicDeleteCmd(env, g),
	)
	return cmd
}

// topicIDString formats a topic id the way Kafka's tools do (URL-safe base64, no
// padding).
func topicIDString(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// withBrokerMessage appends the broker's error message to err when it adds something.
func withBrokerMessage(err error, msg string) error {
	if msg == "" || strings.Contains(err.Error(), msg) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

// brokerError says what failed, with the broker's message if it sent one.
func brokerError(what string, err error, msg string) error {
	return fmt.Errorf("%s: %w", what, withBrokerMessage(err, msg))
}

type createdTopicJSON struct {
	Topic             string            `json:"topic"`
	ID                string            `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

func topicCreateCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var (
		partitions int32
		rf         int16
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Example: `  strata topic create orders -p 6 -r 1 -c retention.ms=86400000
  strata topic create audit -c cleanup.policy=compact`,
		Args: usageArgs(env, cobra.ExactArgs(1)),
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: the broker's default)")
	cmd.Flags().Int16VarP(&rf, "replication-factor", "r", -1, "replicas per partition (-1: the broker's default)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		name := args[0]
		if partitions == 0 || partitions < -1 {
			return cli.Usagef("--partitions must be positive (or -1 for the default), got %d", partitions)
		}
		if rf == 0 || rf < -1 {
			return cli.Usagef("--replication-factor must be positive (or -1 for the default), got %d", rf)
		}
		cfg := map[string]*string{}
		shown := map[string]string{}
		for _, kv := range configs {
			k, v, err := cli.ParseKeyValue("--config", kv)
			if err != nil {
				return err
			}
			cfg[k] = kadm.StringPtr(v)
			shown[k] = v
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			resp, err := adm.CreateTopic(ctx, partitions, rf, cfg, name)
			if err != nil {
				return brokerError(fmt.Sprintf("creating topic %q", name), err, resp.ErrMessage)
			}
			out := createdTopicJSON{Topic: name, ID: topicIDString(resp.ID), Partitions: resp.NumPartitions, ReplicationFactor: resp.ReplicationFactor, Configs: shown}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			fmt.Fprintf(s.env.stdout, "created topic %s: %d partitions, replication factor %d, id %s\n",
				name, out.Partitions, out.ReplicationFactor, out.ID)
			return nil
		})
	})
	return cmd
}

type listedTopicJSON struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func topicListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Args:    usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics (__consumer_offsets, __transaction_state, __share_group_state)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			var topics kadm.TopicDetails
			var err error
			if internal {
				topics, err = adm.ListTopicsWithInternal(ctx)
			} else {
				topics, err = adm.ListTopics(ctx)
			}
			if err != nil {
				return err
			}
			out := []listedTopicJSON{}
			for _, t := range topics.Sorted() {
				if t.Err != nil {
					return brokerError(fmt.Sprintf("topic %q", t.Topic), t.Err, "")
				}
				out = append(out, listedTopicJSON{
					Topic: t.Topic, ID: topicIDString(t.ID), Partitions: len(t.Partitions),
					ReplicationFactor: t.Partitions.NumReplicas(), Internal: t.IsInternal,
				})
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			tw := cli.NewTable(s.env.stdout, "TOPIC", "PARTITIONS", "REPLICATION-FACTOR")
			for _, t := range out {
				tw.Row(t.Topic, t.Partitions, t.ReplicationFactor)
			}
			return tw.Flush()
		})
	})
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

type describedTopicJSON struct {
	Topic             string              `json:"topic"`
	ID                string              `json:"id"`
	Internal          bool                `json:"internal"`
	ReplicationFactor int                 `json:"replication_factor"`
	Partitions        []partitionJSON     `json:"partitions"`
	Configs           []describedConfJSON `json:"configs"`
}

type partitionJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	LogStartOffset  int64   `json:"log_start_offset"` // -1: could not be listed
	HighWatermark   int64   `json:"high_watermark"`   // -1: could not be listed
	// LocalSizeBytes is the size of the leader's replica on its disk (DescribeLogDirs); -1: unknown.
	LocalSizeBytes int64 `json:"local_size_bytes"`
	// Tiered topics only: the first offset still on the leader's disk (ListOffsets
	// -4) and the end of what is uploaded to remote storage (-6, earliest pending
	// upload). Offsets from
	// log_start_offset to local_log_start_offset are read from remote storage.
	LocalLogStartOffset *int64 `json:"local_log_start_offset,omitempty"`
	RemoteEndOffset     *int64 `json:"remote_end_offset,omitempty"`
	Error               string `json:"error,omitempty"`
}

type describedConfJSON struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Default   bool    `json:"default"`
	Sensitive bool    `json:"sensitive"`
}

func topicDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var allConfigs bool
	cmd := &cobra.Command{
		Use:               "describe TOPIC...",
		Short:             "Show partitions (leader, replicas, ISR, log start, high-water mark) and configs",
		Args:              usageArgs(env, cobra.MinimumNArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "table output: list every config, not only those set on the topic")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, names []string) error {
		ctx, cancel := s.withTimeout(ctx)
		defer cancel()
		cl, adm, err := s.admin(ctx)
		if err != nil {
			return err
		}
		defer cl.Close()
		out, err := describeTopics(ctx, cl, adm, unique(names))
		if err != nil {
			return err
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		for i, t := range out {
			if i > 0 {
				fmt.Fprintln(s.env.stdout)
			}
			printTopic(s, t, allConfigs)
		}
		return nil
	})
	return cmd
}

// describeTopics gathers metadata, offsets, sizes and configs of the named
// topics. An unknown topic fails the whole call; a partition whose offsets cannot
// be listed (no leader) is reported with -1 offsets and its error.
func describeTopics(ctx context.Context, cl *kgo.Client, adm *kadm.Client, names []string) ([]describedTopicJSON, error) {
	details, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		d, ok := details[n]
		if !ok {
			return nil, fmt.Errorf("topic %q: not in the metadata answer", n)
		}
		if d.Err != nil {
			return nil, brokerError(fmt.Sprintf("topic %q", n), d.Err, "")
		}
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil && !isShardErrors(err) {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil && !isShardErrors(err) {
		return nil, err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, err
	}
	// Sizes are extra: a broker that does not answer leaves its partitions' -1.
	dirs, err := adm.DescribeAllLogDirs(ctx, details.TopicsSet())
	if err != nil && !isShardErrors(err) {
		return nil, err
	}
	var tiered []string
	for _, n := range names {
		if rc, err := configs.On(n, nil); err == nil && rc.Err == nil && configIsTrue(rc.Configs, "remote.storage.enable") {
			tiered = append(tiered, n)
		}
	}
	localStarts, remoteEnds := map[string]map[int32]int64{}, map[string]map[int32]int64{}
	if len(tiered) > 0 {
		localStarts = listOffsetsAt(ctx, cl, details, tiered, offsetEarliestLocal)
		remoteEnds = listOffsetsAt(ctx, cl, details, tiered, offsetEarliestPendingUpload)
	}
	out := make([]describedTopicJSON, 0, len(names))
	for _, n := range names {
		d := details[n]
		t := describedTopicJSON{Topic: n, ID: topicIDString(d.ID), Internal: d.IsInternal,
			ReplicationFactor: d.Partitions.NumReplicas(), Partitions: []partitionJSON{}, Configs: []describedConfJSON{}}
		for _, p := range d.Partitions.Sorted() {
			pj := partitionJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas),
				LogStartOffset: -1, HighWatermark: -1, LocalSizeBytes: -1}
			if rp, ok := dirs[p.Leader].LookupPartition(n, p.Partition); ok {
				pj.LocalSizeBytes = rp.Size
			}
			if o, ok := localStarts[n][p.Partition]; ok {
				pj.LocalLogStartOffset = &o
			}
			if o, ok := remoteEnds[n][p.Partition]; ok {
				pj.RemoteEndOffset = &o
			}
			var errs []error
			if p.Err != nil {
				errs = append(errs, p.Err)
			}
			if o, ok := starts.Lookup(n, p.Partition); ok && o.Err == nil {
				pj.LogStartOffset = o.Offset
			} else if ok {
				errs = append(errs, o.Err)
			}
			if o, ok := ends.Lookup(n, p.Partition); ok && o.Err == nil {
				pj.HighWatermark = o.Offset
			} else if ok {
				errs = append(errs, o.Err)
			}
			if err := errors.Join(errs...); err != nil {
				pj.Error = err.Error()
			}
			t.Partitions = append(t.Partitions, pj)
		}
		rc, err := configs.On(n, nil)
		if err != nil {
			return nil, fmt.Errorf("topic %q configs: %w", n, err)
		}
		if rc.Err != nil {
			return nil, brokerError(fmt.Sprintf("topic %q configs", n), rc.Err, rc.ErrMessage)
		}
		for _, c := range rc.Configs {
			t.Configs = append(t.Configs, describedConfJSON{Name: c.Key, Value: c.Value, Source: c.Source.String(),
				Default: c.Source == kmsg.ConfigSourceDefaultConfig, Sensitive: c.Sensitive})
		}
		slices.SortFunc(t.Configs, func(a, b describedConfJSON) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, t)
	}
	return out, nil
}

// ListOffsets timestamps of tiered storage: the first offset on the leader's
// disk (KIP-405), and the first offset not yet uploaded (KIP-1023).
const (
	offsetEarliestLocal         = -4
	offsetEarliestPendingUpload = -6
)

// listOffsetsAt lists the offset at a special timestamp for every partition of
// topics, each from its leader. Partitions that fail are left out.
func listOffsetsAt(ctx context.Context, cl *kgo.Client, details kadm.TopicDetails, topics []string, timestamp int64) map[string]map[int32]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, n := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = n
		for _, p := range details[n].Partitions.Sorted() {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeaderEpoch = -1
			rp.Timestamp = timestamp
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	out := map[string]map[int32]int64{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			continue
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				if out[t.Topic] == nil {
					out[t.Topic] = map[int32]int64{}
				}
				out[t.Topic][p.Partition] = p.Offset
			}
		}
	}
	return out
}

func configIsTrue(configs []kadm.Config, name string) bool {
	for _, c := range configs {
		if c.Key == name && c.Value != nil {
			return strings.EqualFold(*c.Value, "true")
		}
	}
	return false
}

// unique drops repeated names, keeping the first of each.
func unique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func isShardErrors(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se)
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func printTopic(s *session, t describedTopicJSON, allConfigs bool) {
	w := s.env.stdout
	fmt.Fprintf(w, "Topic:              %s\n", t.Topic)
	fmt.Fprintf(w, "ID:                 %s\n", t.ID)
	fmt.Fprintf(w, "Partitions:         %d\n", len(t.Partitions))
	fmt.Fprintf(w, "Replication factor: %d\n", t.ReplicationFactor)
	if t.Internal {
		fmt.Fprintf(w, "Internal:           true\n")
	}
	fmt.Fprintln(w)
	tiered := slices.ContainsFunc(t.Partitions, func(p partitionJSON) bool { return p.LocalLogStartOffset != nil })
	header := []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "HIGH-WATERMARK", "LOCAL-SIZE"}
	if tiered {
		header = append(header, "LOCAL-START", "REMOTE-END")
	}
	tw := cli.NewTable(w, header...)
	for _, p := range t.Partitions {
		row := []any{p.Partition, p.Leader, p.LeaderEpoch, cli.JoinInt32s(p.Replicas), cli.JoinInt32s(p.ISR),
			offsetCell(p.LogStartOffset), offsetCell(p.HighWatermark), sizeCell(p.LocalSizeBytes)}
		if tiered {
			row = append(row, optionalOffsetCell(p.LocalLogStartOffset), optionalOffsetCell(p.RemoteEndOffset))
		}
		tw.Row(row...)
	}
	tw.Flush()
	for _, p := range t.Partitions {
		if p.Error != "" {
			fmt.Fprintf(w, "partition %d: %s\n", p.Partition, p.Error)
		}
	}
	fmt.Fprintln(w)
	var shown []describedConfJSON
	for _, c := range t.Configs {
		if allConfigs || !c.Default {
			shown = append(shown, c)
		}
	}
	if len(shown) == 0 {
		fmt.Fprintln(w, "Configs: all defaults (--all-configs lists them)")
		return
	}
	tw = cli.NewTable(w, "CONFIG", "VALUE", "SOURCE")
	for _, c := range shown {
		v := "-"
		if c.Value != nil {
			v = *c.Value
		}
		tw.Row(c.Name, v, c.Source)
	}
	tw.Flush()
}

func offsetCell(o int64) any {
	if o < 0 {
		return "?"
	}
	return o
}

func optionalOffsetCell(o *int64) any {
	if o == nil {
		return "?"
	}
	return *o
}

func sizeCell(b int64) any {
	if b < 0 {
		return "?"
	}
	return cli.Bytes(b)
}

type alteredConfigJSON struct {
	Topic   string            `json:"topic"`
	Set     map[string]string `json:"set"`
	Deleted []string          `json:"deleted"`
}

func topicAlterConfigCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config TOPIC",
		Short: "Set or delete (back to default) topic configs",
		Example: `  strata topic alter-config orders --set retention.ms=3600000 --delete cleanup.policy
  strata topic alter-config orders -c max.message.bytes=2097152`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	cmd.Flags().StringArrayVarP(&sets, "set", "c", nil, "config key=value to set (repeatable)")
	cmd.Flags().StringArrayVarP(&deletes, "delete", "d", nil, "config key to delete, reverting it to the default (repeatable)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		topic := args[0]
		if len(sets)+len(deletes) == 0 {
			return cli.Usagef("nothing to alter: give --set key=value and/or --delete key")
		}
		out := alteredConfigJSON{Topic: topic, Set: map[string]string{}, Deleted: []string{}}
		var alters []kadm.AlterConfig
		for _, kv := range sets {
			k, v, err := cli.ParseKeyValue("--set", kv)
			if err != nil {
				return err
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
			out.Set[k] = v
		}
		for _, k := range deletes {
			if k == "" || strings.Contains(k, "=") {
				return cli.Usagef("--delete: %q is not a config key", k)
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			out.Deleted = append(out.Deleted, k)
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
			if err != nil {
				return err
			}
			r, err := resps.On(topic, nil)
			if err != nil {
				return fmt.Errorf("topic %q: no answer for it", topic)
			}
			if r.Err != nil {
				return brokerError(fmt.Sprintf("altering topic %q", topic), r.Err, r.ErrMessage)
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			for _, kv := range sets {
				fmt.Fprintf(s.env.stdout, "topic %s: set %s\n", topic, kv)
			}
			for _, k := range deletes {
				fmt.Fprintf(s.env.stdout, "topic %s: deleted %s (back to the default)\n", topic, k)
			}
			return nil
		})
	})
	return cmd
}

type addedPartitionsJSON struct {
	Topic            string `json:"topic"`
	PartitionsBefore int    `json:"partitions_before"`
	Partitions       int    `json:"partitions"`
}

// keyMappingWarning is printed before partitions are added.
const keyMappingWarning = `warning: adding partitions changes which partition a key maps to. Records with a
key produced afterwards may go to a different partition than earlier records with the
same key, so per-key order across the change is not kept.`

func topicAddPartitionsCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var (
		add, total int
		yes        bool
	)
	cmd := &cobra.Command{
		Use:   "add-partitions TOPIC (--add N | --total N)",
		Short: "Add partitions to a topic (keyed records map to different partitions afterwards)",
		Example: `  strata topic add-partitions orders --add 2 --yes
  strata topic add-partitions orders --total 12`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	cmd.Flags().IntVar(&add, "add", 0, "number of partitions to add")
	cmd.Flags().IntVar(&total, "total", 0, "partition count to grow the topic to")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		topic := args[0]
		switch {
		case (add == 0) == (total == 0):
			return cli.Usagef("give exactly one of --add N and --total N")
		case add < 0 || total < 0:
			return cli.Usagef("--add and --total must be positive")
		}
		if !yes && !s.env.stdinTerminal {
			return cli.Usagef("adding partitions changes the key-to-partition mapping: pass --yes to confirm (stdin is not a terminal, so there is nobody to ask)")
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			details, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			d := details[topic]
			if d.Err != nil {
				return brokerError(fmt.Sprintf("topic %q", topic), d.Err, "")
			}
			before := len(d.Partitions)
			after := total
			if add > 0 {
				after = before + add
			}
			if after <= before {
				return fmt.Errorf("topic %q has %d partitions already; partitions can only be added", topic, before)
			}
			fmt.Fprintln(s.env.stderr, keyMappingWarning)
			if !yes {
				fmt.Fprintf(s.env.stderr, "Grow topic %s from %d to %d partitions? [y/N] ", topic, before, after)
				answer, _ := bufio.NewReader(s.env.stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return errors.New("aborted: no partitions added")
				}
			}
			resps, err := adm.UpdatePartitions(ctx, after, topic)
			if err != nil {
				return err
			}
			r, ok := resps[topic]
			if !ok {
				return fmt.Errorf("topic %q: no answer for it", topic)
			}
			if r.Err != nil {
				return brokerError(fmt.Sprintf("adding partitions to %q", topic), r.Err, r.ErrMessage)
			}
			out := addedPartitionsJSON{Topic: topic, PartitionsBefore: before, Partitions: after}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			fmt.Fprintf(s.env.stdout, "topic %s: %d -> %d partitions\n", topic, before, after)
			return nil
		})
	})
	return cmd
}

type deletedTopicJSON struct {
	Topic string `json:"topic"`
	deletedJSON
}

// deletedJSON is what a delete did to one name, in --output json.
type deletedJSON struct {
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

// reportDeletions writes what a delete of names did to each (outcome: nil or
// why it failed), as the rows row makes with --output json or a line per
// deleted name, and returns the failures joined.
func reportDeletions(s *session, kind string, names []string, outcome func(string) error, row func(string, deletedJSON) any) error {
	var out []any
	var errs []error
	for _, n := range names {
		d := deletedJSON{Deleted: true}
		if err := outcome(n); err != nil {
			d = deletedJSON{Error: err.Error()}
			errs = append(errs, fmt.Errorf("deleting %s %q: %w", kind, n, err))
		}
		out = append(out, row(n, d))
		if d.Deleted && !s.json() {
			fmt.Fprintf(s.env.stdout, "deleted %s %s\n", kind, n)
		}
	}
	if s.json() {
		if err := cli.WriteJSON(s.env.stdout, out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func topicDeleteCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete TOPIC...",
		Aliases:           []string{"rm"},
		Short:             "Delete topics and all their records",
		Args:              usageArgs(env, cobra.MinimumNArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, names []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			resps, err := adm.DeleteTopics(ctx, names...)
			if err != nil {
				return err
			}
			return reportDeletions(s, "topic", names, func(n string) error {
				switch r, ok := resps[n]; {
				case !ok:
					return errors.New("no answer for it")
				case r.Err != nil:
					return withBrokerMessage(r.Err, r.ErrMessage)
				}
				return nil
			}, func(n string, d deletedJSON) any { return deletedTopicJSON{Topic: n, deletedJSON: d} })
		})
	})
	return cmd
}
