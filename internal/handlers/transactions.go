package handlers

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/txn"
)

// Transactions is the transaction coordinator as the handlers use it
// (txn.Coordinator). Each call answers one Kafka error code (0: success).
type Transactions interface {
	PartitionFor(transactionalID string) int32
	InitProducerID(ctx context.Context, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, int16)
	AddPartitions(ctx context.Context, id string, pid int64, epoch int16, add []txn.TopicPartition) int16
	VerifyPartitions(id string, pid int64, epoch int16, tps []txn.TopicPartition) int16
	EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, int16)
	// Completed is closed once the change in flight for id is over (already
	// closed when there is none): what a CONCURRENT_TRANSACTIONS answer waits for.
	Completed(id string) <-chan struct{}
	Describe(id string) (txn.Described, int16)
	List(f txn.ListFilter) ([]txn.Described, int16)
}

// NextProducerID hands out a producer id from this broker's block (the
// transaction coordinator's source of new ids).
func (h *Handlers) NextProducerID(ctx context.Context) (int64, error) { return h.nextProducerID(ctx) }

// joinTxn adds tps to transaction id on its coordinator, here or on the broker
// leading the id's __transaction_state partition (AddPartitionsToTxn v5): KIP-890's
// implicit add, for Produce v12+ and TxnOffsetCommit v5+. It answers the
// coordinator's code (0: the partitions are in the ongoing transaction).
func (h *Handlers) joinTxn(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition) int16 {
	return h.coordinateTxn(ctx, id, pid, epoch, tps, false)
}

// verifyTxn asks the coordinator of transactional id whether tps are in its
// ongoing transaction (AddPartitionsToTxn VerifyOnly, KIP-890 part 1), here
// or on the coordinator's broker, and answers its code (0: they are).
func (h *Handlers) verifyTxn(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition) int16 {
	return h.coordinateTxn(ctx, id, pid, epoch, tps, true)
}

// coordinateTxn is joinTxn, or verifyTxn with verifyOnly: the first error of
// coordinateTxnEach, or 0.
func (h *Handlers) coordinateTxn(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool) int16 {
	return firstError(h.coordinateTxnEach(ctx, id, pid, epoch, tps, verifyOnly))
}

// coordinateTxnEach adds tps to transaction id (or, verifyOnly, asks whether
// they are in it) at its coordinator, here or on the coordinator's broker in
// one AddPartitionsToTxn v5 for all of them, and answers a code per partition
// of tps, in order. A failed request to the coordinator's broker is
// NETWORK_EXCEPTION, a partition its answer leaves out
// COORDINATOR_NOT_AVAILABLE.
func (h *Handlers) coordinateTxnEach(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool) []int16 {
	codes := make([]int16, len(tps))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	if h.cfg.Transactions == nil {
		return all(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	img := h.cluster.Image()
	t := img.Topic(txn.StateTopic)
	if t == nil || len(t.Partitions) == 0 {
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	leader := t.Partitions[group.PartitionFor(id, int32(len(t.Partitions)))].Leader
	switch {
	case leader == h.cfg.NodeID && verifyOnly:
		// Each partition answered on its own, as the coordinator's broker
		// answers a VerifyOnly add.
		for i := range tps {
			codes[i] = h.cfg.Transactions.VerifyPartitions(id, pid, epoch, tps[i:i+1])
		}
		return codes
	case leader == h.cfg.NodeID:
		return all(h.cfg.Transactions.AddPartitions(ctx, id, pid, epoch, tps))
	case leader == metadata.NoLeader || h.cfg.AddToRemoteTxn == nil:
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, pid, epoch, verifyOnly
	txn.EachTopic(tps, func(topic string, partitions []int32) {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = topic, partitions
		rt.Topics = append(rt.Topics, tt)
	})
	req.Transactions = append(req.Transactions, rt)
	resp, err := h.cfg.AddToRemoteTxn(ctx, leader, req)
	switch {
	case err != nil:
		return all(kerr.NetworkException.Code)
	case resp.ErrorCode != 0:
		return all(resp.ErrorCode)
	}
	at := make(map[txn.TopicPartition][]int, len(tps))
	for i, tp := range tps {
		at[tp] = append(at[tp], i)
	}
	all(kerr.CoordinatorNotAvailable.Code)
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != id {
			continue
		}
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				for _, i := range at[txn.TopicPartition{Topic: tt.Topic, Partition: p.Partition}] {
					codes[i] = p.ErrorCode
				}
			}
		}
	}
	return codes
}

// txnCoordinatorHere tells whether this broker coordinates transactional id id
// (leads its __transaction_state partition).
func (h *Handlers) txnCoordinatorHere(id string) bool {
	t := h.cluster.Image().Topic(txn.StateTopic)
	return h.cfg.Transactions != nil && t != nil && len(t.Partitions) > 0 &&
		t.Partitions[group.PartitionFor(id, int32(len(t.Partitions)))].Leader == h.cfg.NodeID
}

// txnProduceCode is the Produce error, for a request of version, when the
// coordinator did not confirm the partition is in the producer's transaction:
// a failed verification (v11 and older) or implicit add (v12+). As Kafka 4
// answers (ReplicaManager, AddPartitionsToTxnManager): the coordinator's
// transient errors become NOT_ENOUGH_REPLICAS, which every client retries
// without a metadata refresh, except CONCURRENT_TRANSACTIONS for v12+, which
// those clients retry (KAFKA-18662); fencing is INVALID_PRODUCER_EPOCH; a
// partition not in the transaction is TRANSACTION_ABORTABLE for v11+ and
// INVALID_TXN_STATE before (clients that predate it), as is a refused
// verification request (CLUSTER_AUTHORIZATION_FAILED).
func txnProduceCode(code, version int16) int16 {
	switch code {
	case kerr.ConcurrentTransactions.Code:
		if version >= 12 {
			return code
		}
		return kerr.NotEnoughReplicas.Code
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NetworkException.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code
	case kerr.TransactionAbortable.Code:
		if version <= 10 {
			return kerr.InvalidTxnState.Code
		}
	}
	return code
}
