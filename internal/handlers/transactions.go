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
	List(f txn.ListFilter) []txn.Described
}

// NextProducerID hands out a producer id from this broker's block (the
// transaction coordinator's source of new ids).
func (h *Handlers) NextProducerID(ctx context.Context) (int64, error) { return h.nextProducerID(ctx) }

// joinTxn adds tps to transaction id on its coordinator, here or on the broker
// leading the id's __transaction_state partition (AddPartitionsToTxn v5): KIP-890's
// implicit add, for Produce v12+ and TxnOffsetCommit v5+. It answers the
// coordinator's code (0: the partitions are in the ongoing transaction).
func (h *Handlers) joinTxn(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition) int16 {
	if h.cfg.Transactions == nil {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	img := h.cluster.Image()
	t := img.Topic(txn.StateTopic)
	if t == nil || len(t.Partitions) == 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	leader := t.Partitions[group.PartitionFor(id, int32(len(t.Partitions)))].Leader
	switch {
	case leader == h.cfg.NodeID:
		return h.cfg.Transactions.AddPartitions(ctx, id, pid, epoch, tps)
	case leader == metadata.NoLeader || h.cfg.AddToRemoteTxn == nil:
		return kerr.CoordinatorNotAvailable.Code
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch = id, pid, epoch
	txn.EachTopic(tps, func(topic string, partitions []int32) {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = topic, partitions
		rt.Topics = append(rt.Topics, tt)
	})
	req.Transactions = append(req.Transactions, rt)
	resp, err := h.cfg.AddToRemoteTxn(ctx, leader, req)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, rt := range resp.Transactions {
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	}
	if len(resp.Transactions) == 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// txnCoordinatorHere tells whether this broker coordinates transactional id id
// (leads its __transaction_state partition).
func (h *Handlers) txnCoordinatorHere(id string) bool {
	t := h.cluster.Image().Topic(txn.StateTopic)
	return h.cfg.Transactions != nil && t != nil && len(t.Partitions) > 0 &&
		t.Partitions[group.PartitionFor(id, int32(len(t.Partitions)))].Leader == h.cfg.NodeID
}

// joinTxnProduceCode is the Produce error for a failed implicit add: the
// coordinator's transient errors become NOT_ENOUGH_REPLICAS, which every client
// retries (as Kafka answers them); fencing keeps Produce's code.
func joinTxnProduceCode(code int16) int16 {
	switch code {
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
