package handlers

// IncrementalAlterConfigs (key 44), v0-v1 (v1 flexible): set, delete, append and
// subtract operations on individual keys.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) incrementalAlterConfigs(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	reqs := make([]controller.IncrementalAlterConfigsResource, len(req.Resources))
	for i, rr := range req.Resources {
		reqs[i] = controller.IncrementalAlterConfigsResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			op := controller.AlterConfigOp{Key: c.Name, Op: controller.ConfigOp(c.Op)}
			if c.Value != nil {
				op.Value = *c.Value
			}
			reqs[i].Ops = append(reqs[i].Ops, op)
		}
	}
	results, err := h.cluster.IncrementalAlterConfigs(ctx, reqs, req.ValidateOnly)
	h.awaitLocalApply(ctx)
	for i, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = configError(err, results, i)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}
