package main

// strata cluster decommission NODE: moves every replica off a broker with
// AlterPartitionReassignments, keeping each partition's replication factor
// (and its rack spread where racks allow), waits until the moves are done,
// then unregisters the broker (UnregisterBroker).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/rebalance"
)

type decommissionJSON struct {
	Node         int32            `json:"node"`
	Moves        []rebalance.Move `json:"moves"`
	Unregistered bool             `json:"unregistered"`
}

// planDecommission replaces node in every partition's replicas with another
// broker: one not among that partition's replicas, preferring a rack the
// remaining replicas do not use, then the broker with the fewest replicas
// (counting the moves planned so far), then the lowest id. The replacement
// takes node's place in the list, so a preferred leader stays first unless it
// is node. It fails when a partition has no broker to move to.
func planDecommission(brokers []kadm.BrokerDetail, topics kadm.TopicDetails, node int32) ([]rebalance.Move, error) {
	rack := map[int32]string{}
	load := map[int32]int{}
	for _, b := range brokers {
		if b.NodeID == node {
			continue
		}
		rack[b.NodeID] = ""
		if b.Rack != nil {
			rack[b.NodeID] = *b.Rack
		}
		load[b.NodeID] = 0
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				load[r]++
			}
		}
	}
	var moves []rebalance.Move
	for _, t := range topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			i := slices.Index(p.Replicas, node)
			if i < 0 {
				continue
			}
			usedRacks := map[string]bool{}
			for _, r := range p.Replicas {
				if r != node && rack[r] != "" {
					usedRacks[rack[r]] = true
				}
			}
			best := int32(-1)
			for id := range load {
				if _, ok := rack[id]; !ok || slices.Contains(p.Replicas, id) {
					continue
				}
				if best < 0 || decommissionBetter(id, best, usedRacks, rack, load) {
					best = id
				}
			}
			if best < 0 {
				return nil, fmt.Errorf("%s-%d: no broker left to take node %d's replica (replicas %v)", t.Topic, p.Partition, node, p.Replicas)
			}
			to := slices.Clone(p.Replicas)
			to[i] = best
			load[best]++
			moves = append(moves, rebalance.Move{Topic: t.Topic, Partition: p.Partition, From: slices.Clone(p.Replicas), To: to})
		}
	}
	return moves, nil
}

// namedInReplicas reports whether any partition of topics has a replica on node.
func namedInReplicas(topics kadm.TopicDetails, node int32) bool {
	for _, t := range topics {
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, node) {
				return true
			}
		}
	}
	return false
}

// decommissionBetter reports whether broker a is a better new replica than b.
func decommissionBetter(a, b int32, usedRacks map[string]bool, rack map[int32]string, load map[int32]int) bool {
	newRack := func(id int32) bool { return rack[id] != "" && !usedRacks[rack[id]] }
	if newRack(a) != newRack(b) {
		return newRack(a)
	}
	if load[a] != load[b] {
		return load[a] < load[b]
	}
	return a < b
}

func clusterDecommissionCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "decommission NODE",
		Short: "Move every replica off a broker, keeping replication factors, then unregister it",
		Long: "Moves every replica off NODE with partition reassignments (each partition keeps its\n" +
			"replication factor; a new replica goes to a rack the others do not use where there is\n" +
			"one, else to the broker with the fewest replicas), waits until NODE holds nothing, then\n" +
			"unregisters it. Stop NODE's process afterwards: a running broker registers again,\n" +
			"empty. Progress goes to stderr. Exits 0 only when NODE holds no replica.",
		Example:           "  strata cluster decommission 4 --wait 30m",
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the moves")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil || id < 0 {
			return cli.Usagef("node %q: want a node id", args[0])
		}
		node := int32(id)
		m, err := s.startMoves(ctx)
		if err != nil {
			return err
		}
		defer m.close()
		cl, adm, md, opCtx := m.cl, m.adm, m.md, m.ctx
		// A dead broker is not among the live ones Metadata lists, but the
		// partitions it held still name it: moving them off is how a lost
		// node is replaced.
		if !slices.ContainsFunc(md.Brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == node }) && !namedInReplicas(md.Topics, node) {
			return fmt.Errorf("node %d: %w", node, kerr.BrokerIDNotRegistered)
		}
		moves, err := planDecommission(md.Brokers, md.Topics, node)
		if err != nil {
			return err
		}
		req := kadm.AlterPartitionAssignmentsReq{}
		for _, m := range moves {
			req.Assign(m.Topic, m.Partition, m.To)
		}
		if len(moves) > 0 {
			if err := submitMoves(opCtx, adm, req); err != nil {
				return err
			}
		}
		what := fmt.Sprintf("decommission node %d", node)
		fmt.Fprintf(s.env.stderr, "%s: moving %d partitions\n", what, len(moves))
		left, err := awaitMoves(ctx, s, what, len(moves), wait, func(ctx context.Context) (int, error) { return replicasOn(ctx, adm, node) })
		if err != nil {
			return fmt.Errorf("node %d still holds %d replicas after %v: %w", node, left, wait, err)
		}

		opCtx, cancel := s.withTimeout(ctx)
		defer cancel()
		ureq := kmsg.NewPtrUnregisterBrokerRequest()
		ureq.BrokerID = node
		uresp, err := ureq.RequestWith(opCtx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(uresp.ErrorCode); err != nil && !errors.Is(err, kerr.BrokerIDNotRegistered) {
			msg := ""
			if uresp.ErrorMessage != nil {
				msg = *uresp.ErrorMessage
			}
			return brokerError(fmt.Sprintf("unregistering node %d", node), err, msg)
		}
		if left, err := replicasOn(opCtx, adm, node); err != nil || left != 0 {
			return fmt.Errorf("node %d holds %d replicas after unregistering (%v)", node, left, err)
		}
		out := decommissionJSON{Node: node, Moves: moves, Unregistered: true}
		if out.Moves == nil {
			out.Moves = []rebalance.Move{}
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		fmt.Fprintf(s.env.stdout, "node %d decommissioned: %d partitions moved off it, unregistered\n", node, len(moves))
		return nil
	})
	return cmd
}

// replicasOn counts the partitions whose replicas include node.
func replicasOn(ctx context.Context, adm *kadm.Client, node int32) (int, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return -1, err
	}
	n := 0
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, node) {
				n++
			}
		}
	}
	return n, nil
}
