package handlers

// CreatePartitions (key 37), v0-v3 (v2+ flexible). Only increases; keyed records
// map to different partitions afterwards.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) createPartitions(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	reqs := make([]controller.CreatePartitions, len(req.Topics))
	for i, t := range req.Topics {
		reqs[i] = controller.CreatePartitions{Topic: t.Topic, Count: t.Count}
		for _, a := range t.Assignment {
			reqs[i].Assignment = append(reqs[i].Assignment, a.Replicas)
		}
	}
	results, err := h.cluster.CreatePartitions(ctx, reqs, req.ValidateOnly)
	h.awaitLocalApply(ctx)
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rerr := err
		if err == nil {
			rerr = results[i].Err
		}
		if rerr != nil {
			rt.ErrorCode = errorCode(rerr)
			msg := rerr.Error()
			rt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
