package handlers

// Delegation tokens (KIP-48, KIP-373): what CreateDelegationToken (38),
// RenewDelegationToken (39), ExpireDelegationToken (40) and
// DescribeDelegationToken (41) share.
//
// As in Kafka, the broker that takes the request from the client decides
// whether the connection may ask at all (tokenRequestsAllowed), authorizes a
// token for another owner, and forwards creations, renewals and expiries to
// the active controller, which plans them on its clock with the requester's
// principal. Kafka carries that principal in an Envelope; Strata's controller
// link carries it in a tag of the forwarded request (principalTag), which
// the controller reads only from requests that arrived on the link.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/protocol"
)

// principalTag is the tag of a forwarded token request that names the
// principal of the client that sent it. Kafka defines no tags on these
// requests; the number is far from the ones it would add first.
const principalTag = 10000

// tokenRequestsAllowed is Kafka's allowTokenRequests: token requests need a
// connection authenticated with SASL or with a TLS client certificate, and
// not with a delegation token.
func tokenRequestsAllowed(c *protocol.ConnInfo) bool {
	if c == nil || c.TokenAuthenticated() {
		return false
	}
	return c.SASLAuthenticated() || c.TLS() && c.Principal() != certs.Anonymous
}

// withPrincipal returns tags carrying principal, for a forwarded request.
func withPrincipal(principal string) kmsg.Tags {
	var t kmsg.Tags
	t.Set(principalTag, []byte(principal))
	return t
}

// forwardedPrincipal is the principal a forwarded request names, "" if none.
func forwardedPrincipal(t *kmsg.Tags) string {
	var p string
	t.Each(func(key uint32, val []byte) {
		if key == principalTag {
			p = string(val)
		}
	})
	return p
}

// forwardToken forwards fwd (a copy of the client's request, at a version
// with tags, naming the principal) to the active controller and answers the
// client at its own version.
func (h *Handlers) forwardToken(ctx context.Context, r *protocol.Request, fwd kmsg.Request) protocol.Response {
	resp, _ := h.forwardIfNotController(ctx, &protocol.Request{Key: r.Key, Version: fwd.GetVersion(), Msg: fwd})
	if resp.Msg != nil {
		resp.Msg.SetVersion(r.Version)
	}
	return resp
}

// onLink reports whether the request arrived on the controller link.
func onLink(ctx context.Context) bool { return ctx.Value(onLinkKey{}) != nil }

// splitPrincipal splits "Type:name" at the first colon.
func splitPrincipal(p string) (typ, name string) {
	typ, name, _ = strings.Cut(p, ":")
	return typ, name
}

// tokenChange is a RenewDelegationToken or ExpireDelegationToken request.
type tokenChange struct {
	// forward is a copy of the request to forward, naming principal.
	forward func(principal string) kmsg.Request
	tags    *kmsg.Tags // the request's tags, on the controller link
	// change renews or expires the token as principal and returns its
	// expiry.
	change func(ctx context.Context, principal string) (int64, error)
}

// serveTokenChange serves a renewal or expiry: it refuses it
// (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1) or forwards it on the
// client's side, and changes the token on the controller link. done reports
// that resp is the answer; else code and expiry are, for the caller's
// response (a refusal by the controller carries expiry 0, as Kafka's does).
func (h *Handlers) serveTokenChange(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request, tc tokenChange) (resp protocol.Response, done bool, code int16, expiry int64) {
	if !onLink(ctx) {
		if !tokenRequestsAllowed(c) {
			return protocol.Response{}, false, kerr.DelegationTokenRequestNotAllowed.Code, -1
		}
		return h.forwardToken(ctx, r, tc.forward(c.Principal())), true, 0, 0
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp, true, 0, 0
	}
	principal := forwardedPrincipal(tc.tags)
	if principal == "" {
		return protocol.Response{}, false, kerr.InvalidRequest.Code, -1
	}
	expiry, err := tc.change(ctx, principal)
	h.awaitLocalApply(ctx)
	return protocol.Response{}, false, errorCode(err), expiry
}
