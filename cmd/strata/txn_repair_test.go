package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/wait"
)

// TestHangingTxns: Kafka's rule over candidates, table-driven.
func TestHangingTxns(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	open := func(pid, start, last int64) kadm.DescribedProducer {
		return kadm.DescribedProducer{Topic: "t", Partition: 0, ProducerID: pid, CurrentTxnStartOffset: start, LastTimestamp: last}
	}
	inTxn := kadm.DescribedTransaction{TxnID: "a", Topics: kadm.TopicsSet{"t": {0: {}}}}
	other := kadm.DescribedTransaction{TxnID: "a", Topics: kadm.TopicsSet{"t": {1: {}}}}
	notFound := kadm.DescribedTransaction{TxnID: "a", Err: kerr.TransactionalIDNotFound}
	for _, tc := range []struct {
		name      string
		producers []kadm.DescribedProducer
		listed    kadm.ListedTransactions
		described kadm.DescribedTransactions
		want      []int64 // hanging producer ids
		wantID    string
	}{
		{"no transaction open", []kadm.DescribedProducer{open(1, -1, 0)}, nil, nil, nil, ""},
		{"younger than the timeout", []kadm.DescribedProducer{open(1, 5, now.UnixMilli()-1000)}, nil, nil, nil, ""},
		{"no coordinator knows the producer", []kadm.DescribedProducer{open(1, 5, 0)}, nil, nil, []int64{1}, ""},
		{"the coordinator has the partition", []kadm.DescribedProducer{open(1, 5, 0)},
			kadm.ListedTransactions{"a": {TxnID: "a", ProducerID: 1}}, kadm.DescribedTransactions{"a": inTxn}, nil, ""},
		{"the coordinator's transaction lacks the partition", []kadm.DescribedProducer{open(1, 5, 0)},
			kadm.ListedTransactions{"a": {TxnID: "a", ProducerID: 1}}, kadm.DescribedTransactions{"a": other}, []int64{1}, "a"},
		{"the id is gone", []kadm.DescribedProducer{open(1, 5, 0)},
			kadm.ListedTransactions{"a": {TxnID: "a", ProducerID: 1}}, kadm.DescribedTransactions{"a": notFound}, []int64{1}, "a"},
		{"another producer's id", []kadm.DescribedProducer{open(1, 5, 0)},
			kadm.ListedTransactions{"a": {TxnID: "a", ProducerID: 2}}, kadm.DescribedTransactions{"a": inTxn}, []int64{1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hangingTxns(openTooLong(tc.producers, now, time.Minute), tc.listed, tc.described, now)
			var pids []int64
			for _, h := range got {
				pids = append(pids, h.ProducerID)
				if h.TransactionalID != tc.wantID || h.StartOffset != 5 || h.AgeMs != now.UnixMilli() {
					t.Errorf("hanging %+v, want id %q, start 5, age %d", h, tc.wantID, now.UnixMilli())
				}
			}
			if fmt.Sprint(pids) != fmt.Sprint(tc.want) {
				t.Fatalf("hanging producers %v, want %v", pids, tc.want)
			}
		})
	}
}

// TestTxnFindHangingAndAbort: beside a franz-go transaction in progress, a
// transactional batch written with no coordinator behind it holds the last
// stable offset; find-hanging finds it (and only it), abort ends it,
// find-hanging then finds nothing, and read_committed reads past it.
func TestTxnFindHangingAndAbort(t *testing.T) {
	ctx := context.Background()
	addr := broker(t)
	topic := topicName(t)
	mustRunAt(t, addr, "topic", "create", topic, "-p", "2")

	raw, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(txntest.ClientID))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hangingPID, err := txntest.ProducerID(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := txntest.Produce(ctx, raw, topic, 0, hangingPID, 0, true, "hanging"); err != nil {
		t.Fatal(err)
	}
	prod := openTxn(t, addr, topic+"-tx", topic, "committed")

	var producers []producerJSON
	mustJSONAt(t, addr, &producers, "txn", "producers", "--topic", topic, "--partition", "0")
	if len(producers) != 2 {
		t.Fatalf("txn producers: %+v, want the two producers of partition 0", producers)
	}

	// The hanging batch is milliseconds old: find-hanging needs it older than
	// the timeout (0).
	var hanging []hangingJSON
	wait.For(t, "find-hanging finds the hanging transaction", func() bool {
		mustJSONAt(t, addr, &hanging, "txn", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0s")
		return len(hanging) > 0
	})
	if len(hanging) != 1 || hanging[0].ProducerID != hangingPID || hanging[0].Partition != 0 || hanging[0].StartOffset != 0 || hanging[0].TransactionalID != "" {
		t.Fatalf("find-hanging: %+v, want only producer %d at offset 0 of partition 0", hanging, hangingPID)
	}
	var byBroker []hangingJSON
	mustJSONAt(t, addr, &byBroker, "txn", "find-hanging", "--broker", "1", "--max-transaction-timeout", "0s")
	if !containsHanging(byBroker, topic, hangingPID) {
		t.Fatalf("find-hanging --broker 1: %+v, want producer %d on %s", byBroker, hangingPID, topic)
	}
	if r := mustRunAt(t, addr, "txn", "find-hanging", "--topic", topic); strings.Contains(r.stdout, topic) {
		t.Fatalf("find-hanging with the default 15m timeout found a transaction seconds old:\n%s", r.stdout)
	}

	adm := kadm.NewClient(raw)
	stable := func() int64 {
		t.Helper()
		offs, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup(topic, 0)
		return o.Offset
	}
	if s := stable(); s != 0 {
		t.Fatalf("last stable offset %d before the abort, want 0 (the hanging transaction's start)", s)
	}

	r := mustRunAt(t, addr, "txn", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
	if want := fmt.Sprintf("aborted the transaction of producer %d", hangingPID); !strings.Contains(r.stdout, want) {
		t.Fatalf("abort printed %q, want %q", r.stdout, want)
	}
	mustJSONAt(t, addr, &hanging, "txn", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0s")
	if len(hanging) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", hanging)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The hanging batch, its abort marker, the committed record and its
	// commit marker: 4 offsets, all stable once the commit's marker is written.
	wait.For(t, "the last stable offset passes both transactions", func() bool { return stable() == 4 })

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < 1 && pctx.Err() == nil {
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 1 || got[0] != "committed" {
		t.Fatalf("read_committed read %v, want [committed] (not the aborted hanging record)", got)
	}
}

func containsHanging(hs []hangingJSON, topic string, pid int64) bool {
	for _, h := range hs {
		if h.Topic == topic && h.ProducerID == pid {
			return true
		}
	}
	return false
}

// TestTxnForceTerminate: force-terminate fences a producer in the middle of a
// transaction and aborts it; the producer's commit then fails, and an unknown id
// is refused, not created.
func TestTxnForceTerminate(t *testing.T) {
	ctx := context.Background()
	addr := broker(t)
	topic := topicName(t)
	id := topic + "-tx"
	mustRunAt(t, addr, "topic", "create", topic, "-p", "1")
	prod := openTxn(t, addr, id, topic, "v")
	var before []describedTxnJSON
	mustJSONAt(t, addr, &before, "txn", "describe", id)

	var term terminatedJSON
	mustJSONAt(t, addr, &term, "txn", "force-terminate", id)
	if term.PreviousState != "Ongoing" || term.ProducerID != before[0].ProducerID || term.ProducerEpoch <= before[0].ProducerEpoch {
		t.Fatalf("force-terminate: %+v, before %+v", term, before[0])
	}
	var after []describedTxnJSON
	mustJSONAt(t, addr, &after, "txn", "describe", id)
	if after[0].State == "Ongoing" || len(after[0].Partitions) != 0 {
		t.Fatalf("after force-terminate: %+v", after[0])
	}
	var producers []producerJSON
	mustJSONAt(t, addr, &producers, "txn", "producers", "--topic", topic)
	if len(producers) != 1 || producers[0].TxnStartOffset != -1 {
		t.Fatalf("producers after force-terminate: %+v, want no open transaction", producers)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}

	unknown := topic + "-unknown"
	if r := runAt(t, addr, "", "txn", "force-terminate", unknown); r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), "TRANSACTIONAL_ID_NOT_FOUND") {
		t.Fatalf("force-terminate of an unknown id: %s", r)
	}
	var listed []listedTxnJSON
	mustJSONAt(t, addr, &listed, "txn", "list")
	for _, l := range listed {
		if l.TransactionalID == unknown {
			t.Fatalf("force-terminate created %s", unknown)
		}
	}
	mustJSONAt(t, addr, &listed, "txn", "list", "--producer-id", fmt.Sprint(term.ProducerID))
	if len(listed) != 1 || listed[0].TransactionalID != id {
		t.Fatalf("txn list --producer-id %d: %+v", term.ProducerID, listed)
	}
}

// TestTxnRepairErrors: calling mistakes are usage errors (exit 2, nothing
// sent); a start offset no transaction has is a failure (exit 1).
func TestTxnRepairErrors(t *testing.T) {
	addr := broker(t)
	topic := topicName(t)
	mustRunAt(t, addr, "topic", "create", topic, "-p", "1")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"txn", "find-hanging"}, 2, "needs --topic or --broker"},
		{[]string{"txn", "find-hanging", "--partition", "0", "--broker", "1"}, 2, "--partition needs --topic"},
		{[]string{"txn", "find-hanging", "--topic", topic, "--max-transaction-timeout", "soon"}, 2, "invalid argument"},
		{[]string{"txn", "find-hanging", "--topic", topic, "--partition", "7"}, 1, "has no partition 7"},
		{[]string{"txn", "abort", "--topic", topic, "--partition", "0"}, 2, "--start-offset is required"},
		{[]string{"txn", "abort", "--partition", "0", "--start-offset", "0"}, 2, "--topic is required"},
		{[]string{"txn", "abort", "--topic", topic, "--partition", "0", "--start-offset", "3"}, 1, "no open transaction starts at offset 3"},
		{[]string{"txn", "producers"}, 2, "--topic is required"},
		{[]string{"txn", "producers", "--topic", topic + "-nope"}, 1, "UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"txn", "abort", "--topic", topic + "-nope", "--partition", "0", "--start-offset", "0"}, 1, "describing the producers of " + topic + "-nope-0: UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"txn", "force-terminate"}, 2, "accepts 1 arg"},
	} {
		r := runAt(t, addr, "", tc.args...)
		if r.code != tc.code || r.err == nil || !strings.Contains(r.err.Error(), tc.msg) {
			t.Errorf("strata %s: want exit %d and %q, got %s", strings.Join(tc.args, " "), tc.code, tc.msg, r)
		}
	}
}
