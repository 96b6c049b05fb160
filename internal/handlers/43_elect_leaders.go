package handlers

// ElectLeaders (key 43), v0-v2 (v2 flexible): preferred-replica election (moves
// leadership back to each partition's first replica when it is live and in the
// ISR). A null partition list means every partition. Unclean election (type 1) is
// refused: Strata elects outside the ISR only for topics that enable
// unclean.leader.election.enable, and then on its own.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) electLeaders(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.ElectionType != 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	var parts []controller.TopicPartitionRef
	if req.Topics != nil {
		parts = []controller.TopicPartitionRef{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.TopicPartitionRef{Topic: t.Topic, Partition: p})
			}
		}
	}
	results, err := h.cluster.ElectLeaders(ctx, parts)
	if err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		return reply(resp)
	}
	h.awaitLocalApply(ctx)
	byTopic := map[string]int{}
	for _, res := range results {
		i, ok := byTopic[res.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[res.Topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = res.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition = res.Partition
		if res.Err != nil {
			p.ErrorCode = errorCode(res.Err)
			msg := res.Err.Error()
			p.ErrorMessage = &msg
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return reply(resp)
}
