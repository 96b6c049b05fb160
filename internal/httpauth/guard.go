package httpauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/sasl"
)

// Authentication schemes, as OnAuthentication and the audit lines name them.
const (
	SchemeBasic  = "basic"
	SchemeBearer = "bearer" // a JWT (OAUTHBEARER)
	SchemeToken  = "token"  // a delegation token, sent as a bearer credential
)

// Config configures a Guard.
type Config struct {
	// Basic, when set, checks HTTP Basic credentials (as SASL PLAIN).
	Basic *sasl.Authenticator
	// Lookup finds a user's SCRAM credential; the Basic cache is keyed by it.
	// Required with Basic.
	Lookup sasl.Lookup
	// BasicWithoutTLS accepts Basic on plaintext connections too.
	BasicWithoutTLS bool
	// Bearer, when set, validates bearer JWTs.
	Bearer *sasl.OAuthValidator
	// Token, when set, checks delegation tokens sent as "Bearer <token
	// id>.<HMAC in base64>" (see isDelegationToken): it returns the owner of
	// token id when mac is its HMAC and the token is live at now
	// (sasl.Authenticator.VerifyToken). Accepted where Basic is: over TLS, or
	// with BasicWithoutTLS.
	Token func(id string, mac []byte, now time.Time) (owner string, ok bool)
	// Authorizer returns the current ACL authorizer; nil (or a nil result): every
	// authenticated principal may do everything.
	Authorizer func() *acl.Authorizer
	// Principals maps TLS client certificates to principals when no credentials
	// are required (--ssl-principal-mapping-rules); nil: User:<subject CN>.
	Principals *certs.PrincipalMapper
	// OnAuthentication, when set, is told about every credential check.
	OnAuthentication func(scheme string, ok bool)
	// Audit receives the audit lines (authentication failures, denials), each
	// with event and result attributes; nil discards.
	Audit *slog.Logger
	// Now is the clock of the Basic cache and of token expiry; nil means
	// time.Now.
	Now func() time.Time
}

// ErrorWriter answers a refused request in the front door's own format. code is
// the Kafka error name (SASL_AUTHENTICATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
// ...).
type ErrorWriter func(w http.ResponseWriter, r *http.Request, status int, code, message string)

// Guard authenticates and authorizes requests. A nil *Guard lets everything
// through, as the HTTP listener did before security.
type Guard struct {
	cfg    Config
	audit  *slog.Logger
	secret []byte // keys the Basic cache
	cache  struct {
		sync.Mutex
		ok map[[sha256.Size]byte]time.Time // valid until
	}
}

// basicCacheTTL is how long a verified Basic credential is remembered;
// basicCacheMax bounds the entries (the cache is emptied when full).
const (
	basicCacheTTL = time.Minute
	basicCacheMax = 4096
)

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Audit == nil {
		cfg.Audit = slog.New(slog.DiscardHandler)
	}
	g := &Guard{cfg: cfg, audit: cfg.Audit, secret: make([]byte, 32)}
	rand.Read(g.secret)
	g.cache.ok = make(map[[sha256.Size]byte]time.Time)
	return g
}

// CredentialsRequired reports whether requests need credentials (SASL is on).
func (g *Guard) CredentialsRequired() bool {
	return g != nil && (g.cfg.Basic != nil || g.cfg.Bearer != nil || g.cfg.Token != nil)
}

type ctxKey struct{}

// identity is what the guard learned about a request, kept in its context.
type identity struct {
	g         *Guard
	principal string
	host      string
}

// Principal is the request's authenticated principal ("User:alice"), or "" when
// no guard handled the request.
func Principal(r *http.Request) string {
	if id, ok := r.Context().Value(ctxKey{}).(*identity); ok {
		return id.principal
	}
	return ""
}

// Check reports whether the request's principal may perform op on the resource,
// without logging: for filtering listings. It is true when no guard handled the
// request.
func Check(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	id, ok := r.Context().Value(ctxKey{}).(*identity)
	if !ok {
		return true
	}
	return id.g.allowed(id, op, rt, name)
}

// Denial is a refused authorization: the Kafka error and a message naming the
// operation and resource.
type Denial struct {
	Code    string
	Message string
}

func (d *Denial) Error() string { return d.Message }

// Require is Check for a resource the request needs: a refusal is written to the
// audit log and returned.
func Require(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) *Denial {
	id, ok := r.Context().Value(ctxKey{}).(*identity)
	if !ok || id.g.allowed(id, op, rt, name) {
		return nil
	}
	return id.g.deny(r, id, op, rt, name)
}

func (g *Guard) allowed(id *identity, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.cfg.Authorizer == nil {
		return true
	}
	a := g.cfg.Authorizer()
	return a == nil || a.Authorize(id.principal, id.host, op, rt, name)
}

func (g *Guard) deny(r *http.Request, id *identity, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) *Denial {
	g.audit.Info("http request denied", "event", "authorization", "result", "denied", "principal", id.principal,
		"operation", op.String(), "resource_type", rt.String(), "resource", name,
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	code := kerr.ClusterAuthorizationFailed.Message
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		code = kerr.TopicAuthorizationFailed.Message
	case kmsg.ACLResourceTypeGroup:
		code = kerr.GroupAuthorizationFailed.Message
	case kmsg.ACLResourceTypeTransactionalId:
		code = kerr.TransactionalIDAuthorizationFailed.Message
	}
	return &Denial{Code: code, Message: id.principal + " may not " + op.String() + " " + rt.String() + " " + name}
}

// Wrap guards h, a route whose access is rule; errs writes refusals.
func (g *Guard) Wrap(rule Rule, errs ErrorWriter, h http.Handler) http.Handler {
	if g == nil || rule.kind == ruleOpen {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, scheme, msg := g.authenticate(r)
		if id == nil {
			g.challenge(w, scheme)
			errs(w, r, http.StatusUnauthorized, kerr.SaslAuthenticationFailed.Message, msg)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
		switch rule.kind {
		case ruleUnset:
			if g.cfg.Authorizer != nil && g.cfg.Authorizer() != nil {
				g.audit.Error("http route without an access rule refused", "event", "authorization", "result", "denied",
					"principal", id.principal, "method", r.Method, "path", r.URL.Path)
				errs(w, r, http.StatusForbidden, kerr.ClusterAuthorizationFailed.Message, "this route has no access rule")
				return
			}
		case ruleRequire:
			for _, c := range rule.checks {
				name := acl.ClusterName
				if c.param != "" {
					name = r.PathValue(c.param)
				}
				if d := Require(r, c.op, c.rt, name); d != nil {
					errs(w, r, http.StatusForbidden, d.Code, d.Message)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// WrapFunc is Wrap for a handler function.
func (g *Guard) WrapFunc(rule Rule, errs ErrorWriter, h http.HandlerFunc) http.Handler {
	return g.Wrap(rule, errs, h)
}

// challenge sets a WWW-Authenticate header per scheme offered; a failed bearer
// credential (JWT or delegation token) is marked invalid_token (RFC 6750).
func (g *Guard) challenge(w http.ResponseWriter, failed string) {
	if g.cfg.Basic != nil {
		w.Header().Add("WWW-Authenticate", `Basic realm="strata", charset="UTF-8"`)
	}
	if g.cfg.Bearer != nil || g.cfg.Token != nil {
		v := `Bearer realm="strata"`
		if failed == SchemeBearer || failed == SchemeToken {
			v += `, error="invalid_token"`
		}
		w.Header().Add("WWW-Authenticate", v)
	}
}

// authenticate finds the request's principal. On failure id is nil and scheme
// names the scheme that failed ("" when none was tried), msg says why.
func (g *Guard) authenticate(r *http.Request) (id *identity, scheme, msg string) {
	host := acl.ClientHost(r.RemoteAddr)
	if !g.CredentialsRequired() {
		p := certs.Anonymous
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			var err error
			if p, err = g.cfg.Principals.Principal(*r.TLS); err != nil {
				return nil, "", "client certificate: " + err.Error()
			}
		}
		return &identity{g: g, principal: p, host: host}, "", ""
	}
	auth := r.Header.Get("Authorization")
	kind, cred, _ := strings.Cut(auth, " ")
	switch {
	case auth == "":
		return nil, "", "credentials required"
	case strings.EqualFold(kind, "Basic") && g.cfg.Basic != nil:
		if r.TLS == nil && !g.cfg.BasicWithoutTLS {
			return nil, "", "HTTP Basic is accepted only over TLS"
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			return g.failed(r, SchemeBasic, ""), SchemeBasic, "invalid credentials"
		}
		if !g.checkBasic(user, pass) {
			return g.failed(r, SchemeBasic, user), SchemeBasic, "invalid credentials"
		}
		g.succeeded(SchemeBasic)
		return &identity{g: g, principal: "User:" + user, host: host}, "", ""
	case strings.EqualFold(kind, "Bearer") && g.cfg.Token != nil && isDelegationToken(strings.TrimSpace(cred)):
		if r.TLS == nil && !g.cfg.BasicWithoutTLS {
			return nil, "", "delegation tokens are accepted only over TLS"
		}
		id, b64, _ := strings.Cut(strings.TrimSpace(cred), ".")
		mac, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return g.failed(r, SchemeToken, id), SchemeToken, "invalid token"
		}
		owner, ok := g.cfg.Token(id, mac, g.cfg.Now())
		if !ok {
			return g.failed(r, SchemeToken, id), SchemeToken, "invalid token"
		}
		g.succeeded(SchemeToken)
		return &identity{g: g, principal: owner, host: host}, "", ""
	case strings.EqualFold(kind, "Bearer") && g.cfg.Bearer != nil:
		user, _, err := g.cfg.Bearer.Validate(strings.TrimSpace(cred))
		if err != nil {
			return g.failed(r, SchemeBearer, ""), SchemeBearer, "invalid token"
		}
		g.succeeded(SchemeBearer)
		return &identity{g: g, principal: "User:" + user, host: host}, "", ""
	}
	return nil, "", "unsupported authorization scheme"
}

// isDelegationToken reports whether a bearer credential has a delegation
// token's form, "<token id>.<HMAC>": exactly one dot. A JWT never has it (a
// signed one has three dot-separated parts, an encrypted one five), and
// neither a token id (a UUID in URL-safe base64) nor a base64 HMAC holds a dot.
func isDelegationToken(cred string) bool { return strings.Count(cred, ".") == 1 }

func (g *Guard) succeeded(scheme string) {
	if g.cfg.OnAuthentication != nil {
		g.cfg.OnAuthentication(scheme, true)
	}
}

// failed counts and logs a failed credential check; it returns a nil identity.
func (g *Guard) failed(r *http.Request, scheme, user string) *identity {
	if g.cfg.OnAuthentication != nil {
		g.cfg.OnAuthentication(scheme, false)
	}
	g.audit.Info("http authentication", "event", "authentication", "result", "failure", "listener", "http",
		"scheme", scheme, "user", user, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	return nil
}

// checkBasic checks a user and password as SASL PLAIN does, through the cache.
func (g *Guard) checkBasic(user, pass string) bool {
	key, cached := g.cacheKey(user, pass)
	if cached {
		now := g.cfg.Now()
		g.cache.Lock()
		until, ok := g.cache.ok[key]
		g.cache.Unlock()
		if ok && now.Before(until) {
			return true
		}
	}
	x, err := g.cfg.Basic.Start(sasl.Plain)
	if err != nil {
		return false
	}
	if _, err := x.Step([]byte("\x00" + user + "\x00" + pass)); err != nil || !x.Done() {
		return false
	}
	if cached {
		g.cache.Lock()
		if len(g.cache.ok) >= basicCacheMax {
			clear(g.cache.ok)
		}
		g.cache.ok[key] = g.cfg.Now().Add(basicCacheTTL)
		g.cache.Unlock()
	}
	return true
}

// cacheKey is the Basic cache's key for user and pass under the user's current
// credential (the one PLAIN checks); false when the user has none.
func (g *Guard) cacheKey(user, pass string) ([sha256.Size]byte, bool) {
	var key [sha256.Size]byte
	if g.cfg.Lookup == nil {
		return key, false
	}
	for _, m := range []sasl.Mechanism{sasl.ScramSHA512, sasl.ScramSHA256} {
		if c, ok := g.cfg.Lookup(user, m); ok {
			mac := hmac.New(sha256.New, g.secret)
			for _, part := range [][]byte{[]byte(user), []byte(pass), []byte(m), c.Salt, c.StoredKey} {
				var n [4]byte
				n[0], n[1], n[2], n[3] = byte(len(part)>>24), byte(len(part)>>16), byte(len(part)>>8), byte(len(part))
				mac.Write(n[:])
				mac.Write(part)
			}
			copy(key[:], mac.Sum(nil))
			return key, true
		}
	}
	return key, false
}

// RequireCreateTopic is CreateTopics' rule: CREATE on the cluster, else CREATE on
// the topic.
func RequireCreateTopic(r *http.Request, topic string) *Denial {
	if Check(r, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName) {
		return nil
	}
	return Require(r, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, topic)
}
