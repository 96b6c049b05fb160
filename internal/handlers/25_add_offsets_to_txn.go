package handlers

// AddOffsetsToTxn (key 25), v0-v4 (v2+: PRODUCER_FENCED for a fenced epoch,
// INVALID_PRODUCER_EPOCH before; v3+ flexible; v4, KIP-890, says only that the
// client takes TRANSACTION_ABORTABLE: a Kafka 4.4 broker answers it as v3, and so
// does this one, whose coordinator gives that code to VerifyOnly adds alone).
// Adds the group's partition of __consumer_offsets to the producer's transaction,
// so that its TxnOffsetCommit records there get the transaction's marker. Errors
// are the coordinator's, as for AddPartitionsToTxn; as in Kafka the client needs
// READ on the group (GROUP_AUTHORIZATION_FAILED) besides WRITE on the
// transactional id, and an empty transactional id is INVALID_REQUEST.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) addOffsetsToTxn(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case h.cfg.Transactions == nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	case !h.authorize(ctx, c, kmsg.ACLOperationRead, resGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply(resp)
	case req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	img := h.cluster.Image()
	if img.Topic(group.OffsetsTopic) == nil {
		h.ensureInternalTopic(ctx, group.OffsetsTopic)
		img = h.cluster.Image()
	}
	t := img.Topic(group.OffsetsTopic)
	if t == nil || len(t.Partitions) == 0 {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply(resp)
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: group.PartitionFor(req.Group, int32(len(t.Partitions)))}
	code := h.cfg.Transactions.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	return reply(resp)
}
