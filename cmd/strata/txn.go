package main

// strata txn: list, describe and producers (what kafka-transactions.sh shows);
// find-hanging, abort and force-terminate are in txn_repair.go.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/cli"
)

func txnCmd() *cobra.Command { return newTxnCmd(processEnv()) }

// Kafka API keys the transaction commands need.
const (
	apiInitProducerID       = 22
	apiWriteTxnMarkers      = 27
	apiDescribeProducers    = 61
	apiDescribeTransactions = 65
	apiListTransactions     = 66
)

func newTxnCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "txn", "List, describe and repair transactions; show the producers of partitions")
	cmd.AddCommand(txnListCmd(env, g), txnDescribeCmd(env, g), txnProducersCmd(env, g),
		txnFindHangingCmd(env, g), txnAbortCmd(env, g), txnForceTerminateCmd(env, g))
	return cmd
}

// txnAdmin bounds *ctx by the session's timeout and connects an admin client to
// a broker serving keys; call done when finished.
func txnAdmin(ctx *context.Context, s *session, keys ...int16) (*kadm.Client, func(), error) {
	_, adm, done, err := txnClients(ctx, s, keys...)
	return adm, done, err
}

// txnClients is txnAdmin with the admin client's kgo client too.
func txnClients(ctx *context.Context, s *session, keys ...int16) (*kgo.Client, *kadm.Client, func(), error) {
	c, cancel := s.withTimeout(*ctx)
	*ctx = c
	cl, adm, err := s.admin(c)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	done := func() { cl.Close(); cancel() }
	if err := cli.RequireAPIs(c, adm, keys...); err != nil {
		done()
		return nil, nil, nil, err
	}
	return cl, adm, done, nil
}

type listedTxnJSON struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	Coordinator     int32  `json:"coordinator"`
}

func txnListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var states []string
	var pids []int64
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids (every coordinator's)",
		Example: `  strata txn list
  strata txn list --state Ongoing,PrepareAbort
  strata txn list --producer-id 4000 -o json`,
		Args: usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	cmd.Flags().Int64SliceVar(&pids, "producer-id", nil, "only the transactional ids of these producer ids")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		adm, done, err := txnAdmin(&ctx, s, apiListTransactions)
		if err != nil {
			return err
		}
		defer done()
		listed, err := adm.ListTransactions(ctx, pids, states)
		if err != nil {
			return err
		}
		out := []listedTxnJSON{}
		for _, lt := range listed {
			out = append(out, listedTxnJSON{TransactionalID: lt.TxnID, State: lt.State, ProducerID: lt.ProducerID, Coordinator: lt.Coordinator})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "COORDINATOR")
		for _, lt := range out {
			tw.Row(lt.TransactionalID, lt.State, lt.ProducerID, lt.Coordinator)
		}
		return tw.Flush()
	})
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

type describedTxnJSON struct {
	TransactionalID string             `json:"transactional_id"`
	State           string             `json:"state"`
	ProducerID      int64              `json:"producer_id"`
	ProducerEpoch   int16              `json:"producer_epoch"`
	TimeoutMs       int32              `json:"timeout_ms"`
	StartTimestamp  int64              `json:"start_timestamp"` // ms, -1: no transaction
	Coordinator     int32              `json:"coordinator"`
	Partitions      map[string][]int32 `json:"partitions"`
}

func txnDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "describe TRANSACTIONAL-ID...",
		Short:   "Describe transactional ids: state, producer, timeout, partitions",
		Example: "  strata txn describe payments-tx\n  strata txn describe payments-tx orders-tx -o json",
		Args:    usageArgs(env, cobra.MinimumNArgs(1)),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, ids []string) error {
		adm, done, err := txnAdmin(&ctx, s, apiFindCoordinator, apiDescribeTransactions)
		if err != nil {
			return err
		}
		defer done()
		described, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return err
		}
		// As kafka-transactions.sh describe: an id the coordinator cannot
		// describe (TRANSACTIONAL_ID_NOT_FOUND for one it does not know) fails
		// the command, and then nothing is printed.
		var errs []error
		for _, id := range ids {
			if d, ok := described[id]; !ok {
				errs = append(errs, fmt.Errorf("transactional id %q: no answer", id))
			} else if d.Err != nil {
				errs = append(errs, fmt.Errorf("transactional id %q: %w", id, d.Err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		out := []describedTxnJSON{}
		for _, id := range ids {
			d := described[id]
			dj := describedTxnJSON{
				TransactionalID: id, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
				TimeoutMs: d.TimeoutMillis, StartTimestamp: d.StartTimestamp, Coordinator: d.Coordinator, Partitions: map[string][]int32{},
			}
			for topic, ps := range d.Topics {
				dj.Partitions[topic] = slices.Sorted(maps.Keys(ps))
			}
			out = append(out, dj)
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "PARTITIONS")
		for _, d := range out {
			tw.Row(d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, partitionList(d.Partitions))
		}
		return tw.Flush()
	})
	return cmd
}

// partitionList shows topic partitions as "t:0,1 u:3".
func partitionList(m map[string][]int32) string {
	topics := make([]string, 0, len(m))
	for t := range m {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var parts []string
	for _, t := range topics {
		ps := make([]string, len(m[t]))
		for i, p := range m[t] {
			ps[i] = fmt.Sprint(p)
		}
		parts = append(parts, t+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

type producerJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"` // -1: no marker yet
	LastSequence     int32  `json:"last_sequence"`
	LastTimestamp    int64  `json:"last_timestamp"`
	TxnStartOffset   int64  `json:"txn_start_offset"` // -1: no open transaction
}

func toProducerJSON(p kadm.DescribedProducer) producerJSON {
	return producerJSON{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
		CoordinatorEpoch: p.CoordinatorEpoch, LastSequence: p.LastSequence, LastTimestamp: p.LastTimestamp, TxnStartOffset: p.CurrentTxnStartOffset}
}

func txnProducersCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var topic string
	var partition int32
	cmd := &cobra.Command{
		Use:   "producers --topic TOPIC [--partition P]",
		Short: "Show the producers of a topic's partitions and their open transactions",
		Example: `  strata txn producers --topic payments
  strata txn producers --topic payments --partition 0 -o json`,
		Args: usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic (required)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "only this partition")
	cmd.RegisterFlagCompletionFunc("topic", completeTopics(env, g))
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		if topic == "" {
			return cli.Usagef("--topic is required")
		}
		adm, done, err := txnAdmin(&ctx, s, apiDescribeProducers)
		if err != nil {
			return err
		}
		defer done()
		set, err := txnPartitions(ctx, adm, topic, partition, -1)
		if err != nil {
			return err
		}
		described, err := describeProducers(ctx, adm, set)
		if err != nil {
			return err
		}
		out := []producerJSON{}
		for _, p := range described {
			out = append(out, toProducerJSON(p))
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "LAST-SEQUENCE", "TXN-START-OFFSET")
		for _, p := range out {
			tw.Row(p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, p.TxnStartOffset)
		}
		return tw.Flush()
	})
	return cmd
}
