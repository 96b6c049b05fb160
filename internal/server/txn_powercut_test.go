package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/txn"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestTxnPowerCutBetweenTransactions cuts the power of one node (a crashable
// in-memory filesystem keeps only what was fsynced) while a franz-go
// producer runs back-to-back transactions of several pipelined batches, at
// the moment the next transaction's first batch is acknowledged: its Ongoing
// state was appended without an fsync of its own (deferred until a later
// fsync of __transaction_state, storage.AppendHints.FlushWithin) and the batches of
// each transaction shared fsyncs where they were pipelined
// (storage.AppendHints.Followed). After the restart every transaction the
// producer was told committed is read once by read_committed, the cut one is
// not (the Prepare state that pre-added its partition stands for its lost
// Ongoing state: the coordinator resumes it and the producer's next
// InitProducerId aborts it), and the last stable offset reaches the
// high-water mark.
func TestTxnPowerCutBetweenTransactions(t *testing.T) {
	const topic, id, txns, perTxn = "cut", "cut-tx", 5, 40
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 1
	producer := func(n *Node) *kgo.Client {
		t.Helper()
		// 40 records of about 50 bytes in 1 KiB batches: a transaction is
		// three pipelined Produce requests.
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(id),
			kgo.ProducerBatchMaxBytes(1<<10), kgo.ProducerLinger(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	const pad = "................................................"
	value := func(v string) []byte { return []byte(v + " " + pad) }
	commit := func(cl *kgo.Client, values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			cl.Produce(ctx, &kgo.Record{Value: value(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("producing %s: %v", v, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}

	mem := vfs.NewMem()
	n := startOn(t, cfg, mem)
	cl := producer(n)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var committed []string // told committed
	for i := range txns {
		var values []string
		for j := range perTxn {
			values = append(values, fmt.Sprintf("t%d-%d", i, j))
		}
		commit(cl, values...)
		committed = append(committed, values...)
	}
	// The next transaction: its first batch acknowledged, then the power cut.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value("cut")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	state, err := n.replicas.Partition(txn.StateTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	unsynced := state.LogEndOffset() - state.HighWatermark()
	cut := mem.CrashClone()
	t.Logf("__transaction_state records not fsynced at the cut: %d (states written unacked: their fsync deferred)", unsynced)
	cl.Close()
	n.Close()

	n = startOn(t, cfg, cut)
	defer n.Close()
	cl = producer(n)
	defer cl.Close()
	// An aborted transaction first, so that "last" is not the client's first
	// produce to the topic: franz-go 1.22.3 can lose the fact that its first
	// produce to a topic in a transaction succeeded (1 run in about 200 under
	// load: it logged "produced; to: cut[0{207=>208}]", then "no produce
	// succeeded in this transaction", and ended the transaction with an abort
	// that EndTransaction(TryCommit) reports as success).
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value("warm-up")}).FirstErr(); err != nil {
		t.Fatalf("the warm-up produce (of a transaction aborted on purpose, never read): %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("aborting the warm-up transaction: %v", err)
	}
	commit(cl, "last")
	committed = append(committed, "last")

	got := readCommittedThrough(t, n.KafkaAddr(), topic, string(value("last")))
	var read []string
	for _, v := range got {
		read = append(read, v[:len(v)-len(pad)-1])
	}
	if slices.Contains(read, "cut") {
		t.Fatalf("read_committed read the transaction open at the cut")
	}
	if !slices.Equal(read, committed) {
		t.Fatalf("read_committed read %d records, want the %d told committed, once each, in order", len(read), len(committed))
	}
	waitNoOpenTxn(t, cl, topic)
}
