package handlers

// DescribeAcls (key 29), v1-v3 (v2+ flexible): the ACL bindings a filter selects,
// grouped by resource pattern, from this broker's metadata image. Without an
// authorizer it answers SECURITY_DISABLED with Kafka's message, as Kafka does; an
// invalid filter, INVALID_REQUEST.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

// Kafka's messages with SECURITY_DISABLED on a broker without an authorizer,
// which kafka-acls prints: DescribeAcls has one, CreateAcls and DeleteAcls
// another.
const (
	msgNoAuthorizerDescribe = "No Authorizer is configured on the broker"
	msgNoAuthorizerChange   = "No Authorizer is configured."
)

func (h *Handlers) describeAcls(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if h.cfg.Authorizer == nil {
		msg := msgNoAuthorizerDescribe
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, &msg
		return reply(resp)
	}
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if err := f.Validate(); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return reply(resp)
	}
	type pattern struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	index := map[pattern]int{}
	for _, b := range h.cluster.Image().ACLs() {
		if !f.Matches(b) {
			continue
		}
		k := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := index[k]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = k.rt, k.name, k.pt
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			index[k] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return reply(resp)
}
