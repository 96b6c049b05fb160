package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestClusterRemoteCoordinatorWakesAdd: back-to-back transactions (franz-go,
// transaction version 2) on a partition led by another broker than the
// transactional id's coordinator. The next transaction's first produce comes
// while the previous one's markers are still being written; the leader's
// implicit add (AddPartitionsToTxn v5) is then held by the coordinator until
// the transaction is complete, not answered CONCURRENT_TRANSACTIONS and polled:
// the coordinator sees one add per transaction.
func TestClusterRemoteCoordinatorWakesAdd(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	_, adm := c.client()
	const topic, id, txns = "tx-remote", "remote-tx", 20
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.client(kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(partition int32) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := range 3 {
			r := &kgo.Record{Topic: topic, Partition: partition, Value: fmt.Appendf(nil, "v%d", i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	// Metadata reaches the other brokers a moment after CreateTopics answers.
	wait.For(t, "a first committed transaction", func() bool { return txn(0) == nil })
	coord, partition := c.awayFromTxnCoordinator(adm, id, topic, 6)
	if err := txn(partition); err != nil { // the coordinator now has the leader's connection
		t.Fatal(err)
	}
	metrics := func() (adds, concurrent float64) {
		_, body := httpGet(t, "http://"+c.nodes[coord].HTTPAddr()+"/metrics")
		return labelledValue(body, `strata_requests_total{api="AddPartitionsToTxn"}`),
			labelledValue(body, `strata_request_errors_total{api="AddPartitionsToTxn",error="CONCURRENT_TRANSACTIONS"}`)
	}
	adds0, concurrent0 := metrics()
	for range txns {
		if err := txn(partition); err != nil {
			t.Fatal(err)
		}
	}
	adds, concurrent := metrics()
	// One add per transaction; a held add that outlasts its 500 ms bound on a
	// loaded machine is answered CONCURRENT_TRANSACTIONS and sent again, so
	// allow one such.
	if adds-adds0 > txns+1 || concurrent-concurrent0 > 1 {
		t.Fatalf("the coordinator saw %v adds and answered %v CONCURRENT_TRANSACTIONS for %d transactions; want one add each",
			adds-adds0, concurrent-concurrent0, txns)
	}
	if got := pollFor(t, c.seeds()[0], topic, kgo.ReadCommitted(), 3*(txns+2), 10*time.Second); len(got) != 3*(txns+2) {
		t.Fatalf("read_committed saw %d records, want %d", len(got), 3*(txns+2))
	}
}

// labelledValue reads one sample (name with its labels) from a /metrics page;
// 0 when it is not there.
func labelledValue(body, sample string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return 0
}

// awayFromTxnCoordinator returns the index of the node coordinating
// transactional id and a partition of topic (of n) led by another node.
func (c *testCluster) awayFromTxnCoordinator(adm *kadm.Client, id, topic string, n int32) (coord int, partition int32) {
	c.t.Helper()
	fc := adm.FindTxnCoordinators(context.Background(), id)
	if err := fc.Error(); err != nil {
		c.t.Fatal(err)
	}
	coord = int(fc[id].NodeID - 1)
	for p := range n {
		if c.leaderOf(adm, topic, p) != coord {
			return coord, p
		}
	}
	c.t.Fatalf("every partition of %s is led by the coordinator, node %d", topic, coord+1)
	return coord, -1
}
