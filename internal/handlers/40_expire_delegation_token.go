package handlers

// ExpireDelegationToken (key 40), v1-v2 (v2 flexible): the owner or a
// renewer expires a token now (a negative period: the token is removed) or
// after a period (never past its maximum lifetime). Refused as
// CreateDelegationToken is; then the active controller expires it:
// DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED,
// DELEGATION_TOKEN_OWNER_MISMATCH or DELEGATION_TOKEN_AUTH_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) expireDelegationToken(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ExpireDelegationTokenRequest)
	out, done, code, expiry := h.serveTokenChange(ctx, c, r, tokenChange{
		forward: func(principal string) kmsg.Request {
			fwd := *req
			fwd.Version, fwd.UnknownTags = req.MaxVersion(), withPrincipal(principal)
			return &fwd
		},
		tags: &req.UnknownTags,
		change: func(ctx context.Context, principal string) (int64, error) {
			return h.cluster.ExpireDelegationToken(ctx, principal, req.HMAC, req.ExpiryPeriodMillis)
		},
	})
	if done {
		return out
	}
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
	return reply(resp)
}
