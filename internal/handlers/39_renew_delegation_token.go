package handlers

// RenewDelegationToken (key 39), v1-v2 (v2 flexible): the owner or a renewer
// moves a token's expiry (by at most the configured expiry time, never past
// its maximum lifetime). Refused as CreateDelegationToken is; then the active
// controller renews it: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED,
// DELEGATION_TOKEN_OWNER_MISMATCH or DELEGATION_TOKEN_AUTH_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) renewDelegationToken(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	if !onLink(ctx) {
		if !tokenRequestsAllowed(c) {
			resp.ErrorCode, resp.ExpiryTimestamp = kerr.DelegationTokenRequestNotAllowed.Code, -1
			return reply(resp)
		}
		fwd := *req
		fwd.Version, fwd.UnknownTags = req.MaxVersion(), withPrincipal(c.Principal())
		return h.forwardToken(ctx, r, &fwd)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	principal := forwardedPrincipal(&req.UnknownTags)
	if principal == "" {
		resp.ErrorCode, resp.ExpiryTimestamp = kerr.InvalidRequest.Code, -1
		return reply(resp)
	}
	expiry, err := h.cluster.RenewDelegationToken(ctx, principal, req.HMAC, req.RenewTimeMillis)
	h.awaitLocalApply(ctx)
	// A refusal by the controller carries expiry 0, as Kafka's does.
	resp.ErrorCode, resp.ExpiryTimestamp = errorCode(err), expiry
	return reply(resp)
}
