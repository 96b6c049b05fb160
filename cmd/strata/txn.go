package main

// strata txn: list, describe and producers (what kafka-transactions.sh shows).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/cli"
)

func txnCmd() *cobra.Command { return newTxnCmd(processEnv()) }

// Kafka API keys the transaction commands need.
const (
	apiDescribeProducers    = 61
	apiDescribeTransactions = 65
	apiListTransactions     = 66
)

func newTxnCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "txn", "List and describe transactions and the producers of partitions")
	cmd.AddCommand(txnListCmd(env, g), txnDescribeCmd(env, g), txnProducersCmd(env, g))
	return cmd
}

// txnAdmin bounds *ctx by the session's timeout and connects an admin client to
// a broker serving keys; call done when finished.
func txnAdmin(ctx *context.Context, s *session, keys ...int16) (*kadm.Client, func(), error) {
	c, cancel := s.withTimeout(*ctx)
	*ctx = c
	cl, adm, err := s.admin(c)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := func() { cl.Close(); cancel() }
	if err := cli.RequireAPIs(c, adm, keys...); err != nil {
		done()
		return nil, nil, err
	}
	return adm, done, nil
}

type listedTxnJSON struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	Coordinator     int32  `json:"coordinator"`
}

func txnListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids (every coordinator's)",
		Args:    usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		adm, done, err := txnAdmin(&ctx, s, apiListTransactions)
		if err != nil {
			return err
		}
		defer done()
		listed, err := adm.ListTransactions(ctx, nil, states)
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
	Error           string             `json:"error,omitempty"`
}

func txnDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: state, producer, timeout, partitions",
		Args:  usageArgs(env, cobra.MinimumNArgs(1)),
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
			if d.Err != nil {
				dj.Error = d.Err.Error()
			}
			out = append(out, dj)
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "PARTITIONS", "ERROR")
		for _, d := range out {
			tw.Row(d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, partitionList(d.Partitions), d.Error)
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
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	ProducerID     int64  `json:"producer_id"`
	ProducerEpoch  int16  `json:"producer_epoch"`
	LastSequence   int32  `json:"last_sequence"`
	LastTimestamp  int64  `json:"last_timestamp"`
	TxnStartOffset int64  `json:"txn_start_offset"` // -1: no open transaction
}

func txnProducersCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "producers TOPIC",
		Short: "Show the producers of a topic's partitions and their open transactions",
		Args:  usageArgs(env, cobra.ExactArgs(1)),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		adm, done, err := txnAdmin(&ctx, s, apiDescribeProducers)
		if err != nil {
			return err
		}
		defer done()
		topics, err := adm.ListTopics(ctx, args[0])
		if err != nil {
			return err
		}
		td, ok := topics[args[0]]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %s: %v", args[0], td.Err)
		}
		set := kadm.TopicsSet{}
		for p := range td.Partitions {
			set.Add(args[0], p)
		}
		described, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return err
		}
		out := []producerJSON{}
		for _, p := range described.SortedProducers() {
			out = append(out, producerJSON{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
				LastSequence: p.LastSequence, LastTimestamp: p.LastTimestamp, TxnStartOffset: p.CurrentTxnStartOffset})
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "TXN-START-OFFSET")
		for _, p := range out {
			tw.Row(p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence, p.TxnStartOffset)
		}
		return tw.Flush()
	})
	return cmd
}
