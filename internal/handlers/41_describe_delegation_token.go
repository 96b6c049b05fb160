package handlers

// DescribeDelegationToken (key 41), v1-v3 (v2+ flexible; v3 adds each
// token's requester), from this broker's metadata image. Refused with
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED as CreateDelegationToken is, and
// DELEGATION_TOKEN_AUTH_DISABLED without a token secret key. Owners null
// lists every token the principal may see, an empty list none; a token is
// listed when one of the owners asked for owns or renews it, and the
// principal owns or renews it, or may DESCRIBE the DELEGATION_TOKEN or
// DESCRIBE_TOKENS on its owner's User resource (Kafka's filterToken). Tokens
// past their expiry are listed until the controller removes them.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/sasl"
)

func (h *Handlers) describeDelegationToken(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	switch {
	case !tokenRequestsAllowed(c):
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return reply(resp)
	case h.cfg.TokenSecretKey == "":
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
		return reply(resp)
	case req.Owners != nil && len(req.Owners) == 0:
		return reply(resp)
	}
	var owners []string
	for _, o := range req.Owners {
		owners = append(owners, o.PrincipalType+":"+o.PrincipalName)
	}
	principal := c.Principal()
	for _, tok := range h.cluster.Image().DelegationTokens() {
		if owners != nil && !slices.ContainsFunc(owners, tok.OwnerOrRenewer) {
			continue
		}
		if !tok.OwnerOrRenewer(principal) &&
			!h.authorize(ctx, c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeDelegationToken, tok.ID) &&
			!h.authorize(ctx, c, kmsg.ACLOperationDescribeTokens, kmsg.ACLResourceTypeUser, tok.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(tok.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(tok.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = tok.IssueTimestamp, tok.ExpiryTimestamp, tok.MaxTimestamp
		d.TokenID, d.HMAC = tok.ID, sasl.TokenHMAC(h.cfg.TokenSecretKey, tok.ID)
		for _, rn := range tok.Renewers {
			dr := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			dr.PrincipalType, dr.PrincipalName = splitPrincipal(rn)
			d.Renewers = append(d.Renewers, dr)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return reply(resp)
}
