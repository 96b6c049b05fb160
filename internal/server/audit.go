package server

import (
	"context"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// Audit lines. Every one is written by auditLog (component=audit, audit=true)
// with an event attribute:
//
//	authentication  a SASL login on the Kafka listener, or a credential check on
//	                the HTTP listener that failed (result=success|failure)
//	authorization   an HTTP request refused by the ACLs (result=denied)
//	acl_change      CreateAcls / DeleteAcls: one line per binding created or per
//	                deletion filter (action=create|delete)
//	user_change     AlterUserScramCredentials: one line per upsertion or deletion
//	                (action=upsert|delete), and --add-scram at start
//	quota_change    AlterClientQuotas: one line per entity changed
//
// Change lines carry the principal who asked (by), the client's address
// (remote) and the result: "success" or the Kafka error name. They are written
// by the broker that took the request from the client, after the answer (a
// request forwarded to the controller is logged once, here).

// auditChanges wraps the Kafka listener's handler so that ACL, user and quota
// changes write audit lines.
func (n *Node) auditChanges(h protocol.Handler) protocol.Handler {
	audit := n.auditLog()
	return protocol.HandlerFunc(func(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		resp := h.Handle(ctx, c, r)
		switch r.Key {
		case 30, 31, 49, 51:
		default:
			return resp
		}
		log := func(out protocol.Response) {
			if out.Msg != nil {
				auditChange(audit.With("by", c.Principal(), "remote", c.RemoteAddr.String()), r.Msg, out.Msg)
			}
		}
		if resp.Wait != nil {
			wait := resp.Wait
			resp.Wait = func(ctx context.Context) protocol.Response {
				out := wait(ctx)
				log(out)
				return out
			}
			return resp
		}
		log(resp)
		return resp
	})
}

// auditChange writes the lines of one change request and its response.
func auditChange(log *slog.Logger, req kmsg.Request, resp kmsg.Response) {
	switch req := req.(type) {
	case *kmsg.CreateACLsRequest:
		res := resp.(*kmsg.CreateACLsResponse).Results
		for i, c := range req.Creations {
			code := int16(0)
			if i < len(res) {
				code = res[i].ErrorCode
			}
			log.Info("ACL created", "event", "acl_change", "action", "create", "result", resultOf(code),
				"resource_type", c.ResourceType.String(), "resource", c.ResourceName, "pattern", c.ResourcePatternType.String(),
				"principal", c.Principal, "host", c.Host, "operation", c.Operation.String(), "permission", c.PermissionType.String())
		}
	case *kmsg.DeleteACLsRequest:
		res := resp.(*kmsg.DeleteACLsResponse).Results
		for i, f := range req.Filters {
			code, deleted := int16(0), 0
			if i < len(res) {
				code, deleted = res[i].ErrorCode, len(res[i].MatchingACLs)
			}
			log.Info("ACLs deleted", "event", "acl_change", "action", "delete", "result", resultOf(code), "deleted", deleted,
				"resource_type", f.ResourceType.String(), "resource", orElse(f.ResourceName, "any"), "pattern", f.ResourcePatternType.String(),
				"principal", orElse(f.Principal, "any"), "host", orElse(f.Host, "any"), "operation", f.Operation.String(), "permission", f.PermissionType.String())
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		codes := map[string]int16{}
		for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			codes[r.User] = r.ErrorCode
		}
		for _, d := range req.Deletions {
			log.Info("SCRAM credential deleted", "event", "user_change", "action", "delete", "result", resultOf(codes[d.Name]),
				"user", d.Name, "mechanism", scramName(d.Mechanism))
		}
		for _, u := range req.Upsertions {
			log.Info("SCRAM credential set", "event", "user_change", "action", "upsert", "result", resultOf(codes[u.Name]),
				"user", u.Name, "mechanism", scramName(u.Mechanism), "iterations", u.Iterations)
		}
	case *kmsg.AlterClientQuotasRequest:
		res := resp.(*kmsg.AlterClientQuotasResponse).Entries
		for i, e := range req.Entries {
			code := int16(0)
			if i < len(res) {
				code = res[i].ErrorCode
			}
			entity := make([]string, len(e.Entity))
			for j, c := range e.Entity {
				entity[j] = c.Type + "=" + orElse(c.Name, "<default>")
			}
			ops := make([]string, len(e.Ops))
			for j, op := range e.Ops {
				if op.Remove {
					ops[j] = "-" + op.Key
				} else {
					ops[j] = op.Key
				}
			}
			log.Info("client quota changed", "event", "quota_change", "result", resultOf(code), "validate_only", req.ValidateOnly,
				"entity", strings.Join(entity, ","), "keys", strings.Join(ops, ","))
		}
	}
}

// resultOf is "success", or the Kafka error name of code.
func resultOf(code int16) string {
	if code == 0 {
		return "success"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return "UNKNOWN_SERVER_ERROR"
}

// orElse is a nullable string's value, or null's meaning.
func orElse(s *string, null string) string {
	if s == nil {
		return null
	}
	return *s
}

func scramName(m int8) string { return metadata.ScramMechanism(m).String() }
