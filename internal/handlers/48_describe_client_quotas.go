package handlers

// DescribeClientQuotas (key 48), v0-v1 (v1 flexible): the client quotas whose
// entity matches the filter (KIP-546): each component names an entity type
// (user, client-id) matched exactly, as the default, or any; with Strict the
// entity has no other parts. Served from this broker's metadata image.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
)

func (h *Handlers) describeClientQuotas(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	seen := map[string]bool{}
	for _, c := range req.Components {
		if c.EntityType != quotaEntityUser && c.EntityType != quotaEntityClientID || seen[c.EntityType] ||
			c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil || c.MatchType > kmsg.QuotasMatchTypeAny {
			resp.ErrorCode = kerr.InvalidRequest.Code
			msg := "invalid quota filter component for entity type " + c.EntityType
			resp.ErrorMessage = &msg
			return reply(resp)
		}
		seen[c.EntityType] = true
	}
	img := h.cluster.Image()
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // nullable: null only with an error (Java's client needs the array)
	for _, e := range img.QuotaEntities() {
		if !quotaFilterMatches(req, e) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, part := range quotaEntityParts(e) {
			entry.Entity = append(entry.Entity, kmsg.DescribeClientQuotasResponseEntryEntity{Type: part.typ, Name: part.name})
		}
		for k, v := range img.QuotaValues(e) {
			entry.Values = append(entry.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: v})
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return reply(resp)
}

func quotaFilterMatches(req *kmsg.DescribeClientQuotasRequest, e metadata.QuotaEntity) bool {
	parts := map[string]metadata.QuotaName{quotaEntityUser: e.User, quotaEntityClientID: e.ClientID}
	for _, c := range req.Components {
		n := parts[c.EntityType]
		switch {
		case !n.Set:
			return false
		case c.MatchType == kmsg.QuotasMatchTypeExact && (n.Default || n.Name != *c.Match):
			return false
		case c.MatchType == kmsg.QuotasMatchTypeDefault && !n.Default:
			return false
		}
		delete(parts, c.EntityType)
	}
	if req.Strict {
		for _, n := range parts {
			if n.Set {
				return false
			}
		}
	}
	return true
}

type quotaEntityPart struct {
	typ  string
	name *string // nil: the default
}

func quotaEntityParts(e metadata.QuotaEntity) []quotaEntityPart {
	var parts []quotaEntityPart
	for _, p := range []struct {
		typ string
		n   metadata.QuotaName
	}{{quotaEntityUser, e.User}, {quotaEntityClientID, e.ClientID}} {
		if !p.n.Set {
			continue
		}
		part := quotaEntityPart{typ: p.typ}
		if !p.n.Default {
			name := p.n.Name
			part.name = &name
		}
		parts = append(parts, part)
	}
	return parts
}
