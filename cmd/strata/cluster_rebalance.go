package main

// strata cluster rebalance: plans an even spread of replicas and preferred
// leaders over the brokers (internal/rebalance), submits it as partition
// reassignments (AlterPartitionReassignments, as kadm and
// kafka-reassign-partitions do), optionally under a replication throttle, shows
// progress until the moves are done, then elects the preferred leaders.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/rebalance"
)

type rebalanceJSON struct {
	rebalance.Plan
	DryRun    bool  `json:"dry_run"`
	Throttle  int64 `json:"throttle"` // bytes/s; 0: none
	Completed bool  `json:"completed"`
}

func clusterRebalanceCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var (
		dryRun   bool
		throttle int64
		wait     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Spread replicas and leaders evenly over the brokers",
		Long: "Plans an even spread of partition replicas and preferred leaders over the live brokers\n" +
			"with the fewest moves (replication factors kept, a partition's rack spread never\n" +
			"reduced), submits the moves as partition reassignments, shows progress on stderr\n" +
			"until they are done, then elects the preferred leaders. --dry-run prints the plan\n" +
			"and changes nothing. --throttle sets Kafka's replication throttle\n" +
			"(leader/follower.replication.throttled.rate on the brokers of the moves and the\n" +
			"topics' throttled replicas) for the duration, and clears it when the moves are done.\n" +
			"Partitions already being reassigned, or with a replica on a broker that is not live,\n" +
			"are left alone.",
		Example:           "  strata cluster rebalance --dry-run\n  strata cluster rebalance --throttle 50000000 --wait 1h",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	cmd.Flags().Int64Var(&throttle, "throttle", 0, "replication throttle in bytes/s while the moves run (0: none)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for the moves")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		if throttle < 0 {
			return cli.Usagef("--throttle %d: want bytes per second, 0 for none", throttle)
		}
		m, err := s.startMoves(ctx)
		if err != nil {
			return err
		}
		defer m.close()
		cl, adm, md, opCtx := m.cl, m.adm, m.md, m.ctx
		// kadm lists only the partitions it is given; a null list asks for all.
		lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
		lresp, err := lreq.RequestWith(opCtx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil {
			return brokerError("listing reassignments", err, deref(lresp.ErrorMessage))
		}
		ongoing := kadm.TopicsSet{}
		for _, t := range lresp.Topics {
			for _, p := range t.Partitions {
				ongoing.Add(t.Topic, p.Partition)
			}
		}
		var brokers []rebalance.Broker
		for _, b := range md.Brokers {
			rb := rebalance.Broker{ID: b.NodeID}
			if b.Rack != nil {
				rb.Rack = *b.Rack
			}
			brokers = append(brokers, rb)
		}
		var parts []rebalance.Partition
		for _, t := range md.Topics.Sorted() {
			for _, p := range t.Partitions.Sorted() {
				if _, moving := ongoing[t.Topic][p.Partition]; moving {
					continue
				}
				parts = append(parts, rebalance.Partition{Topic: t.Topic, Index: p.Partition, Replicas: p.Replicas})
			}
		}
		out := rebalanceJSON{Plan: rebalance.Compute(brokers, parts), DryRun: dryRun, Throttle: throttle}
		if out.Moves == nil {
			out.Moves = []rebalance.Move{}
		}
		if dryRun || len(out.Moves) == 0 {
			out.Completed = len(out.Moves) == 0
			return printRebalance(s, out)
		}

		if throttle > 0 {
			if err := setRebalanceThrottle(opCtx, adm, out.Moves, throttle); err != nil {
				return err
			}
		}
		req := kadm.AlterPartitionAssignmentsReq{}
		for _, m := range out.Moves {
			req.Assign(m.Topic, m.Partition, m.To)
		}
		if err := submitMoves(opCtx, adm, req); err != nil {
			return err
		}
		fmt.Fprintf(s.env.stderr, "rebalance: moving %d partitions\n", len(out.Moves))
		moving := kadm.TopicsSet{}
		for _, m := range out.Moves {
			moving.Add(m.Topic, m.Partition)
		}
		left, err := awaitMoves(ctx, s, "rebalance", len(out.Moves), wait, func(ctx context.Context) (int, error) { return reassigning(ctx, adm, moving) })
		if err != nil {
			keep := ""
			if throttle > 0 {
				keep = "; the throttle stays until they are done (clear it with kafka-reassign-partitions --verify or kafka-configs)"
			}
			return fmt.Errorf("%d of %d partitions still moving after %v%s: %w", left, len(out.Moves), wait, keep, err)
		}

		opCtx, cancel := s.withTimeout(ctx)
		defer cancel()
		if throttle > 0 {
			if err := clearRebalanceThrottle(opCtx, adm, out.Moves); err != nil {
				return err
			}
		}
		// Leadership follows the new preferred leaders now, not at the
		// controller's next imbalance check.
		elected, err := adm.ElectLeaders(opCtx, kadm.ElectPreferredReplica, moving)
		if err != nil {
			return err
		}
		for _, r := range elected {
			for _, p := range r {
				if p.Err != nil && !errors.Is(p.Err, kerr.ElectionNotNeeded) {
					fmt.Fprintf(s.env.stderr, "rebalance: %s-%d keeps its leader for now: %v\n", p.Topic, p.Partition, p.Err)
				}
			}
		}
		out.Completed = true
		return printRebalance(s, out)
	})
	return cmd
}

// reassigning counts the partitions of set still being reassigned.
func reassigning(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) (int, error) {
	rs, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return -1, err
	}
	n := 0
	for _, ps := range rs {
		n += len(ps)
	}
	return n, nil
}

// rebalanceThrottled returns the brokers a throttle applies to (every broker
// of a move that changes the replica set) and each topic's leader and follower
// throttled replicas, as kafka-reassign-partitions --throttle sets them: the
// current replicas on the leader side, the new ones on the follower side.
func rebalanceThrottled(moves []rebalance.Move) (brokers []int32, leader, follower map[string][]string) {
	set := map[int32]bool{}
	leader, follower = map[string][]string{}, map[string][]string{}
	for _, m := range moves {
		added := false
		for _, id := range m.To {
			if !slices.Contains(m.From, id) {
				added = true
				set[id] = true
				follower[m.Topic] = append(follower[m.Topic], fmt.Sprintf("%d:%d", m.Partition, id))
			}
		}
		if !added {
			continue // a new order only: nothing to copy
		}
		for _, id := range m.From {
			set[id] = true
			leader[m.Topic] = append(leader[m.Topic], fmt.Sprintf("%d:%d", m.Partition, id))
		}
	}
	return slices.Sorted(maps.Keys(set)), leader, follower
}

func setRebalanceThrottle(ctx context.Context, adm *kadm.Client, moves []rebalance.Move, rate int64) error {
	brokers, leader, follower := rebalanceThrottled(moves)
	r := strconv.FormatInt(rate, 10)
	if len(brokers) > 0 {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: metadata.LeaderReplicationThrottledRate, Value: &r},
			{Op: kadm.SetConfig, Name: metadata.FollowerReplicationThrottledRate, Value: &r},
		}, brokers...)
		if err := configsErr("setting the throttle rate", rs, err); err != nil {
			return err
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(leader)) {
		l, f := strings.Join(leader[topic], ","), strings.Join(follower[topic], ",")
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: &l},
			{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: &f},
		}, topic)
		if err := configsErr("setting the throttled replicas of "+topic, rs, err); err != nil {
			return err
		}
	}
	return nil
}

func clearRebalanceThrottle(ctx context.Context, adm *kadm.Client, moves []rebalance.Move) error {
	brokers, leader, _ := rebalanceThrottled(moves)
	if len(brokers) > 0 {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: metadata.LeaderReplicationThrottledRate},
			{Op: kadm.DeleteConfig, Name: metadata.FollowerReplicationThrottledRate},
		}, brokers...)
		if err := configsErr("clearing the throttle rate", rs, err); err != nil {
			return err
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(leader)) {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: "leader.replication.throttled.replicas"},
			{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.replicas"},
		}, topic)
		if err := configsErr("clearing the throttled replicas of "+topic, rs, err); err != nil {
			return err
		}
	}
	return nil
}

func configsErr(what string, rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return brokerError(fmt.Sprintf("%s (%s)", what, r.Name), r.Err, r.ErrMessage)
		}
	}
	return nil
}

func printRebalance(s *session, out rebalanceJSON) error {
	if s.json() {
		return cli.WriteJSON(s.env.stdout, out)
	}
	w := s.env.stdout
	switch {
	case len(out.Moves) == 0:
		fmt.Fprintln(w, "the cluster is balanced: nothing to move")
	case out.DryRun:
		fmt.Fprintf(w, "plan: %d partitions to move (dry run, nothing changed)\n", len(out.Moves))
	default:
		fmt.Fprintf(w, "rebalanced: %d partitions moved\n", len(out.Moves))
	}
	if len(out.Moves) > 0 {
		fmt.Fprintln(w)
		tw := cli.NewTable(w, "TOPIC", "PARTITION", "FROM", "TO")
		for _, m := range out.Moves {
			tw.Row(m.Topic, m.Partition, cli.JoinInt32s(m.From), cli.JoinInt32s(m.To))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw := cli.NewTable(w, "BROKER", "REPLICAS", "LEADERS", "REPLICAS-AFTER", "LEADERS-AFTER")
	for i, b := range out.Before {
		a := out.After[i]
		tw.Row(b.Broker, b.Replicas, b.Leaders, a.Replicas, a.Leaders)
	}
	return tw.Flush()
}
