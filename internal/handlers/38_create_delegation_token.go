package handlers

// CreateDelegationToken (key 38), v1-v3 (v2+ flexible; v3 names an owner
// other than the requester, KIP-373). Refused with
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a connection without SASL or a TLS
// client certificate, or authenticated with a token; a token for another
// owner needs CREATE_TOKENS on the owner's User resource
// (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be User principals
// (INVALID_PRINCIPAL_TYPE); an owner name without a type is INVALID_REQUEST
// (Kafka 4.4: UNKNOWN_SERVER_ERROR). Then the active controller creates it
// (DELEGATION_TOKEN_AUTH_DISABLED without a token secret key) and the answer
// carries the token's id and HMAC.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) createDelegationToken(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	if !onLink(ctx) {
		requester := c.Principal()
		owner := requester
		if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
			owner = nullable(req.OwnerPrincipalType) + ":" + *req.OwnerPrincipalName
		}
		refuse := func(code int16) protocol.Response {
			setTokenPrincipals(resp, owner, requester)
			resp.ErrorCode = code
			resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
			return reply(resp)
		}
		switch {
		case req.OwnerPrincipalType == nil && req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "":
			// Kafka 4.4 fails on the null type (UNKNOWN_SERVER_ERROR).
			owner = requester
			return refuse(kerr.InvalidRequest.Code)
		case !tokenRequestsAllowed(c):
			return refuse(kerr.DelegationTokenRequestNotAllowed.Code)
		case owner != requester && !h.authorize(ctx, c, kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner):
			return refuse(kerr.DelegationTokenAuthorizationFailed.Code)
		}
		for _, rn := range req.Renewers {
			if !controller.IsUserPrincipal(rn.PrincipalType + ":" + rn.PrincipalName) {
				return refuse(kerr.InvalidPrincipalType.Code)
			}
		}
		fwd := *req
		fwd.Version = req.MaxVersion()
		ownerType, ownerName := splitPrincipal(owner)
		fwd.OwnerPrincipalType, fwd.OwnerPrincipalName = &ownerType, &ownerName
		fwd.UnknownTags = withPrincipal(requester)
		return h.forwardToken(ctx, r, &fwd)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	create := controller.CreateToken{
		Owner:         nullable(req.OwnerPrincipalType) + ":" + nullable(req.OwnerPrincipalName),
		Requester:     forwardedPrincipal(&req.UnknownTags),
		MaxLifetimeMs: req.MaxLifetimeMillis,
	}
	for _, rn := range req.Renewers {
		create.Renewers = append(create.Renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	setTokenPrincipals(resp, create.Owner, create.Requester)
	if create.Requester == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	tok, hmac, err := h.cluster.CreateDelegationToken(ctx, create)
	h.awaitLocalApply(ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return reply(resp)
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = tok.IssueTimestamp, tok.ExpiryTimestamp, tok.MaxTimestamp
	resp.TokenID, resp.HMAC = tok.ID, hmac
	return reply(resp)
}

func setTokenPrincipals(resp *kmsg.CreateDelegationTokenResponse, owner, requester string) {
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(requester)
}
