package interop

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaTransactionsTool runs Kafka 4.4's kafka-transactions against a broker
// holding one ongoing transaction (a franz-go transactional producer) and one
// hanging transaction (a transactional batch written with no coordinator behind
// it): list, describe and describe-producers show the ongoing one, find-hanging
// finds only the hanging one, abort ends it (read_committed then reads past it)
// and find-hanging no longer finds it.
func TestKafkaTransactionsTool(t *testing.T) {
	kafkatools.Require(t)
	tgt := startTarget(t)
	ctx := context.Background()
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-transactions", append([]string{"--bootstrap-server", tgt.bootstrap}, args...)...)
	}
	const topic, txnID = "txn-tools", "tools-tx"
	createTopics(t, tgt.bootstrap, 1, topic)

	prod, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("ongoing")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	raw, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ClientID(txntest.ClientID))
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

	out := run(t, "list")
	expectContains(t, out, txnID)
	expectContains(t, out, "Ongoing")
	out = run(t, "describe", "--transactional-id", txnID)
	expectContains(t, out, "Ongoing")
	expectContains(t, out, topic+"-0")
	pid := strconv.FormatInt(hangingPID, 10)
	producers := toolRows(run(t, "describe-producers", "--topic", topic, "--partition", "0"))
	if len(producers) != 2 || !slices.ContainsFunc(producers, func(r map[string]string) bool {
		return r["ProducerId"] == pid && r["CurrentTransactionStartOffset"] != "-1"
	}) {
		t.Fatalf("describe-producers shows %v, want the two producers, %s with an open transaction", producers, pid)
	}
	hanging := toolRows(run(t, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"))
	if len(hanging) != 1 || hanging[0]["ProducerId"] != pid || hanging[0]["Partition"] != "0" {
		t.Fatalf("find-hanging found %v, want only producer %s on partition 0", hanging, pid)
	}
	run(t, "abort", "--topic", topic, "--partition", "0", "--start-offset", hanging[0]["StartOffset"])
	if rows := toolRows(run(t, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")); len(rows) != 0 {
		t.Fatalf("find-hanging still finds %v after abort", rows)
	}

	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
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
	if len(got) != 1 || got[0] != "ongoing" {
		t.Fatalf("read_committed read %v, want [ongoing] (the committed record, not the aborted hanging one)", got)
	}
}

// toolRows parses a table printed by kafka-transactions (a header line of column
// names, then one line per row) into one map per row.
func toolRows(out string) []map[string]string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return nil
	}
	header := strings.Fields(lines[0])
	var rows []map[string]string
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != len(header) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		rows = append(rows, row)
	}
	return rows
}
