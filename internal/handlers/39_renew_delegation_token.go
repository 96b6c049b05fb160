package handlers

// RenewDelegationToken (key 39), v1-v2 (v2 flexible): the owner or a renewer
// moves a token's expiry (by at most the configured expiry time, never past
// its maximum lifetime). Refused as CreateDelegationToken is; then the active
// controller renews it: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED,
// DELEGATION_TOKEN_OWNER_MISMATCH or DELEGATION_TOKEN_AUTH_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) renewDelegationToken(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.RenewDelegationTokenRequest)
	out, done, code, expiry := h.serveTokenChange(ctx, c, r, tokenChange{
		forward: func(principal string) kmsg.Request {
			fwd := *req
			fwd.Version, fwd.UnknownTags = req.MaxVersion(), withPrincipal(principal)
			return &fwd
		},
		tags: &req.UnknownTags,
		change: func(ctx context.Context, principal string) (int64, error) {
			return h.cluster.RenewDelegationToken(ctx, principal, req.HMAC, req.RenewTimeMillis)
		},
	})
	if done {
		return out
	}
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
	return reply(resp)
}
