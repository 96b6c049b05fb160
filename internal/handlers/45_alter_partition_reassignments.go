package handlers

// AlterPartitionReassignments (key 45), v0-v1 (both flexible; KIP-455): moves
// partitions to new replica sets, or cancels a move (null replicas). Answered
// by the active controller (forwarded from other brokers) as soon as each
// reassignment has started; the move itself goes on in the background and
// ListPartitionReassignments (46) shows it until it completes. v1 adds
// AllowReplicationFactorChange (KIP-860): false refuses a target of another
// size with INVALID_REPLICATION_FACTOR. Per-partition errors:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, repeated or
// unregistered replicas), NO_REASSIGNMENT_IN_PROGRESS (cancel of none). A
// request failed as a whole (not authorized, not the controller, the
// controller failing it) carries its code at the top and on every partition,
// as Kafka's answers it: Kafka's AdminClient counts the partitions even then.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterPartitionReassignments(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	var reqs []controller.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqs = append(reqs, controller.Reassignment{
				Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas,
				KeepReplicationFactor: req.Version >= 1 && !req.AllowReplicationFactorChange,
			})
		}
	}
	errs, err := h.cluster.AlterPartitionReassignments(ctx, reqs)
	if err != nil {
		msg := err.Error()
		failReassignments(req, resp, controllerErrorCode(err), &msg)
		return reply(resp)
	}
	h.awaitLocalApply(ctx)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			if e := errs[i]; e != nil {
				rp.ErrorCode = errorCode(e)
				msg := e.Error()
				rp.ErrorMessage = &msg
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}

// failReassignments answers every partition of req, and resp as a whole, with
// code and msg.
func failReassignments(req *kmsg.AlterPartitionAssignmentsRequest, resp *kmsg.AlterPartitionAssignmentsResponse, code int16, msg *string) {
	resp.ErrorCode, resp.ErrorMessage = code, msg
	resp.Topics = resp.Topics[:0]
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}
