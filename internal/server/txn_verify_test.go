package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/wait"
)

// TestProduceVerification drives KIP-890 part 1 over the wire with the
// requests of a transaction version 1 client (Produce v10 and v11,
// AddPartitionsToTxn v3, EndTxn v4): a transactional batch for a partition
// not added to the transaction is refused (INVALID_TXN_STATE for v10,
// TRANSACTION_ABORTABLE for v11) and nothing is appended; once added it is
// appended; a late batch of the committed transaction (same epoch: version 1
// does not bump it) is refused instead of opening a transaction no
// coordinator knows, and read_committed then reads past it.
func TestProduceVerification(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	clientAt := func(produce int16) *kgo.Client {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(int16(kmsg.Produce), produce)
		versions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
		versions.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
		cl, _ := n.client(t, kgo.MaxVersions(versions))
		return cl
	}
	cl10, cl11 := clientAt(10), clientAt(11)
	_, adm := n.client(t)
	const topic, id = "verify", "verify-producer"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	pid, epoch := initTransactional(t, cl11, id)
	produce := func(cl *kgo.Client, seq int32, value string) error {
		return txntest.ProduceWithID(ctx, cl, id, topic, 0, pid, epoch, seq, true, value)
	}
	add := func() {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl11)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
	}
	// commit ends the transaction and retries the end until it is complete
	// (a retried EndTxn of the transaction just committed succeeds then).
	commit := func() {
		t.Helper()
		n := 0
		wait.Within(t, 20*time.Second, "the commit to complete", func() bool {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
			resp, err := req.RequestWith(ctx, cl11)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode == 0 {
				n++
			} else if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
				t.Fatalf("EndTxn: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			return n == 2
		})
	}

	// Not added: refused with each version's code, nothing appended.
	if err := produce(cl10, 0, "not added"); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("Produce v10 to a partition not in the transaction: %v, want INVALID_TXN_STATE", err)
	}
	if err := produce(cl11, 0, "not added"); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("Produce v11 to a partition not in the transaction: %v, want TRANSACTION_ABORTABLE", err)
	}
	add()
	if err := produce(cl10, 0, "committed"); err != nil {
		t.Fatalf("Produce v10 once the partition is added: %v", err)
	}
	if err := produce(cl11, 1, "committed too"); err != nil {
		t.Fatalf("Produce v11 inside the transaction: %v", err)
	}
	commit()
	if err := produce(cl11, 2, "late"); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("late batch of the committed transaction: %v, want TRANSACTION_ABORTABLE", err)
	}
	add()
	if err := produce(cl11, 2, "second"); err != nil {
		t.Fatal(err)
	}
	commit()

	want := []string{"committed", "committed too", "second"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadUncommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("the log holds %v, want %v", got, want)
	}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer saw %v, want %v", got, want)
	}
}

// TestClusterRemoteVerification: a transaction version 1 client (franz-go
// capped at Produce v11) runs transactions on a partition led by another
// broker than its coordinator: that leader verifies the first batch of each
// with the coordinator's broker (AddPartitionsToTxn VerifyOnly, so the
// coordinator serves two adds per transaction: the client's and the
// verification), committed ones are read once and aborted ones never; a
// batch for a partition not added is refused there with TRANSACTION_ABORTABLE.
func TestClusterRemoteVerification(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	_, adm := c.client()
	const topic, id, txns = "tx-verify", "verify-remote", 6
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	cl, _ := c.client(kgo.MaxVersions(versions), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(partition int32, i int, commit bool) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for j := range 2 {
			r := &kgo.Record{Topic: topic, Partition: partition, Value: fmt.Appendf(nil, "t%d-%d", i, j)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				cl.EndTransaction(ctx, kgo.TryAbort)
				return err
			}
		}
		return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	}
	// Metadata reaches the other brokers a moment after CreateTopics answers.
	wait.For(t, "a first committed transaction", func() bool { return txn(0, 0, true) == nil })
	coord, partition := c.awayFromTxnCoordinator(adm, id, topic, 6)
	adds := func() float64 {
		_, body := httpGet(t, "http://"+c.nodes[coord].HTTPAddr()+"/metrics")
		return labelledValue(body, `strata_requests_total{api="AddPartitionsToTxn"}`)
	}
	adds0 := adds()
	var want []string
	for i := 1; i <= txns; i++ {
		commit := i%2 == 1
		if err := txn(partition, i, commit); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if commit {
			want = append(want, fmt.Sprintf("t%d-0", i), fmt.Sprintf("t%d-1", i))
		}
	}
	if got := adds() - adds0; got < 2*txns {
		t.Fatalf("the coordinator served %v AddPartitionsToTxn for %d transactions, want the client's add and the leader's verification of each", got, txns)
	}
	want = append(want, "t0-0", "t0-1")
	slices.Sort(want)
	got := pollFor(t, c.seeds()[0], topic, kgo.ReadCommitted(), len(want), 20*time.Second)
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}

	// A batch for a partition the transaction never added, sent to its leader.
	pid, epoch := initTransactional(t, cl, "verify-raw")
	leader := cl.Broker(c.leaderOf(adm, topic, partition) + 1)
	if err := txntest.ProduceWithID(ctx, leader, "verify-raw", topic, partition, pid, epoch, 0, true, "not added"); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("batch for a partition not added: %v, want TRANSACTION_ABORTABLE", err)
	}
}

// initTransactional runs InitProducerId for transactional id id until the
// coordinator answers, and returns the producer id and epoch.
func initTransactional(t *testing.T, cl *kgo.Client, id string) (int64, int16) {
	t.Helper()
	var pid int64
	var epoch int16
	wait.Within(t, 20*time.Second, "InitProducerId for "+id, func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 30000
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return true
	})
	return pid, epoch
}

// TestTxnOffsetCommitVerifiedOverWire drives KIP-890 part 1 for
// TxnOffsetCommit over the wire with the requests of a transaction version 1
// client: offsets committed in a transaction whose group was never added
// (no AddOffsetsToTxn) are refused, TRANSACTION_ABORTABLE to v4 and
// INVALID_TXN_STATE to v3, and never become the group's; once the group is
// added they are written, and the commit makes them the group's offsets.
func TestTxnOffsetCommitVerifiedOverWire(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	_, adm := n.client(t)
	// franz-go sends a request at the highest version both sides know: cap it.
	clientAt := func(txnOffsetCommit int16) *kgo.Client {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), txnOffsetCommit)
		versions.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
		cl, _ := n.client(t, kgo.MaxVersions(versions))
		return cl
	}
	clients := map[int16]*kgo.Client{3: clientAt(3), 4: clientAt(4)}
	cl := clients[4]
	const topic, id, group = "offsets-verify", "offsets-verify-tx", "offsets-verify-group"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	pid, epoch := initTransactional(t, cl, id)
	commitOffset := func(version int16, offset int64) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = id, group, pid, epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, clients[version])
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// The group's coordinator (and __consumer_offsets) comes up first.
	var code int16
	wait.Within(t, 20*time.Second, "the group coordinator", func() bool {
		code = commitOffset(4, 10)
		return code != kerr.CoordinatorNotAvailable.Code && code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code
	})
	if code != kerr.TransactionAbortable.Code {
		t.Fatalf("TxnOffsetCommit v4 of a group not in the transaction: %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(code))
	}
	if code := commitOffset(3, 11); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit v3 of a group not in the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
	}
	if code := commitOffset(4, 12); code != 0 {
		t.Fatalf("TxnOffsetCommit v4 once the group is added: %v", kerr.ErrorForCode(code))
	}
	if code := commitOffset(3, 13); code != 0 { // the transaction is open there: nothing to ask
		t.Fatalf("TxnOffsetCommit v3 inside the transaction: %v", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if resp, err := end.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %v", err, resp)
	}
	wait.Within(t, 20*time.Second, "the committed offset 13", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		o, ok := offs.Lookup(topic, 0)
		return ok && o.Err == nil && o.At == 13
	})
}
