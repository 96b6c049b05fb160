package main

import (
	"context"
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
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

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
	if len(described) != 1 || described[0].State != "Ongoing" || len(described[0].Partitions[topic]) != 1 || described[0].Error != "" {
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
