package main

// strata group: list, describe, reset-offsets, delete (the classic Kafka group APIs);
// share-offsets in group_share.go.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/cli"
)

func groupCmd() *cobra.Command { return newConsumerGroupCmd(processEnv()) }

// Kafka API keys the group commands need, checked up front (cli.RequireAPIs).
const (
	apiOffsetCommit    = 8
	apiOffsetFetch     = 9
	apiFindCoordinator = 10
	apiJoinGroup       = 11
	apiHeartbeat       = 12
	apiSyncGroup       = 14
	apiDescribeGroups  = 15
	apiListGroups      = 16
	apiDeleteGroups    = 42
)

func newConsumerGroupCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "group", "List, describe, reset and delete consumer groups")
	cmd.AddCommand(
		groupListCmd(env, g),
		groupDescribeCmd(env, g),
		groupResetOffsetsCmd(env, g),
		groupDeleteCmd(env, g),
		groupShareOffsetsCmd(env, g),
	)
	return cmd
}

type listedGroupJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

func groupListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups",
		Args:    usageArgs(env, cobra.NoArgs),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiListGroups); err != nil {
				return err
			}
			groups, err := adm.ListGroups(ctx)
			if err != nil {
				return err
			}
			out := []listedGroupJSON{}
			for _, lg := range groups.Sorted() {
				out = append(out, listedGroupJSON{Group: lg.Group, State: lg.State, ProtocolType: lg.ProtocolType, Coordinator: lg.Coordinator})
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			tw := cli.NewTable(s.env.stdout, "GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR")
			for _, lg := range out {
				tw.Row(lg.Group, lg.State, lg.ProtocolType, lg.Coordinator)
			}
			return tw.Flush()
		})
	})
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

type describedGroupJSON struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Coordinator  int32             `json:"coordinator"`
	Members      []groupMemberJSON `json:"members"`
	Offsets      []groupOffsetJSON `json:"offsets"`
}

type groupMemberJSON struct {
	MemberID   string             `json:"member_id"`
	InstanceID *string            `json:"instance_id"`
	ClientID   string             `json:"client_id"`
	Host       string             `json:"host"`
	Assignment map[string][]int32 `json:"assignment"`
}

type groupOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: none
	End       int64  `json:"end"`       // -1: unknown
	Lag       int64  `json:"lag"`       // -1: unknown
	MemberID  string `json:"member_id"` // "" when unassigned
	Error     string `json:"error,omitempty"`
}

func groupDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "describe GROUP...",
		Short:             "Show members, their assignment, and per partition the committed offset, end offset and lag",
		Args:              usageArgs(env, cobra.MinimumNArgs(1)),
		ValidArgsFunction: completeGroups(env, g),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, names []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDescribeGroups, apiOffsetFetch); err != nil {
				return err
			}
			names = unique(names)
			views, err := admin.GroupViews(ctx, adm, names...)
			if other := (*admin.OtherGroupTypeError)(nil); errors.As(err, &other) {
				return fmt.Errorf("%w, which group describe does not show (see %s)", err, cmp.Or(otherGroupTools[other.Type], "kafka-groups --list"))
			}
			if err != nil {
				return err
			}
			var out []describedGroupJSON
			for _, n := range names {
				out = append(out, describedGroup(views[n]))
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			for i, d := range out {
				if i > 0 {
					fmt.Fprintln(s.env.stdout)
				}
				printGroup(s, d)
			}
			return nil
		})
	})
	return cmd
}

// otherGroupTools names, per group type that group describe does not show,
// what does.
var otherGroupTools = map[string]string{
	"share":   "strata group share-offsets describe",
	"streams": "kafka-streams-groups --describe",
}

func describedGroup(v admin.GroupView) describedGroupJSON {
	d := describedGroupJSON{Group: v.Group, State: v.State, ProtocolType: v.ProtocolType, Protocol: v.Protocol,
		Coordinator: v.Coordinator, Members: []groupMemberJSON{}, Offsets: []groupOffsetJSON{}}
	for _, m := range v.Members {
		d.Members = append(d.Members, groupMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			Host: m.Host, Assignment: m.Assignment})
	}
	for _, o := range v.Offsets {
		oj := groupOffsetJSON{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed, End: o.End, Lag: o.Lag, MemberID: o.MemberID}
		if o.Err != nil {
			oj.Error = o.Err.Error()
		}
		d.Offsets = append(d.Offsets, oj)
	}
	return d
}

func printGroup(s *session, d describedGroupJSON) {
	w := s.env.stdout
	fmt.Fprintf(w, "Group:       %s\n", d.Group)
	fmt.Fprintf(w, "State:       %s\n", d.State)
	fmt.Fprintf(w, "Protocol:    %s\n", strings.Trim(d.ProtocolType+"/"+d.Protocol, "/"))
	fmt.Fprintf(w, "Coordinator: %d\n", d.Coordinator)
	fmt.Fprintln(w)
	if len(d.Members) == 0 {
		fmt.Fprintln(w, "Members: none")
	} else {
		tw := cli.NewTable(w, "MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT")
		for _, m := range d.Members {
			tw.Row(m.MemberID, m.ClientID, m.Host, assignmentString(m.Assignment))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(d.Offsets) == 0 {
		fmt.Fprintln(w, "Offsets: none committed")
		return
	}
	tw := cli.NewTable(w, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER")
	for _, o := range d.Offsets {
		member := o.MemberID
		if member == "" {
			member = "-"
		}
		tw.Row(o.Topic, o.Partition, offsetCell(o.Committed), offsetCell(o.End), offsetCell(o.Lag), member)
	}
	tw.Flush()
	for _, o := range d.Offsets {
		if o.Error != "" {
			fmt.Fprintf(w, "%s/%d: %s\n", o.Topic, o.Partition, o.Error)
		}
	}
}

// assignmentString formats an assignment as "orders[0,1] audit[2]".
func assignmentString(a map[string][]int32) string {
	if len(a) == 0 {
		return "-"
	}
	topics := make([]string, 0, len(a))
	for t := range a {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = t + "[" + cli.JoinInt32s(a[t]) + "]"
	}
	return strings.Join(parts, " ")
}

type resetOffsetsJSON struct {
	Group    string            `json:"group"`
	To       string            `json:"to"`
	Executed bool              `json:"executed"`
	Offsets  []resetOffsetJSON `json:"offsets"`
}

type resetOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current"` // -1: nothing committed
	New       int64  `json:"new"`
}

// resetFlags are the flags of the reset commands (reset-offsets, share-offsets reset).
type resetFlags struct {
	to      string
	topics  []string
	execute bool
}

// register declares the flags on cmd; verb says what --execute does.
func (f *resetFlags) register(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&f.to, "to", "", "target: earliest, latest, OFFSET, RFC3339 time or unix ms (required)")
	cmd.Flags().StringArrayVar(&f.topics, "topic", nil, "topic whose offsets to move (required, repeatable)")
	cmd.Flags().BoolVar(&f.execute, "execute", false, verb+" the new offsets (default: dry run)")
}

// spec checks the flags and parses --to.
func (f *resetFlags) spec() (admin.OffsetSpec, error) {
	if f.to == "" {
		return admin.OffsetSpec{}, cli.Usagef("--to is required")
	}
	if len(f.topics) == 0 {
		return admin.OffsetSpec{}, cli.Usagef("--topic is required")
	}
	return cli.ParseOffsetSpec("--to", f.to)
}

func groupResetOffsetsCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var f resetFlags
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --to WHERE --topic TOPIC... [--execute]",
		Short: "Move a group's committed offsets (a dry run unless --execute)",
		Long: `Move a group's committed offsets for the given topics. Without --execute it only
shows what it would commit. --to is earliest, latest, an offset, an RFC3339 time or
unix milliseconds (@MS, or any number of 13+ digits); offsets are kept within each
partition's log. The group must have no active members to execute.`,
		Example: `  strata group reset-offsets billing --to earliest --topic orders
  strata group reset-offsets billing --to 2024-05-01T00:00:00Z --topic orders --execute`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeGroups(env, g),
	}
	f.register(cmd, "commit")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		group, topics, execute := args[0], f.topics, f.execute
		spec, err := f.spec()
		if err != nil {
			return err
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDescribeGroups, apiOffsetFetch, apiOffsetCommit); err != nil {
				return err
			}
			described, err := admin.DescribeGroups(ctx, adm, group)
			if err != nil {
				return err
			}
			dg := described[group]
			if dg.Err != nil {
				return fmt.Errorf("group %q: %w", group, withBrokerMessage(dg.Err, dg.ErrMessage))
			}
			if execute && len(dg.Members) > 0 {
				return fmt.Errorf("group %q is %s with %d members: stop them before resetting its offsets", group, dg.State, len(dg.Members))
			}
			committed, err := fetchCommitted(ctx, adm, group)
			if err != nil {
				return err
			}
			out, commit, err := resolveReset(ctx, adm, group, spec, topics, func(t string, p int32) int64 {
				if c, ok := committed.Lookup(t, p); ok && c.Err == nil {
					return c.At
				}
				return -1
			})
			if err != nil {
				return err
			}
			if execute {
				resps, err := adm.CommitOffsets(ctx, group, commit)
				if err != nil {
					return fmt.Errorf("group %q: committing offsets: %w", group, err)
				}
				if err := resps.Error(); err != nil {
					return fmt.Errorf("group %q: committing offsets: %w", group, err)
				}
				out.Executed = true
			}
			return printReset(s, out,
				fmt.Sprintf("committed %d offsets for group %s", len(out.Offsets), group),
				"dry run: nothing changed; add --execute to commit these offsets")
		})
	})
	return cmd
}

// resolveReset resolves a reset of topics' offsets to spec: the rows to show
// (current gives each partition's offset now, -1 for none), sorted, and the
// offsets to set.
func resolveReset(ctx context.Context, adm *kadm.Client, group string, spec admin.OffsetSpec, topics []string,
	current func(topic string, partition int32) int64,
) (resetOffsetsJSON, kadm.Offsets, error) {
	out := resetOffsetsJSON{Group: group, To: spec.String(), Offsets: []resetOffsetJSON{}}
	var set kadm.Offsets
	for _, t := range topics {
		bounds, err := admin.ListBounds(ctx, adm, t)
		if err != nil {
			return out, nil, err
		}
		target, err := spec.Resolve(ctx, adm, t, bounds)
		if err != nil {
			return out, nil, err
		}
		for p, o := range target {
			out.Offsets = append(out.Offsets, resetOffsetJSON{Topic: t, Partition: p, Current: current(t, p), New: o})
			set.Add(kadm.Offset{Topic: t, Partition: p, At: o, LeaderEpoch: -1})
		}
	}
	slices.SortFunc(out.Offsets, func(a, b resetOffsetJSON) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out, set, nil
}

// printReset prints a reset's rows, then done (executed) or dryRun on stderr.
func printReset(s *session, out resetOffsetsJSON, done, dryRun string) error {
	if s.json() {
		return cli.WriteJSON(s.env.stdout, out)
	}
	tw := cli.NewTable(s.env.stdout, "TOPIC", "PARTITION", "CURRENT", "NEW")
	for _, o := range out.Offsets {
		tw.Row(o.Topic, o.Partition, offsetCell(o.Current), o.New)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Executed {
		fmt.Fprintln(s.env.stderr, done)
	} else {
		fmt.Fprintln(s.env.stderr, dryRun)
	}
	return nil
}

// fetchCommitted returns a group's committed offsets; a group that does not exist
// (yet) has none. It asks for all of them rather than for some topics' (kadm's
// FetchOffsetsForTopics), which would look the topics up first and report one that
// does not exist without its name: the callers' ListBounds names it.
func fetchCommitted(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group %q: committed offsets: %w", group, err)
	}
	return committed, nil
}

type deletedGroupJSON struct {
	Group string `json:"group"`
	deletedJSON
}

func groupDeleteCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete GROUP...",
		Aliases:           []string{"rm"},
		Short:             "Delete consumer groups (they must have no members) and their committed offsets",
		Args:              usageArgs(env, cobra.MinimumNArgs(1)),
		ValidArgsFunction: completeGroups(env, g),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, names []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDeleteGroups); err != nil {
				return err
			}
			resps, err := adm.DeleteGroups(ctx, names...)
			if err != nil {
				return err
			}
			return reportDeletions(s, "group", names, func(n string) error {
				switch r, ok := resps[n]; {
				case !ok:
					return errors.New("no answer for it")
				case r.Err != nil:
					return withBrokerMessage(r.Err, r.ErrMessage)
				}
				return nil
			}, func(n string, d deletedJSON) any { return deletedGroupJSON{Group: n, deletedJSON: d} })
		})
	})
	return cmd
}
