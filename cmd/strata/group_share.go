package main

// strata group share-offsets: describe, reset and delete the offsets of share groups
// (KIP-932's DescribeShareGroupOffsets, AlterShareGroupOffsets and
// DeleteShareGroupOffsets, as kafka-share-groups uses them).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/cli"
)

// Kafka API keys of the share-group offset commands.
const (
	apiDescribeShareGroupOffsets = 90
	apiAlterShareGroupOffsets    = 91
	apiDeleteShareGroupOffsets   = 92
)

func groupShareOffsetsCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "share-offsets",
		Short: "Describe, reset and delete the offsets of share groups",
		Long: `A share group's offsets are its share-partition start offsets: where each partition's
in-flight window begins (KIP-932). Reset and delete need the group to have no members.`,
		Args: usageArgs(env, cobra.NoArgs),
	}
	cmd.AddCommand(
		shareOffsetsDescribeCmd(env, g),
		shareOffsetsResetCmd(env, g),
		shareOffsetsDeleteCmd(env, g),
	)
	return cmd
}

type shareOffsetJSON struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"` // -1: not initialized
	LeaderEpoch int32  `json:"leader_epoch"`
	Lag         int64  `json:"lag"` // -1: unknown
	Error       string `json:"error,omitempty"`
}

type describedShareOffsetsJSON struct {
	Group   string            `json:"group"`
	Offsets []shareOffsetJSON `json:"offsets"`
}

func shareOffsetsDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "describe GROUP...",
		Short:             "Show share groups' start offsets and lag",
		Args:              usageArgs(env, cobra.MinimumNArgs(1)),
		ValidArgsFunction: completeGroups(env, g),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, groups []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDescribeShareGroupOffsets); err != nil {
				return err
			}
			out, err := describeShareOffsets(ctx, adm, groups)
			if err != nil {
				return err
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			tw := cli.NewTable(s.env.stdout, "GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
			for _, d := range out {
				for _, o := range d.Offsets {
					lag := "-"
					if o.Lag >= 0 {
						lag = fmt.Sprint(o.Lag)
					}
					if o.Error != "" {
						lag = o.Error
					}
					tw.Row(d.Group, o.Topic, o.Partition, offsetCell(o.StartOffset), lag)
				}
			}
			return tw.Flush()
		})
	})
	return cmd
}

// describeShareOffsets describes groups' share offsets, sorted; a group-level error
// fails the whole command.
func describeShareOffsets(ctx context.Context, adm *kadm.Client, groups []string) ([]describedShareOffsetsJSON, error) {
	ds, err := adm.DescribeShareGroupOffsets(ctx, groups...)
	if err != nil {
		return nil, err
	}
	out := []describedShareOffsetsJSON{}
	for _, group := range groups {
		d, ok := ds[group]
		switch {
		case !ok:
			return nil, fmt.Errorf("share group %q: no answer for it", group)
		case d.Err != nil:
			return nil, fmt.Errorf("share group %q: %w", group, d.Err)
		}
		dj := describedShareOffsetsJSON{Group: group, Offsets: []shareOffsetJSON{}}
		for _, ps := range d.Offsets {
			for _, o := range ps {
				oj := shareOffsetJSON{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset, LeaderEpoch: o.LeaderEpoch, Lag: o.Lag}
				if o.Err != nil {
					oj.Error = o.Err.Error()
				}
				dj.Offsets = append(dj.Offsets, oj)
			}
		}
		slices.SortFunc(dj.Offsets, func(a, b shareOffsetJSON) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		out = append(out, dj)
	}
	return out, nil
}

func shareOffsetsResetCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var f resetFlags
	cmd := &cobra.Command{
		Use:   "reset GROUP --to WHERE --topic TOPIC... [--execute]",
		Short: "Move a share group's start offsets (a dry run unless --execute)",
		Long: `Move a share group's start offsets for the given topics: everything in flight is
forgotten and delivery starts again at the new offset. Without --execute it only shows
what it would set. --to is earliest, latest, an offset, an RFC3339 time or unix
milliseconds (@MS, or any number of 13+ digits); offsets are kept within each
partition's log. The group must have no members to execute.`,
		Example: `  strata group share-offsets reset workers --to earliest --topic jobs
  strata group share-offsets reset workers --to 2024-05-01T00:00:00Z --topic jobs --execute`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeGroups(env, g),
	}
	f.register(cmd, "set")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		group, topics, execute := args[0], f.topics, f.execute
		spec, err := f.spec()
		if err != nil {
			return err
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDescribeShareGroupOffsets, apiAlterShareGroupOffsets); err != nil {
				return err
			}
			current := map[string]map[int32]int64{}
			described, err := describeShareOffsets(ctx, adm, []string{group})
			switch {
			case errors.Is(err, kerr.GroupIDNotFound):
				// A group that does not exist yet has no offsets; setting them creates it.
			case err != nil:
				return err
			default:
				for _, o := range described[0].Offsets {
					if current[o.Topic] == nil {
						current[o.Topic] = map[int32]int64{}
					}
					current[o.Topic][o.Partition] = o.StartOffset
				}
			}
			out, set, err := resolveReset(ctx, adm, group, spec, topics, func(t string, p int32) int64 {
				if cur, ok := current[t][p]; ok {
					return cur
				}
				return -1
			})
			if err != nil {
				return err
			}
			if execute {
				resps, err := adm.AlterShareGroupOffsets(ctx, group, set)
				if err == nil {
					err = resps.Error()
				}
				if err != nil {
					return fmt.Errorf("share group %q: setting offsets: %w", group, err)
				}
				out.Executed = true
			}
			return printReset(s, out,
				fmt.Sprintf("set %d start offsets of share group %s", len(out.Offsets), group),
				"dry run: nothing changed; add --execute to set these offsets")
		})
	})
	return cmd
}

type deletedShareOffsetsJSON struct {
	Group  string   `json:"group"`
	Topics []string `json:"topics"`
}

func shareOffsetsDeleteCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var topics []string
	cmd := &cobra.Command{
		Use:               "delete GROUP --topic TOPIC...",
		Short:             "Delete a share group's offsets of topics (its members start again at share.auto.offset.reset)",
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		Example:           `  strata group share-offsets delete workers --topic jobs`,
		ValidArgsFunction: completeGroups(env, g),
	}
	cmd.Flags().StringArrayVar(&topics, "topic", nil, "topic whose offsets to delete (required, repeatable)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		group := args[0]
		if len(topics) == 0 {
			return cli.Usagef("--topic is required")
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if err := cli.RequireAPIs(ctx, adm, apiFindCoordinator, apiDeleteShareGroupOffsets); err != nil {
				return err
			}
			resps, err := adm.DeleteShareGroupOffsets(ctx, group, topics...)
			if err == nil {
				err = resps.Error()
			}
			if err != nil {
				return fmt.Errorf("share group %q: deleting offsets: %w", group, err)
			}
			out := deletedShareOffsetsJSON{Group: group, Topics: slices.Sorted(slices.Values(topics))}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			fmt.Fprintf(s.env.stdout, "deleted the offsets of share group %s in %s\n", group, strings.Join(out.Topics, ", "))
			return nil
		})
	})
	return cmd
}
