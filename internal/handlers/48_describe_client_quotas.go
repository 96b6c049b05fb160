package handlers

// DescribeClientQuotas (key 48), v0-v1 (v1 flexible): the client quotas whose
// entity matches the filter (KIP-546): each component names an entity type
// (user, client-id, ip) matched exactly, as the default, or any; with Strict the
// entity has no other parts. Served from this broker's metadata image. As Kafka:
// an unknown entity type is UNSUPPORTED_VERSION; a type given twice, a match
// string missing for an exact match or given for another match type, and an ip
// component beside a user or client-id one are INVALID_REQUEST.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

func (h *Handlers) describeClientQuotas(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if code, msg := checkQuotaFilter(req.Components); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return reply(resp)
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

// checkQuotaFilter validates a filter's components as Kafka does, returning the
// error code and message for the response (0 when valid).
func checkQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) (int16, string) {
	seen := map[string]bool{}
	for _, c := range components {
		switch {
		case c.EntityType == "":
			return kerr.InvalidRequest.Code, "invalid empty entity type"
		case seen[c.EntityType]:
			return kerr.InvalidRequest.Code, fmt.Sprintf("entity type %s cannot appear more than once in the filter", c.EntityType)
		case c.EntityType != quotaEntityUser && c.EntityType != quotaEntityClientID && c.EntityType != quotaEntityIP:
			return kerr.UnsupportedVersion.Code, "unsupported entity type " + c.EntityType
		case c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil:
			return kerr.InvalidRequest.Code, "an exact match needs a match string"
		case (c.MatchType == kmsg.QuotasMatchTypeDefault || c.MatchType == kmsg.QuotasMatchTypeAny) && c.Match != nil:
			return kerr.InvalidRequest.Code, fmt.Sprintf("match type %v takes no match string", c.MatchType)
		case c.MatchType > kmsg.QuotasMatchTypeAny || c.MatchType < 0:
			return kerr.InvalidRequest.Code, fmt.Sprintf("unknown match type %d", c.MatchType)
		}
		seen[c.EntityType] = true
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return kerr.InvalidRequest.Code, "invalid entity filter component combination: an ip component is not used with a user or client-id component"
	}
	return 0, ""
}

func quotaFilterMatches(req *kmsg.DescribeClientQuotasRequest, e metadata.QuotaEntity) bool {
	parts := map[string]metadata.QuotaName{quotaEntityUser: e.User, quotaEntityClientID: e.ClientID, quotaEntityIP: e.IP}
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
	}{{quotaEntityUser, e.User}, {quotaEntityClientID, e.ClientID}, {quotaEntityIP, e.IP}} {
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
