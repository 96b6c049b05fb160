package handlers

// IncrementalAlterConfigs (key 44), v0-v1 (v1 flexible): set, delete, append and
// subtract operations on individual keys. Another broker's id and a null value
// but for DELETE are INVALID_REQUEST, as for AlterConfigs (33_alter_configs.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) incrementalAlterConfigs(ctx context.Context, ci *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	if refused := h.refuseOtherBrokers(ctx, len(req.Resources), func(i int) (int8, string) {
		return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
	}); refused != nil {
		resp.Resources = answerRefused(req.Resources, refused, func(kept []kmsg.IncrementalAlterConfigsRequestResource) []kmsg.IncrementalAlterConfigsResponseResource {
			sub, keptReq := *r, *req
			keptReq.Resources, sub.Msg = kept, &keptReq
			return h.incrementalAlterConfigs(ctx, ci, &sub).Msg.(*kmsg.IncrementalAlterConfigsResponse).Resources
		}, func(rr kmsg.IncrementalAlterConfigsRequestResource, err error) kmsg.IncrementalAlterConfigsResponseResource {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode, res.ErrorMessage = configError(nil, err, nil, nil)
			return res
		})
		return reply(resp)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	refused := refuseNullConfigs(len(req.Resources), func(i int) (int8, string, []configValue) {
		rr := req.Resources[i]
		vals := make([]configValue, len(rr.Configs))
		for j, c := range rr.Configs {
			vals[j] = configValue{c.Name, c.Value, c.Op == kmsg.IncrementalAlterConfigOpDelete}
		}
		return int8(rr.ResourceType), rr.ResourceName, vals
	})
	var reqs []controller.IncrementalAlterConfigsResource
	for i, rr := range req.Resources {
		if refused[i] != nil {
			continue
		}
		cr := controller.IncrementalAlterConfigsResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			op := controller.AlterConfigOp{Key: c.Name, Op: controller.ConfigOp(c.Op)}
			if c.Value != nil {
				op.Value = *c.Value
			}
			cr.Ops = append(cr.Ops, op)
		}
		reqs = append(reqs, cr)
	}
	results, err := callController(ctx, h, reqs, func(reqs []controller.IncrementalAlterConfigsResource) ([]controller.ConfigResult, error) {
		return h.cluster.IncrementalAlterConfigs(ctx, reqs, req.ValidateOnly)
	})
	next := 0
	for i, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = configError(err, refused[i], results, &next)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}
