package main

// strata txn find-hanging, abort and force-terminate: finding and ending
// transactions no coordinator will end (what kafka-transactions.sh find-hanging,
// abort and force-terminate do).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/cli"
)

// txnPartitions is the partitions to search: topic's (only partition, when not
// -1), else every topic's, internal ones included; when broker is not -1, only
// those with a replica on it.
func txnPartitions(ctx context.Context, adm *kadm.Client, topic string, partition, broker int32) (kadm.TopicsSet, error) {
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	details, err := adm.ListTopicsWithInternal(ctx, topics...)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, td := range details {
		if td.Err != nil {
			return nil, fmt.Errorf("topic %q: %w", td.Topic, td.Err)
		}
		for p, pd := range td.Partitions {
			if partition >= 0 && p != partition {
				continue
			}
			if broker >= 0 && !containsInt32(pd.Replicas, broker) {
				continue
			}
			set.Add(td.Topic, p)
		}
	}
	if partition >= 0 && len(set) == 0 {
		return nil, fmt.Errorf("topic %q has no partition %d", topic, partition)
	}
	return set, nil
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// describeProducers asks the partitions' leaders for their producers, sorted;
// a partition that could not be described fails the whole call.
func describeProducers(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) ([]kadm.DescribedProducer, error) {
	if len(set) == 0 {
		return nil, nil
	}
	described, err := adm.DescribeProducers(ctx, set)
	// kadm reports partitions it found no leader for (an unknown topic, say) as a
	// shard error of the request; name the partitions instead.
	var shardErrs *kadm.ShardErrors
	if errors.As(err, &shardErrs) && len(shardErrs.Errs) > 0 {
		if req, ok := shardErrs.Errs[0].Req.(*kmsg.DescribeProducersRequest); ok {
			var names []string
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					names = append(names, fmt.Sprintf("%s-%d", t.Topic, p))
				}
			}
			return nil, fmt.Errorf("describing the producers of %s: %w", strings.Join(names, ", "), shardErrs.Errs[0].Err)
		}
	}
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("describing the producers of %s-%d: %w", p.Topic, p.Partition, p.Err))
		}
	}
	for t, ps := range set {
		for p := range ps {
			if _, ok := described[t].Partitions[p]; !ok {
				errs = append(errs, fmt.Errorf("describing the producers of %s-%d: no answer", t, p))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return described.SortedProducers(), nil
}

type hangingJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"`
	LastTimestamp    int64  `json:"last_timestamp"`
	AgeMs            int64  `json:"age_ms"`
	// TransactionalID is the id whose coordinator has the producer id but not
	// this partition in its transaction ("": no coordinator knows the producer id).
	TransactionalID string `json:"transactional_id"`
}

// openTooLong is the producers with a transaction open on a partition whose last
// write is more than maxTimeout before now: the candidates for hanging.
func openTooLong(producers []kadm.DescribedProducer, now time.Time, maxTimeout time.Duration) []kadm.DescribedProducer {
	var out []kadm.DescribedProducer
	for _, p := range producers {
		if p.CurrentTxnStartOffset >= 0 && now.UnixMilli()-p.LastTimestamp > maxTimeout.Milliseconds() {
			out = append(out, p)
		}
	}
	return out
}

// hangingTxns applies Kafka's rule to the candidates: an open transaction is
// hanging unless a coordinator lists its producer id under a transactional id
// whose description has the candidate's partition in its transaction. listed is
// ListTransactions filtered by the candidates' producer ids; described is
// DescribeTransactions of the ids listed.
func hangingTxns(candidates []kadm.DescribedProducer, listed kadm.ListedTransactions, described kadm.DescribedTransactions, now time.Time) []hangingJSON {
	idOf := map[int64]string{}
	for _, l := range listed {
		idOf[l.ProducerID] = l.TxnID
	}
	out := []hangingJSON{}
	for _, c := range candidates {
		id := idOf[c.ProducerID]
		if id != "" {
			d, ok := described[id]
			if ok && d.Err == nil && d.Topics.Lookup(c.Topic, c.Partition) {
				continue // the coordinator will write this partition's marker
			}
		}
		out = append(out, hangingJSON{
			Topic: c.Topic, Partition: c.Partition, ProducerID: c.ProducerID, ProducerEpoch: c.ProducerEpoch,
			CoordinatorEpoch: c.CoordinatorEpoch, StartOffset: c.CurrentTxnStartOffset, LastTimestamp: c.LastTimestamp,
			AgeMs: now.UnixMilli() - c.LastTimestamp, TransactionalID: id,
		})
	}
	return out
}

func txnFindHangingCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var topic string
	var partition, broker int32
	var maxTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "find-hanging (--topic TOPIC [--partition P] | --broker ID)",
		Short: "Find open transactions no coordinator will end",
		Long: `Find hanging transactions: a producer's transaction open on a partition, last
written to more than --max-transaction-timeout ago, whose producer id no
coordinator lists under a transactional id with that partition in its
transaction. Nothing ends such a transaction: it holds the partition's last
stable offset, so read_committed consumers stop there. End one with
'strata txn abort'.`,
		Example: `  strata txn find-hanging --topic payments
  strata txn find-hanging --broker 2 --max-transaction-timeout 5m -o json`,
		Args: usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().StringVar(&topic, "topic", "", "search this topic's partitions")
	cmd.Flags().Int32Var(&partition, "partition", -1, "only this partition of --topic")
	cmd.Flags().Int32Var(&broker, "broker", -1, "search the partitions with a replica on this broker (their leaders are asked)")
	cmd.Flags().DurationVar(&maxTimeout, "max-transaction-timeout", 15*time.Minute, "the brokers' transaction.max.timeout.ms: younger transactions may still be ended by their producer")
	cmd.RegisterFlagCompletionFunc("topic", completeTopics(env, g))
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		switch {
		case topic == "" && broker < 0:
			return cli.Usagef("find-hanging needs --topic or --broker to limit the search")
		case partition >= 0 && topic == "":
			return cli.Usagef("--partition needs --topic")
		case maxTimeout < 0:
			return cli.Usagef("--max-transaction-timeout must not be negative, got %s", maxTimeout)
		}
		adm, done, err := txnAdmin(&ctx, s, apiDescribeProducers, apiListTransactions, apiFindCoordinator, apiDescribeTransactions)
		if err != nil {
			return err
		}
		defer done()
		set, err := txnPartitions(ctx, adm, topic, partition, broker)
		if err != nil {
			return err
		}
		producers, err := describeProducers(ctx, adm, set)
		if err != nil {
			return err
		}
		now := time.Now()
		candidates := openTooLong(producers, now, maxTimeout)
		var listed kadm.ListedTransactions
		var described kadm.DescribedTransactions
		if len(candidates) > 0 {
			pids := make([]int64, len(candidates))
			for i, c := range candidates {
				pids[i] = c.ProducerID
			}
			if listed, err = adm.ListTransactions(ctx, pids, nil); err != nil {
				return fmt.Errorf("listing the transactions of %d producers: %w", len(pids), err)
			}
			if ids := listed.TransactionalIDs(); len(ids) > 0 {
				if described, err = adm.DescribeTransactions(ctx, ids...); err != nil {
					return fmt.Errorf("describing %d transactions: %w", len(ids), err)
				}
				for _, d := range described {
					if d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
						return fmt.Errorf("describing transactional id %q: %w", d.TxnID, d.Err)
					}
				}
			}
		}
		out := hangingTxns(candidates, listed, described, now)
		if s.json() {
			return cli.WriteJSON(s.env.stdout, out)
		}
		tw := cli.NewTable(s.env.stdout, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "START-OFFSET", "AGE", "TRANSACTIONAL-ID")
		for _, h := range out {
			id := h.TransactionalID
			if id == "" {
				id = "-"
			}
			tw.Row(h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.CoordinatorEpoch, h.StartOffset, (time.Duration(h.AgeMs) * time.Millisecond).Round(time.Second), id)
		}
		return tw.Flush()
	})
	return cmd
}

type abortedJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	StartOffset      int64  `json:"start_offset"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
}

func txnAbortCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var topic string
	var partition int32
	var startOffset int64
	cmd := &cobra.Command{
		Use:   "abort --topic TOPIC --partition P --start-offset OFFSET",
		Short: "Abort the transaction open on a partition from an offset (a hanging one)",
		Long: `Abort the transaction that starts at --start-offset on one partition, as its
coordinator would: the partition's leader names the producer (DescribeProducers)
and writes that producer's abort marker (WriteTxnMarkers). Only that partition is
ended; use it on what 'strata txn find-hanging' finds. A transaction a
coordinator still tracks is better left to it (or ended by 'force-terminate').`,
		Example: `  strata txn abort --topic payments --partition 0 --start-offset 42`,
		Args:    usageArgs(env, cobra.NoArgs),
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic (required)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "the partition (required)")
	cmd.Flags().Int64Var(&startOffset, "start-offset", -1, "the first offset of the transaction (required; START-OFFSET of find-hanging)")
	cmd.RegisterFlagCompletionFunc("topic", completeTopics(env, g))
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		switch {
		case topic == "":
			return cli.Usagef("--topic is required")
		case partition < 0:
			return cli.Usagef("--partition is required")
		case startOffset < 0:
			return cli.Usagef("--start-offset is required")
		}
		adm, done, err := txnAdmin(&ctx, s, apiDescribeProducers, apiWriteTxnMarkers)
		if err != nil {
			return err
		}
		defer done()
		producers, err := describeProducers(ctx, adm, kadm.TopicsSet{topic: {partition: {}}})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(producers, func(p kadm.DescribedProducer) bool { return p.CurrentTxnStartOffset == startOffset })
		if i < 0 {
			return fmt.Errorf("no open transaction starts at offset %d of %s-%d", startOffset, topic, partition)
		}
		p := producers[i]
		// A producer with no marker yet has coordinator epoch -1; 0 is at or below
		// any coordinator's epoch, as Kafka's tool uses.
		a := abortedJSON{Topic: topic, Partition: partition, StartOffset: startOffset, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, CoordinatorEpoch: max(p.CoordinatorEpoch, 0)}
		resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: a.ProducerID, ProducerEpoch: a.ProducerEpoch, CoordinatorEpoch: a.CoordinatorEpoch, Topics: kadm.TopicsSet{topic: {partition: {}}}})
		if err != nil {
			return err
		}
		pr, ok := resp[a.ProducerID].Topics[topic].Partitions[partition]
		if !ok {
			return fmt.Errorf("writing the abort marker on %s-%d: no answer", topic, partition)
		}
		if pr.Err != nil {
			return fmt.Errorf("writing the abort marker on %s-%d: %w", topic, partition, pr.Err)
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, a)
		}
		fmt.Fprintf(s.env.stdout, "aborted the transaction of producer %d (epoch %d) starting at offset %d of %s-%d\n", a.ProducerID, a.ProducerEpoch, startOffset, topic, partition)
		return nil
	})
	return cmd
}

type terminatedJSON struct {
	TransactionalID string `json:"transactional_id"`
	PreviousState   string `json:"previous_state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"` // the new epoch: the old producer is fenced
}

// forceTerminateTimeoutMs is the transaction timeout force-terminate's
// InitProducerId gives the id: the producers' default (transaction.timeout.ms),
// until its producer initializes again with its own.
const forceTerminateTimeoutMs = 60000

func txnForceTerminateCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "force-terminate TRANSACTIONAL-ID",
		Short: "Fence a transactional id's producer and abort its open transaction",
		Long: `Fence the producer of a transactional id and abort its open transaction, as
Kafka's forceTerminateTransaction does: an InitProducerId for the id bumps its
epoch (the producer then gets PRODUCER_FENCED) and has the coordinator abort the
transaction on all its partitions first. The command waits for that abort. An
id no coordinator knows is refused rather than created.`,
		Example: `  strata txn force-terminate payments-tx`,
		Args:    usageArgs(env, cobra.ExactArgs(1)),
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		id := args[0]
		if id == "" {
			return cli.Usagef("the transactional id must not be empty")
		}
		cl, adm, done, err := txnClients(&ctx, s, apiFindCoordinator, apiDescribeTransactions, apiInitProducerID)
		if err != nil {
			return err
		}
		defer done()
		described, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return err
		}
		d, ok := described[id]
		if !ok {
			return fmt.Errorf("transactional id %q: no answer", id)
		}
		if d.Err != nil {
			return fmt.Errorf("transactional id %q: %w", id, d.Err)
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = forceTerminateTimeoutMs
		req.ProducerID, req.ProducerEpoch = -1, -1
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			err = kerr.ErrorForCode(resp.ErrorCode)
			if err == nil {
				out := terminatedJSON{TransactionalID: id, PreviousState: d.State, ProducerID: resp.ProducerID, ProducerEpoch: resp.ProducerEpoch}
				if s.json() {
					return cli.WriteJSON(s.env.stdout, out)
				}
				fmt.Fprintf(s.env.stdout, "terminated transactional id %s (was %s): producer %d now at epoch %d, older epochs fenced\n", id, d.State, out.ProducerID, out.ProducerEpoch)
				return nil
			}
			// The coordinator answers these while it aborts the open
			// transaction or loads its state: ask again.
			if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
				return fmt.Errorf("terminating transactional id %q: %w", id, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("terminating transactional id %q: still %v at the timeout", id, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return cmd
}
