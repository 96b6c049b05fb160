package server

import (
	"context"
	"errors"
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

// TestEndTxnV5 drives KIP-890's EndTxn v5 over the wire: each commit and abort
// bumps the producer epoch and answers the new one, a retry with the old epoch
// succeeds, a late batch of the ended transaction is refused
// (INVALID_PRODUCER_EPOCH: the markers carry the new epoch), an abort without a
// transaction only bumps the epoch, and read_committed sees the committed
// transaction alone.
func TestEndTxnV5(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3) // the client form
	cl, adm := n.client(t, kgo.MaxVersions(versions), kgo.ClientID(txntest.ClientID))
	const topic, id = "tv2", "tv2-producer"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	pid, epoch := initTransactional(t, cl, id)
	add := func(epoch int16) {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("AddPartitionsToTxn at epoch %d: %v", epoch, kerr.ErrorForCode(code))
		}
	}
	end := func(epoch int16, commit bool) (*kmsg.EndTxnResponse, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		return resp, kerr.ErrorForCode(resp.ErrorCode)
	}
	// endDone ends the transaction at epoch and then retries that end until the
	// transaction is complete; both answers name the bumped epoch.
	endDone := func(epoch int16, commit bool) int16 {
		t.Helper()
		resp, err := end(epoch, commit)
		if err != nil || resp.ProducerID != pid || resp.ProducerEpoch != epoch+1 {
			t.Fatalf("EndTxn v5 at epoch %d: %+v %v", epoch, resp, err)
		}
		wait.Within(t, 20*time.Second, "the retried EndTxn v5 to succeed", func() bool {
			retry, err := end(epoch, commit)
			if err != nil {
				return false
			}
			if retry.ProducerEpoch != epoch+1 {
				t.Fatalf("retried EndTxn answered epoch %d, want %d", retry.ProducerEpoch, epoch+1)
			}
			return true
		})
		return epoch + 1
	}

	add(epoch)
	if err := txntest.ProduceAs(ctx, cl, topic, 0, pid, epoch, 0, true, "committed"); err != nil {
		t.Fatal(err)
	}
	old := epoch
	epoch = endDone(epoch, true)
	if err := txntest.ProduceAs(ctx, cl, topic, 0, pid, old, 1, true, "late"); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("late batch of the committed transaction: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// A retry (the epoch before the bump) asking for the other outcome, as
	// Kafka 4.4's endTransaction answers it.
	if _, err := end(old, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("abort with the epoch of the committed transaction: %v, want INVALID_TXN_STATE", err)
	}

	add(epoch)
	if err := txntest.ProduceAs(ctx, cl, topic, 0, pid, epoch, 0, true, "aborted"); err != nil {
		t.Fatal(err)
	}
	epoch = endDone(epoch, false)
	if _, err := end(epoch, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("commit without a transaction: %v, want INVALID_TXN_STATE", err)
	}
	epoch = endDone(epoch, false) // an abort without a transaction

	add(epoch)
	if err := txntest.ProduceAs(ctx, cl, topic, 0, pid, epoch, 0, true, "second"); err != nil {
		t.Fatal(err)
	}
	endDone(epoch, true)

	want := []string{"committed", "second"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer saw %v, want %v", got, want)
	}
}

// TestFranzGoTransactionVersion2: ApiVersions finalizes transaction.version 2,
// so franz-go runs KIP-890's protocol: its produces add their partitions (no
// AddPartitionsToTxn), each end bumps the epoch, and the committed records are
// read once, the aborted ones never.
func TestFranzGoTransactionVersion2(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	tv := slices.IndexFunc(av.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool { return f.Name == "transaction.version" })
	if tv < 0 || av.FinalizedFeatures[tv].MaxVersionLevel != 2 || av.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("finalized features %+v (epoch %d)", av.FinalizedFeatures, av.FinalizedFeaturesEpoch)
	}
	const topic = "tv2-franz"
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), -1) // a client add would fail: only implicit adds work
	prod, _ := n.client(t, kgo.TransactionalID("tv2-franz"), kgo.DefaultProduceTopic(topic), kgo.MaxVersions(versions))
	var want []string
	for i, commit := range []bool{true, false, true, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			v := string(rune('a'+i)) + string(rune('0'+j))
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				want = append(want, v)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	described, err := adm.DescribeTransactions(ctx, "tv2-franz")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["tv2-franz"]; d.ProducerEpoch != 4 {
		t.Fatalf("producer epoch %d after 4 transactions, want 4 (one bump per end): %+v", d.ProducerEpoch, d)
	}
	got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}
