package handlers

// ListPartitionReassignments (key 46), v0 (flexible; KIP-455): the ongoing
// reassignments with their full replica set and the replicas being added and
// removed. Null topics lists every ongoing reassignment; partitions that are
// not being reassigned, and unknown topics, are left out. Answered from the
// active controller's image (forwarded from other brokers).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) listPartitionReassignments(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var topics map[string][]int32
	if req.Topics != nil {
		topics = map[string][]int32{}
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			if topics[t.Topic] == nil {
				topics[t.Topic] = []int32{}
			}
		}
	}
	for _, ra := range controller.ListReassignments(h.cluster.Image(), topics) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != ra.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = ra.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas = ra.Partition, ra.Replicas
		rp.AddingReplicas, rp.RemovingReplicas = ra.Adding, ra.Removing
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return reply(resp)
}
