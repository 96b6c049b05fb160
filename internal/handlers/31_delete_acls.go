package handlers

// DeleteAcls (key 31), v1-v3 (v2+ flexible): removes the ACL bindings each
// filter matches, through the active controller (forwarded when this node is not
// it); each result lists the bindings its filter matched. Without an authorizer:
// SECURITY_DISABLED, with Kafka's message.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) deleteAcls(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DeleteACLsRequest)
	if h.cfg.Authorizer == nil && ctx.Value(onLinkKey{}) == nil {
		resp := deniedResponse(req, kerr.SecurityDisabled.Code).(*kmsg.DeleteACLsResponse)
		for i := range resp.Results {
			msg := msgNoAuthorizerChange
			resp.Results[i].ErrorMessage = &msg
		}
		return reply(resp)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
	}
	results, err := h.cluster.DeleteAcls(ctx, filters)
	h.awaitLocalApply(ctx)
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		e := err
		if e == nil {
			e = results[i].Err
		}
		if e != nil {
			res.ErrorCode = errorCode(e)
			msg := e.Error()
			res.ErrorMessage = &msg
		} else {
			for _, b := range results[i].Matched {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
