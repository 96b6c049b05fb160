package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// TestTxnCommands: list, describe and producers show an open transaction, and
// list --state and describe follow it to CompleteCommit.
func TestTxnCommands(t *testing.T) {
	ctx := context.Background()
	addr := broker(t)
	topic := topicName(t)
	id := topic + "-tx"
	mustRunAt(t, addr, "topic", "create", topic, "-p", "1")
	prod := openTxn(t, addr, id, topic, "v")

	var listed []listedTxnJSON
	mustJSONAt(t, addr, &listed, "txn", "list", "--state", "Ongoing")
	found := false
	for _, l := range listed {
		found = found || (l.TransactionalID == id && l.State == "Ongoing")
	}
	if !found {
		t.Fatalf("txn list --state Ongoing: %+v", listed)
	}
	var described []describedTxnJSON
	mustJSONAt(t, addr, &described, "txn", "describe", id)
	if len(described) != 1 || described[0].State != "Ongoing" || len(described[0].Partitions[topic]) != 1 {
		t.Fatalf("txn describe: %+v", described)
	}
	var producers []producerJSON
	mustJSONAt(t, addr, &producers, "txn", "producers", "--topic", topic)
	if len(producers) != 1 || producers[0].TxnStartOffset != 0 || producers[0].ProducerID != described[0].ProducerID {
		t.Fatalf("txn producers: %+v", producers)
	}
	if r := mustRunAt(t, addr, "txn", "describe", id); r.stdout == "" {
		t.Fatal("txn describe printed no table")
	}

	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the transaction completes", func() bool {
		var d []describedTxnJSON
		mustJSONAt(t, addr, &d, "txn", "describe", id)
		return len(d) == 1 && d[0].State == "CompleteCommit"
	})
	mustJSONAt(t, addr, &producers, "txn", "producers", "--topic", topic)
	if len(producers) != 1 || producers[0].TxnStartOffset != -1 {
		t.Fatalf("txn producers after the commit: %+v", producers)
	}
}

// TestTxnDescribeUnknownID: describing a transactional id the coordinator does
// not know fails, as kafka-transactions.sh describe does: the error names the
// id on stderr, the exit status is 1 and nothing is printed, in either output
// format, even beside an id that is known.
func TestTxnDescribeUnknownID(t *testing.T) {
	addr := broker(t)
	topic := topicName(t)
	id, unknown := topic+"-tx", topic+"-unknown"
	mustRunAt(t, addr, "topic", "create", topic, "-p", "1")
	openTxn(t, addr, id, topic, "v")
	for _, args := range [][]string{
		{"txn", "describe", unknown},
		{"txn", "describe", unknown, "-o", "json"},
		{"txn", "describe", id, unknown},
		{"txn", "describe", id, unknown, "-o", "json"},
	} {
		r := runAt(t, addr, "", args...)
		if r.code != 1 || r.err == nil || r.stdout != "" ||
			!strings.Contains(r.err.Error(), `transactional id "`+unknown+`"`) || !strings.Contains(r.err.Error(), "TRANSACTIONAL_ID_NOT_FOUND") {
			t.Errorf("strata %s: %s; want exit status 1 naming the id", strings.Join(args, " "), r)
		}
	}
}

// openTxn starts a transaction of transactional id id with one record, value,
// on partition 0 of topic, and leaves it open; the producer is closed at the
// end of the test.
func openTxn(t *testing.T, addr, id, topic, value string) *kgo.Client {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(value), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return prod
}
