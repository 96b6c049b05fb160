package handlers

// AlterClientQuotas (key 49), v0-v1 (v1 flexible): sets and removes
// producer_byte_rate, consumer_byte_rate, request_percentage (KIP-124,
// request_quota.go) and controller_mutation_rate (KIP-599, mutation_quota.go) of
// users, client ids and user/client id pairs, and connection_creation_rate
// (KIP-612, enforced by protocol.Server through quota.Manager.RecordConnection)
// of IP addresses (a null name is the default entity), through the active
// controller (forwarded when this node is not it). One result per entry, all or
// nothing per entry: INVALID_REQUEST for an unknown entity type or key, an ip
// beside a user or client id, a name that is not an IP address, a key the
// entity does not take, or a value that is not positive (or, for
// connection_creation_rate, not a whole number). As Kafka checks only the keys
// it sets, removing a key that is not set (whatever the key) succeeds.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterClientQuotas(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	entries := make([]controller.QuotaAlteration, len(req.Entries))
	parseErrs := make([]error, len(req.Entries))
	for i, e := range req.Entries {
		entries[i].Entity, parseErrs[i] = parseQuotaEntity(e.Entity)
		for _, op := range e.Ops {
			entries[i].Ops = append(entries[i].Ops, controller.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		if parseErrs[i] != nil {
			entries[i].Ops = nil
		}
	}
	errs, err := h.cluster.AlterClientQuotas(ctx, entries, req.ValidateOnly)
	h.awaitLocalApply(ctx)
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, part := range e.Entity {
			re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: part.Type, Name: part.Name})
		}
		rerr := err
		if rerr == nil {
			rerr = parseErrs[i]
		}
		if rerr == nil {
			rerr = errs[i]
		}
		if rerr != nil {
			re.ErrorCode = errorCode(rerr)
			msg := rerr.Error()
			re.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, re)
	}
	return reply(resp)
}

// parseQuotaEntity reads an entity: a user and/or a client id, or an ip, each
// once (metadata.ValidateQuota checks the combination).
func parseQuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range parts {
		var n *metadata.QuotaName
		switch p.Type {
		case quotaEntityUser:
			n = &e.User
		case quotaEntityClientID:
			n = &e.ClientID
		case quotaEntityIP:
			n = &e.IP
		default:
			return e, &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: fmt.Sprintf("unsupported quota entity type %q", p.Type)}
		}
		if n.Set {
			return e, &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: fmt.Sprintf("entity type %q given twice", p.Type)}
		}
		n.Set = true
		if p.Name == nil {
			n.Default = true
		} else {
			n.Name = *p.Name
		}
	}
	return e, nil
}
