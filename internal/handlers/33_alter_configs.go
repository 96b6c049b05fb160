package handlers

// AlterConfigs (key 33), v0-v2 (v2 flexible): a resource's dynamic configs become
// exactly the given set. IncrementalAlterConfigs (key 44) is the modern form.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterConfigs(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	reqs := make([]controller.AlterConfigsResource, len(req.Resources))
	for i, rr := range req.Resources {
		reqs[i] = controller.AlterConfigsResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName, Configs: map[string]string{}}
		for _, c := range rr.Configs {
			if c.Value != nil {
				reqs[i].Configs[c.Name] = *c.Value
			}
		}
	}
	results, err := h.cluster.AlterConfigs(ctx, reqs, req.ValidateOnly)
	h.awaitLocalApply(ctx)
	for i, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = configError(err, results, i)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

// configError is the code and message for resource i of a config change.
func configError(err error, results []controller.ConfigResult, i int) (int16, *string) {
	if err == nil {
		err = results[i].Err
	}
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return errorCode(err), &msg
}
