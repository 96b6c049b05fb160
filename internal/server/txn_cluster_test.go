package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// TestClusterTransactionCoordinatorFailover: the node coordinating a
// transactional id crashes while a transaction is open. A new incarnation of the
// producer, served by the next coordinator (the new leader of the id's
// __transaction_state partition, which replayed it), aborts the open transaction
// and commits its own; read_committed readers see the committed transactions and
// nothing of the open one.
func TestClusterTransactionCoordinatorFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	_, adm := c.client()
	const topic = "tx-failover"
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	txn := func(cl *kgo.Client, prefix string, n int, commit bool) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := range n {
			r := &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
		}
		if !commit {
			return nil // left open
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	first, _ := c.client(kgo.TransactionalID("failover-tx"), kgo.DefaultProduceTopic(topic))
	// Metadata reaches the other brokers a moment after CreateTopics answers.
	wait.For(t, "a first committed transaction", func() bool {
		return txn(first, "one", 6, true) == nil
	})
	if err := txn(first, "open", 6, false); err != nil {
		t.Fatal(err)
	}
	fc := adm.FindTxnCoordinators(ctx, "failover-tx")
	if err := fc.Error(); err != nil {
		t.Fatal(err)
	}
	c.crash(int(fc["failover-tx"].NodeID - 1))

	var second *kgo.Client
	wait.For(t, "a new incarnation commits through the new coordinator", func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("failover-tx"), kgo.DefaultProduceTopic(topic),
			kgo.TransactionTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := txn(cl, "two", 6, true); err != nil {
			t.Logf("second incarnation: %v", err)
			cl.Close()
			return false
		}
		second = cl
		return true
	})
	defer second.Close()

	want := []string{"one-0", "one-1", "one-2", "one-3", "one-4", "one-5", "two-0", "two-1", "two-2", "two-3", "two-4", "two-5"}
	var got []string
	wait.For(t, "read_committed sees both committed transactions", func() bool {
		got = pollFor(t, c.seeds()[0], topic, kgo.ReadCommitted(), len(want), 5*time.Second)
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v (nothing of the open transaction)", got, want)
	}
}
