package handlers

// TxnOffsetCommit (key 28), v0-v6 (v2+: leader epochs; v3+: generation, member
// and instance ids (KIP-447), flexible; v6 (KIP-1319): topic ids, resolved
// before the request is served (topic_ids.go), an unknown one UNKNOWN_TOPIC_ID;
// a group not found is GROUP_ID_NOT_FOUND and a KIP-848 member's wrong epoch
// STALE_MEMBER_EPOCH, both ILLEGAL_GENERATION before v6, as Kafka 4.4 answers). Served by the group coordinator: the offsets are written in a
// transactional batch of the producer on the group's __consumer_offsets partition
// and become the group's committed offsets only when the transaction commits (see
// package group, txn_offsets.go). The answer comes once they are appended; an
// epoch older than the producer's on that partition (a fenced zombie's) is
// refused there with INVALID_PRODUCER_EPOCH, as Kafka's log refuses it.
//   v5 (KIP-890, transaction version 2): the client sends no AddOffsetsToTxn;
//   the group's __consumer_offsets partition is first added to the transaction
//   at its coordinator, whose error (CONCURRENT_TRANSACTIONS,
//   INVALID_PRODUCER_EPOCH, ..., mapped by txnOffsetCommitCode) then answers
//   every partition.
//   v0-v4 (KIP-890 part 1, as Kafka 4 verifies older clients): unless the
//   producer's transaction at its epoch is open on the group's
//   __consumer_offsets partition already, the transaction coordinator is asked
//   whether that partition is in the ongoing transaction (AddPartitionsToTxn
//   VerifyOnly) before the offsets are written, and the group coordinator's
//   append checks the answer is still valid (a marker of the producer
//   meanwhile voids it: COORDINATOR_NOT_AVAILABLE, and the retry is asked
//   again). Not in the transaction: TRANSACTION_ABORTABLE to v4,
//   INVALID_TXN_STATE before; the other answers as Kafka's group coordinator
//   maps them (txnOffsetCommitCode).
// As in Kafka the client needs WRITE on the transactional id and READ on the
// group (else every partition is refused); a partition of a topic it may not
// READ is TOPIC_AUTHORIZATION_FAILED, an unknown one UNKNOWN_TOPIC_OR_PARTITION,
// and the others are committed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) txnOffsetCommit(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	if !h.authorize(ctx, c, kmsg.ACLOperationRead, resGroup, req.Group) {
		return reply(deniedResponse(req, kerr.GroupAuthorizationFailed.Code))
	}
	refused := h.dropRefusedTxnCommits(ctx, c, req)
	if (len(refused) > 0 || req.Version >= 6) && len(req.Topics) == 0 { // v6: its ids all unknown (topic_ids.go)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = refused
		return reply(resp)
	}
	return waitFor(func(ctx context.Context) kmsg.Response {
		var resp *kmsg.TxnOffsetCommitResponse
		code := int16(0)
		if req.Version >= 5 {
			code = txnOffsetCommitCode(h.joinOffsetsTxn(ctx, req), req.Version)
		} else {
			ctx, code = h.verifyOffsetsTxn(ctx, req)
		}
		if code != 0 {
			resp = deniedResponse(req, code).(*kmsg.TxnOffsetCommitResponse) // code on every partition
		}
		if resp == nil {
			resp = h.groups.TxnOffsetCommit(ctx, req)
		}
		resp.Topics = foldTopics(refused, resp.Topics, func(t *kmsg.TxnOffsetCommitResponseTopic) (string, *[]kmsg.TxnOffsetCommitResponseTopicPartition) {
			return t.Topic, &t.Partitions
		})
		return resp
	})
}

// dropRefusedTxnCommits takes the partitions of topics the client may not
// READ (TOPIC_AUTHORIZATION_FAILED) and of unknown topics or partitions
// (UNKNOWN_TOPIC_OR_PARTITION) out of a TxnOffsetCommit and returns their
// answers, as Kafka's broker does before the coordinator sees the request.
func (h *Handlers) dropRefusedTxnCommits(ctx context.Context, c *protocol.ConnInfo, req *kmsg.TxnOffsetCommitRequest) []kmsg.TxnOffsetCommitResponseTopic {
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	img := h.cluster.Image()
	var refused []kmsg.TxnOffsetCommitResponseTopic
	var kept []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		known := t
		known.Partitions = nil
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			code := int16(0)
			switch {
			case !readable(t.Topic):
				code = kerr.TopicAuthorizationFailed.Code
			case img.Partition(t.Topic, p.Partition) == nil:
				code = kerr.UnknownTopicOrPartition.Code
			default:
				known.Partitions = append(known.Partitions, p)
				continue
			}
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			refused = append(refused, rt)
		}
		if len(known.Partitions) > 0 {
			kept = append(kept, known)
		}
	}
	if refused != nil {
		req.Topics = kept
	}
	return refused
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

// verifyOffsetsTxn verifies a TxnOffsetCommit of v4 or older with the
// transaction coordinator before the group coordinator writes it (KIP-890
// part 1; replica/verify.go): it returns ctx carrying the verification guard
// for the group coordinator's append, or the code that answers every
// partition. A group whose __consumer_offsets partition is not led here is
// left to the group coordinator (NOT_COORDINATOR).
func (h *Handlers) verifyOffsetsTxn(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (context.Context, int16) {
	img := h.cluster.Image()
	t := img.Topic(group.OffsetsTopic)
	if t == nil || len(t.Partitions) == 0 || len(req.Topics) == 0 {
		return ctx, 0
	}
	index := group.PartitionFor(req.Group, int32(len(t.Partitions)))
	p, err := h.leaderPartition(img, group.OffsetsTopic, index)
	if err != nil {
		return ctx, 0
	}
	guard := p.StartTxnVerification(req.ProducerID, req.ProducerEpoch)
	if guard != 0 {
		tps := []txn.TopicPartition{{Topic: group.OffsetsTopic, Partition: index}}
		if code := h.verifyTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps); code != 0 {
			p.CancelTxnVerification(req.ProducerID, guard)
			return ctx, txnOffsetCommitCode(code, req.Version)
		}
	}
	return replica.WithVerificationGuard(ctx, guard), 0
}

// txnOffsetCommitCode is the TxnOffsetCommit error, for a request of
// version, when the coordinator did not confirm the offsets partition is in
// the producer's transaction, as Kafka 4's group coordinator answers it:
// fencing is INVALID_PRODUCER_EPOCH; a partition not in the transaction is
// TRANSACTION_ABORTABLE for v4 and INVALID_TXN_STATE before (clients that
// predate it), as is a refused verification request
// (CLUSTER_AUTHORIZATION_FAILED); a failed request to the coordinator's broker
// is COORDINATOR_LOAD_IN_PROGRESS (clients retry it without looking the
// coordinator up again); the coordinator's own codes (CONCURRENT_TRANSACTIONS,
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) as they are.
func txnOffsetCommitCode(code, version int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code
	case kerr.NetworkException.Code:
		return kerr.CoordinatorLoadInProgress.Code
	case kerr.TransactionAbortable.Code:
		if version < 4 {
			return kerr.InvalidTxnState.Code
		}
	}
	return code
}
