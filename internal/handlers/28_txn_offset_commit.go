package handlers

// TxnOffsetCommit (key 28), v0-v5 (v2+: leader epochs; v3+: generation, member
// and instance ids (KIP-447), flexible). Served by the group coordinator: the offsets are written in a
// transactional batch of the producer on the group's __consumer_offsets partition
// and become the group's committed offsets only when the transaction commits (see
// package group, txn_offsets.go). The answer comes once they are appended.
//   v5 (KIP-890, transaction version 2): the client sends no AddOffsetsToTxn;
//   the group's __consumer_offsets partition is first added to the transaction
//   at its coordinator, whose error (CONCURRENT_TRANSACTIONS,
//   INVALID_PRODUCER_EPOCH, ...) then answers every partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) txnOffsetCommit(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	return waitFor(func(ctx context.Context) kmsg.Response {
		if req.Version >= 5 {
			if code := h.joinOffsetsTxn(ctx, req); code != 0 {
				return deniedResponse(req, code) // code on every partition
			}
		}
		return h.groups.TxnOffsetCommit(ctx, req)
	})
}

// joinOffsetsTxn adds the group's __consumer_offsets partition to the
// producer's transaction.
func (h *Handlers) joinOffsetsTxn(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) int16 {
	t := h.cluster.Image().Topic(group.OffsetsTopic)
	if t == nil || len(t.Partitions) == 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: group.PartitionFor(req.Group, int32(len(t.Partitions)))}
	return h.joinTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
}
