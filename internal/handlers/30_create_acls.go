package handlers

// CreateAcls (key 30), v1-v3 (v2+ flexible): adds ACL bindings through the
// active controller (forwarded when this node is not it). One result per
// creation: INVALID_REQUEST for a binding that cannot be stored; an existing
// binding succeeds. Without an authorizer: SECURITY_DISABLED, with Kafka's message.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) createAcls(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.CreateACLsRequest)
	if h.cfg.Authorizer == nil && ctx.Value(onLinkKey{}) == nil {
		resp := deniedResponse(req, kerr.SecurityDisabled.Code).(*kmsg.CreateACLsResponse)
		for i := range resp.Results {
			msg := msgNoAuthorizerChange
			resp.Results[i].ErrorMessage = &msg
		}
		return reply(resp)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bindings := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
	}
	errs, err := h.cluster.CreateAcls(ctx, bindings)
	h.awaitLocalApply(ctx)
	for i := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		e := err
		if e == nil {
			e = errs[i]
		}
		if e != nil {
			res.ErrorCode = errorCode(e)
			msg := e.Error()
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
