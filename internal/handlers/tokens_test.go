package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/sasl"
)

// tokenCluster is the active controller's token operations run in memory:
// the controller's own plans on a clock the test moves.
type tokenCluster struct {
	*planCluster
	cfg controller.TokenConfig
	now time.Time
	ids int
}

func (c *tokenCluster) CreateDelegationToken(_ context.Context, req controller.CreateToken) (metadata.DelegationToken, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids++
	recs, tok, err := controller.PlanCreateDelegationToken(c.cfg, c.now, fmt.Sprintf("token-%d", c.ids), req)
	if err == nil {
		err = c.apply(recs, false)
	}
	if err != nil {
		return metadata.DelegationToken{}, nil, err
	}
	return tok, sasl.TokenHMAC(c.cfg.SecretKey, tok.ID), nil
}

func (c *tokenCluster) RenewDelegationToken(_ context.Context, principal string, hmac []byte, period int64) (int64, error) {
	return c.change(controller.PlanRenewDelegationToken, principal, hmac, period)
}

func (c *tokenCluster) ExpireDelegationToken(_ context.Context, principal string, hmac []byte, period int64) (int64, error) {
	return c.change(controller.PlanExpireDelegationToken, principal, hmac, period)
}

type tokenPlan func(*metadata.Image, controller.TokenConfig, time.Time, string, []byte, int64) ([]metadata.Record, int64, error)

func (c *tokenCluster) change(plan tokenPlan, principal string, hmac []byte, period int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, ex, err := plan(c.img, c.cfg, c.now, principal, hmac, period)
	if err == nil {
		err = c.apply(recs, false)
	}
	return ex, err
}

// newTokenHandlers serves the token APIs with an ACL authorizer (super user
// admin, no ACLs) and tokens on (Kafka's default lifetimes) unless key is
// empty; every forwarded request is served in process, as on a node whose
// controller is the active one.
func newTokenHandlers(t *testing.T, key string) (*Handlers, *tokenCluster) {
	t.Helper()
	c := &tokenCluster{planCluster: &planCluster{img: metadata.NewImage()}, cfg: controller.TokenConfig{SecretKey: key}, now: time.UnixMilli(1_700_000_000_000)}
	authz := acl.New(acl.Config{SuperUsers: []string{"User:admin"}}, nil)
	cfg := Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, TokenSecretKey: key, Authorizer: func() *acl.Authorizer { return authz }}
	return New(cfg, c, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil))), c
}

func tokenCreate(ownerType, ownerName *string, maxLifetime int64, renewers ...[2]string) *kmsg.CreateDelegationTokenRequest {
	r := kmsg.NewPtrCreateDelegationTokenRequest()
	r.OwnerPrincipalType, r.OwnerPrincipalName, r.MaxLifetimeMillis = ownerType, ownerName, maxLifetime
	for _, rn := range renewers {
		x := kmsg.NewCreateDelegationTokenRequestRenewer()
		x.PrincipalType, x.PrincipalName = rn[0], rn[1]
		r.Renewers = append(r.Renewers, x)
	}
	return r
}

func tokenRenew(hmac []byte, period int64) *kmsg.RenewDelegationTokenRequest {
	r := kmsg.NewPtrRenewDelegationTokenRequest()
	r.HMAC, r.RenewTimeMillis = hmac, period
	return r
}

func tokenExpire(hmac []byte, period int64) *kmsg.ExpireDelegationTokenRequest {
	r := kmsg.NewPtrExpireDelegationTokenRequest()
	r.HMAC, r.ExpiryPeriodMillis = hmac, period
	return r
}

func tokenDescribe(owners ...string) *kmsg.DescribeDelegationTokenRequest {
	r := kmsg.NewPtrDescribeDelegationTokenRequest()
	if owners != nil {
		r.Owners = []kmsg.DescribeDelegationTokenRequestOwner{}
		for i := 0; i+1 < len(owners); i += 2 {
			o := kmsg.NewDescribeDelegationTokenRequestOwner()
			o.PrincipalType, o.PrincipalName = owners[i], owners[i+1]
			r.Owners = append(r.Owners, o)
		}
	}
	return r
}

// tokenLine is what interop/cmd/tokencompare prints of an answer: the error
// code and the fields Kafka's and Strata's answers are compared on, times
// relative to the token's issue time, described tokens in the order of
// their names.
func tokenLine(resp kmsg.Response, names map[string]string) string {
	switch r := resp.(type) {
	case *kmsg.CreateDelegationTokenResponse:
		issue := "0"
		switch {
		case r.IssueTimestamp > 0:
			issue = "+"
		case r.IssueTimestamp < 0:
			issue = fmt.Sprint(r.IssueTimestamp)
		}
		return fmt.Sprintf("%s owner=%s:%s requester=%s:%s issue=%s expiry-issue=%d max-issue=%d id=%t hmac=%d",
			codeName(r.ErrorCode), r.PrincipalType, r.PrincipalName, r.TokenRequesterPrincipalType, r.TokenRequesterPrincipalName,
			issue, r.ExpiryTimestamp-r.IssueTimestamp, r.MaxTimestamp-r.IssueTimestamp, r.TokenID != "", len(r.HMAC))
	case *kmsg.RenewDelegationTokenResponse:
		return fmt.Sprintf("%s expiry=%d", codeName(r.ErrorCode), r.ExpiryTimestamp)
	case *kmsg.ExpireDelegationTokenResponse:
		return fmt.Sprintf("%s expiry=%d", codeName(r.ErrorCode), r.ExpiryTimestamp)
	case *kmsg.DescribeDelegationTokenResponse:
		s := codeName(r.ErrorCode)
		details := slices.Clone(r.TokenDetails)
		slices.SortFunc(details, func(a, b kmsg.DescribeDelegationTokenResponseTokenDetail) int {
			return strings.Compare(names[a.TokenID], names[b.TokenID])
		})
		for _, d := range details {
			s += fmt.Sprintf(" [%s owner=%s:%s requester=%s:%s renewers=%d hmac=%d]", names[d.TokenID], d.PrincipalType, d.PrincipalName,
				d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName, len(d.Renewers), len(d.HMAC))
		}
		return s
	}
	return fmt.Sprintf("%T", resp)
}

// TestDelegationTokensAsKafka replays interop/cmd/tokencompare's script
// through the handlers. The expected lines are Kafka 4.4.0's answers to the
// same requests (a KRaft node with SASL SCRAM-SHA-512, the
// StandardAuthorizer, super user admin, delegation.token.secret.key set,
// default lifetimes; run 2026-12-02), except where a comment says otherwise.
// Expiry times that depend on the clock are printed as offsets from it.
func TestDelegationTokensAsKafka(t *testing.T) {
	h, cl := newTokenHandlers(t, "k")
	plaintext := &protocol.ConnInfo{}
	alice, bob, admin := protocol.SASLConnInfo("User:alice", false), protocol.SASLConnInfo("User:bob", false), protocol.SASLConnInfo("User:admin", false)
	viaToken := protocol.SASLConnInfo("User:alice", true)
	names := map[string]string{}
	hmacs := map[string][]byte{}
	str := func(s string) *string { return &s }
	send := func(c *protocol.ConnInfo, req kmsg.Request) kmsg.Response {
		return serveRequest(t, h, c, &protocol.Request{Key: req.Key(), Version: req.MaxVersion(), Msg: req})
	}
	// create sends a creation and names the token it makes.
	create := func(name string, c *protocol.ConnInfo, req kmsg.Request) func() string {
		return func() string {
			r := send(c, req).(*kmsg.CreateDelegationTokenResponse)
			if r.TokenID != "" {
				names[r.TokenID], hmacs[name] = name, r.HMAC
			}
			return tokenLine(r, names)
		}
	}
	do := func(c *protocol.ConnInfo, req func() kmsg.Request) func() string {
		return func() string { return tokenLine(send(c, req()), names) }
	}
	hmac := func(name string) []byte { return hmacs[name] }
	advance := func(d time.Duration) { cl.mu.Lock(); cl.now = cl.now.Add(d); cl.mu.Unlock() }
	now := func() int64 { cl.mu.Lock(); defer cl.mu.Unlock(); return cl.now.UnixMilli() }
	const day, week = 86400000, 604800000

	for _, s := range []struct {
		name string
		run  func() string
		want string
	}{
		{"plaintext create", do(plaintext, func() kmsg.Request { return tokenCreate(nil, nil, -1) }),
			"DELEGATION_TOKEN_REQUEST_NOT_ALLOWED owner=User:ANONYMOUS requester=User:ANONYMOUS issue=-1 expiry-issue=0 max-issue=0 id=false hmac=0"},
		{"plaintext renew", do(plaintext, func() kmsg.Request { return tokenRenew([]byte("x"), -1) }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED expiry=-1"},
		{"plaintext expire", do(plaintext, func() kmsg.Request { return tokenExpire([]byte("x"), -1) }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED expiry=-1"},
		{"plaintext describe", do(plaintext, func() kmsg.Request { return tokenDescribe() }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"},
		{"alice create, renewer bob", create("a1", alice, tokenCreate(nil, nil, -1, [2]string{"User", "bob"})),
			fmt.Sprintf("NONE owner=User:alice requester=User:alice issue=+ expiry-issue=%d max-issue=%d id=true hmac=64", day, week)},
		{"alice create owner alice, max 1h", create("a2", alice, tokenCreate(str("User"), str("alice"), 3600_000)),
			"NONE owner=User:alice requester=User:alice issue=+ expiry-issue=3600000 max-issue=3600000 id=true hmac=64"},
		{"alice create, renewer Group:ops", create("", alice, tokenCreate(nil, nil, -1, [2]string{"Group", "ops"})),
			"INVALID_PRINCIPAL_TYPE owner=User:alice requester=User:alice issue=-1 expiry-issue=0 max-issue=0 id=false hmac=0"},
		{"bob create owner carol", create("", bob, tokenCreate(str("User"), str("carol"), -1)),
			"DELEGATION_TOKEN_AUTHORIZATION_FAILED owner=User:carol requester=User:bob issue=-1 expiry-issue=0 max-issue=0 id=false hmac=0"},
		// Kafka 4.4: UNKNOWN_SERVER_ERROR owner=User:ANONYMOUS requester=User:ANONYMOUS (a null type fails in its principal).
		{"bob create owner null-type carol", create("", bob, tokenCreate(nil, str("carol"), -1)),
			"INVALID_REQUEST owner=User:bob requester=User:bob issue=-1 expiry-issue=0 max-issue=0 id=false hmac=0"},
		{"admin create owner carol", create("c1", admin, tokenCreate(str("User"), str("carol"), -1)),
			fmt.Sprintf("NONE owner=User:carol requester=User:admin issue=+ expiry-issue=%d max-issue=%d id=true hmac=64", day, week)},
		{"alice create owner empty name", create("a3", alice, tokenCreate(str("User"), str(""), -1)),
			fmt.Sprintf("NONE owner=User:alice requester=User:alice issue=+ expiry-issue=%d max-issue=%d id=true hmac=64", day, week)},
		{"bob (renewer) renews a1 a second on", func() string {
			advance(time.Second)
			return do(bob, func() kmsg.Request { return tokenRenew(hmac("a1"), -1) })()
		}, fmt.Sprintf("NONE expiry=%d", 1_700_000_000_000+1000+day)},
		{"bob renews a2", do(bob, func() kmsg.Request { return tokenRenew(hmac("a2"), -1) }), "DELEGATION_TOKEN_OWNER_MISMATCH expiry=0"},
		{"alice renews an unknown hmac", do(alice, func() kmsg.Request { return tokenRenew([]byte("not-a-token"), -1) }), "DELEGATION_TOKEN_NOT_FOUND expiry=0"},
		{"admin (super user) renews a2", do(admin, func() kmsg.Request { return tokenRenew(hmac("a2"), -1) }), "DELEGATION_TOKEN_OWNER_MISMATCH expiry=0"},
		// Capped at the token's maximum.
		{"alice renews a2 for a day", do(alice, func() kmsg.Request { return tokenRenew(hmac("a2"), day) }), fmt.Sprintf("NONE expiry=%d", 1_700_000_000_000+3600_000)},
		{"describe as alice", do(alice, func() kmsg.Request { return tokenDescribe() }),
			"NONE [a1 owner=User:alice requester=User:alice renewers=1 hmac=64] [a2 owner=User:alice requester=User:alice renewers=0 hmac=64] [a3 owner=User:alice requester=User:alice renewers=0 hmac=64]"},
		{"describe as bob", do(bob, func() kmsg.Request { return tokenDescribe() }), "NONE [a1 owner=User:alice requester=User:alice renewers=1 hmac=64]"},
		{"describe as admin", do(admin, func() kmsg.Request { return tokenDescribe() }),
			"NONE [a1 owner=User:alice requester=User:alice renewers=1 hmac=64] [a2 owner=User:alice requester=User:alice renewers=0 hmac=64] [a3 owner=User:alice requester=User:alice renewers=0 hmac=64] [c1 owner=User:carol requester=User:admin renewers=0 hmac=64]"},
		{"describe as admin owners=[]", do(admin, func() kmsg.Request { return tokenDescribe([]string{}...) }), "NONE"},
		{"describe as admin owners=[User:carol]", do(admin, func() kmsg.Request { return tokenDescribe("User", "carol") }), "NONE [c1 owner=User:carol requester=User:admin renewers=0 hmac=64]"},
		{"describe as admin owners=[User:bob]", do(admin, func() kmsg.Request { return tokenDescribe("User", "bob") }), "NONE [a1 owner=User:alice requester=User:alice renewers=1 hmac=64]"},
		{"token session create", do(viaToken, func() kmsg.Request { return tokenCreate(nil, nil, -1) }),
			"DELEGATION_TOKEN_REQUEST_NOT_ALLOWED owner=User:alice requester=User:alice issue=-1 expiry-issue=0 max-issue=0 id=false hmac=0"},
		{"token session renew", do(viaToken, func() kmsg.Request { return tokenRenew(hmac("a1"), -1) }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED expiry=-1"},
		{"token session expire", do(viaToken, func() kmsg.Request { return tokenExpire(hmac("a1"), 1) }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED expiry=-1"},
		{"token session describe", do(viaToken, func() kmsg.Request { return tokenDescribe() }), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"},
		{"bob expires a2", do(bob, func() kmsg.Request { return tokenExpire(hmac("a2"), -1) }), "DELEGATION_TOKEN_OWNER_MISMATCH expiry=0"},
		{"alice expires an unknown hmac", do(alice, func() kmsg.Request { return tokenExpire([]byte("not-a-token"), -1) }), "DELEGATION_TOKEN_NOT_FOUND expiry=0"},
		{"alice expires a2 in 1.5s", do(alice, func() kmsg.Request { return tokenExpire(hmac("a2"), 1500) }), fmt.Sprintf("NONE expiry=%d", 1_700_000_000_000+1000+1500)},
		{"alice renews a2 after its expiry", func() string {
			advance(2500 * time.Millisecond)
			return do(alice, func() kmsg.Request { return tokenRenew(hmac("a2"), -1) })()
		}, "DELEGATION_TOKEN_EXPIRED expiry=0"},
		{"alice expires a2 later after its expiry", do(alice, func() kmsg.Request { return tokenExpire(hmac("a2"), 1000) }), "DELEGATION_TOKEN_EXPIRED expiry=0"},
		{"bob (renewer) expires a1 now", func() string {
			r := send(bob, tokenExpire(hmac("a1"), -1)).(*kmsg.ExpireDelegationTokenResponse)
			return fmt.Sprintf("%s expiry=now:%t", codeName(r.ErrorCode), r.ExpiryTimestamp == now())
		}, "NONE expiry=now:true"},
		{"alice expires a1 again", do(alice, func() kmsg.Request { return tokenExpire(hmac("a1"), -1) }), "DELEGATION_TOKEN_NOT_FOUND expiry=0"},
		// The expired a2 is listed until the controller removes it.
		{"describe as admin at the end", do(admin, func() kmsg.Request { return tokenDescribe() }),
			"NONE [a2 owner=User:alice requester=User:alice renewers=0 hmac=64] [a3 owner=User:alice requester=User:alice renewers=0 hmac=64] [c1 owner=User:carol requester=User:admin renewers=0 hmac=64]"},
	} {
		if got := s.run(); got != s.want {
			t.Errorf("%s:\n got %s\nwant %s", s.name, got, s.want)
		}
	}
	if len(cl.img.DelegationTokens()) != 3 {
		t.Errorf("tokens left: %d, want 3", len(cl.img.DelegationTokens()))
	}
}

// TestDelegationTokensDisabled: without a token secret key every token API
// answers DELEGATION_TOKEN_AUTH_DISABLED (Kafka 4.4.0 without
// delegation.token.secret.key, tokencompare -disabled).
func TestDelegationTokensDisabled(t *testing.T) {
	h, _ := newTokenHandlers(t, "")
	alice := protocol.SASLConnInfo("User:alice", false)
	for _, s := range []struct {
		req  kmsg.Request
		want string
	}{
		{tokenCreate(nil, nil, -1), "DELEGATION_TOKEN_AUTH_DISABLED owner=User:alice requester=User:alice issue=0 expiry-issue=0 max-issue=0 id=false hmac=0"},
		{tokenRenew([]byte("x"), -1), "DELEGATION_TOKEN_AUTH_DISABLED expiry=0"},
		{tokenExpire([]byte("x"), -1), "DELEGATION_TOKEN_AUTH_DISABLED expiry=0"},
		{tokenDescribe(), "DELEGATION_TOKEN_AUTH_DISABLED"},
	} {
		resp := serveRequest(t, h, alice, &protocol.Request{Key: s.req.Key(), Version: s.req.MaxVersion(), Msg: s.req})
		if got := tokenLine(resp, nil); got != s.want {
			t.Errorf("%s:\n got %s\nwant %s", kmsg.NameForKey(s.req.Key()), got, s.want)
		}
	}
}

// TestForwardedPrincipalOnTheWire: the requester's principal survives the
// controller link's encoding of each forwarded token request (a tag of the
// flexible version the link sends), and a client's request names none.
func TestForwardedPrincipalOnTheWire(t *testing.T) {
	for _, req := range []interface {
		kmsg.Request
		tags() *kmsg.Tags
	}{
		&createTags{kmsg.NewPtrCreateDelegationTokenRequest()},
		&renewTags{kmsg.NewPtrRenewDelegationTokenRequest()},
		&expireTags{kmsg.NewPtrExpireDelegationTokenRequest()},
	} {
		req.SetVersion(req.MaxVersion())
		*req.tags() = withPrincipal("User:alice")
		b := req.AppendTo(nil)
		fresh := kmsg.RequestForKey(req.Key())
		fresh.SetVersion(req.MaxVersion())
		if err := fresh.ReadFrom(b); err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		var tags *kmsg.Tags
		switch r := fresh.(type) {
		case *kmsg.CreateDelegationTokenRequest:
			tags = &r.UnknownTags
		case *kmsg.RenewDelegationTokenRequest:
			tags = &r.UnknownTags
		case *kmsg.ExpireDelegationTokenRequest:
			tags = &r.UnknownTags
		}
		if p := forwardedPrincipal(tags); p != "User:alice" {
			t.Errorf("%s: forwarded principal %q after decoding, want User:alice", kmsg.NameForKey(req.Key()), p)
		}
		if p := forwardedPrincipal(&kmsg.Tags{}); p != "" {
			t.Errorf("no tags: principal %q", p)
		}
	}
}

type createTags struct {
	*kmsg.CreateDelegationTokenRequest
}

func (r *createTags) tags() *kmsg.Tags { return &r.UnknownTags }

type renewTags struct {
	*kmsg.RenewDelegationTokenRequest
}

func (r *renewTags) tags() *kmsg.Tags { return &r.UnknownTags }

type expireTags struct {
	*kmsg.ExpireDelegationTokenRequest
}

func (r *expireTags) tags() *kmsg.Tags { return &r.UnknownTags }
