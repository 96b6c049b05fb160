package handlers

// DeleteTopics (key 20), v1-v6. v4+: flexible; v5: error messages; v6: topics by
// name or id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) deleteTopics(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var refs []controller.TopicRef
	if req.Version >= 6 {
		for _, t := range req.Topics {
			ref := controller.TopicRef{ID: t.TopicID}
			if t.Topic != nil {
				ref.Name = *t.Topic
			}
			refs = append(refs, ref)
		}
	} else {
		for _, name := range req.TopicNames {
			refs = append(refs, controller.TopicRef{Name: name})
		}
	}
	results, err := h.cluster.DeleteTopics(ctx, refs)
	h.awaitLocalApply(ctx)
	for i, ref := range refs {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		name, id, rerr := ref.Name, ref.ID, err
		if err == nil {
			name, id, rerr = results[i].Name, results[i].ID, results[i].Err
		}
		if name != "" {
			rt.Topic = &name
		}
		rt.TopicID = id
		if rerr != nil {
			rt.ErrorCode = errorCode(rerr)
			msg := rerr.Error()
			rt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
