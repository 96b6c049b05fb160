package httpauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/sasl"
)

// users is a credential store for the tests: alice/alice-pw (SCRAM-SHA-512),
// bob/bob-pw (SCRAM-SHA-256), admin/admin-pw.
type users struct {
	mu    sync.Mutex
	creds map[string]sasl.Credential
}

func newUsers(t *testing.T) *users {
	u := &users{creds: map[string]sasl.Credential{}}
	for _, c := range []struct {
		user, pass string
		mech       sasl.Mechanism
	}{{"alice", "alice-pw", sasl.ScramSHA512}, {"bob", "bob-pw", sasl.ScramSHA256}, {"admin", "admin-pw", sasl.ScramSHA512}} {
		u.set(t, c.user, c.pass, c.mech)
	}
	return u
}

func (u *users) set(t *testing.T, user, pass string, mech sasl.Mechanism) {
	c, err := sasl.NewCredential(mech, pass, 4096)
	if err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	u.creds[user+"/"+string(mech)] = c
	u.mu.Unlock()
}

func (u *users) lookup(user string, mech sasl.Mechanism) (sasl.Credential, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.creds[user+"/"+string(mech)]
	return c, ok
}

// issuer signs bearer tokens with a key published in a JWKS file.
type issuer struct {
	key  *ecdsa.PrivateKey
	jwks string
}

func newIssuer(t *testing.T) *issuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: string(jose.ES256), Use: "sig"}}}
	raw, _ := json.Marshal(set)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &issuer{key: key, jwks: path}
}

func (is *issuer) token(t *testing.T, sub string, exp time.Time) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithHeader("kid", "k").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(map[string]any{"sub": sub, "exp": exp.Unix(), "iat": time.Now().Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func writeErr(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	w.WriteHeader(status)
	w.Write([]byte(code + ": " + msg))
}

// bindings: alice may READ topic orders and group app; nobody names topic other.
var bindings = []acl.Binding{
	{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
	{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "app", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
}

func authorizer() *acl.Authorizer {
	return acl.New(acl.Config{SuperUsers: []string{"User:admin"}}, bindings)
}

func basic(user, pass string) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func TestGuard(t *testing.T) {
	u := newUsers(t)
	is := newIssuer(t)
	bearer, err := sasl.NewOAuthValidator(sasl.OAuthConfig{JWKS: is.jwks})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	read := Needs(OnTopic(kmsg.ACLOperationRead, "topic"), OnGroup(kmsg.ACLOperationRead, "group"))
	type tc struct {
		name       string
		cfg        func(*Config)
		rule       Rule
		path       string // matched against /t/{topic}/g/{group}
		plaintext  bool
		auth       string
		want       int
		principal  string // seen by the handler when served
		challenges []string
	}
	withSASL := func(c *Config) {
		c.Basic, c.Lookup, c.Bearer, c.Authorizer = sasl.NewAuthenticator(u.lookup), u.lookup, bearer, authorizer
	}
	noSASL := func(c *Config) { c.Authorizer = authorizer }
	challenges := []string{`Basic realm="strata", charset="UTF-8"`, `Bearer realm="strata"`}
	for _, c := range []tc{
		{name: "open route needs nothing", cfg: withSASL, rule: Open(), path: "/t/x/g/y", want: 200},
		{name: "no credentials", cfg: withSASL, rule: read, path: "/t/orders/g/app", want: 401, challenges: challenges},
		{name: "allowed", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: basic("alice", "alice-pw"), want: 200, principal: "User:alice"},
		{name: "sha-256 user", cfg: withSASL, rule: Authenticated(), path: "/t/orders/g/app", auth: basic("bob", "bob-pw"), want: 200, principal: "User:bob"},
		{name: "wrong password", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: basic("alice", "nope"), want: 401, challenges: challenges},
		{name: "unknown user", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: basic("mallory", "nope"), want: 401, challenges: challenges},
		{name: "malformed basic", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: "Basic !!!", want: 401, challenges: challenges},
		{name: "unknown scheme", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: "Digest x", want: 401, challenges: challenges},
		{name: "denied topic", cfg: withSASL, rule: read, path: "/t/other/g/app", auth: basic("alice", "alice-pw"), want: 403},
		{name: "denied group", cfg: withSASL, rule: read, path: "/t/orders/g/other", auth: basic("alice", "alice-pw"), want: 403},
		{name: "super user", cfg: withSASL, rule: read, path: "/t/other/g/other", auth: basic("admin", "admin-pw"), want: 200, principal: "User:admin"},
		{name: "unset rule refused", cfg: withSASL, rule: Rule{}, path: "/t/orders/g/app", auth: basic("alice", "alice-pw"), want: 403},
		{name: "unset rule without authorizer", cfg: func(c *Config) { withSASL(c); c.Authorizer = nil }, rule: Rule{}, path: "/t/orders/g/app", auth: basic("alice", "alice-pw"), want: 200, principal: "User:alice"},
		{name: "basic over plaintext refused", cfg: withSASL, rule: read, path: "/t/orders/g/app", plaintext: true, auth: basic("alice", "alice-pw"), want: 401, challenges: challenges},
		{name: "basic over plaintext opted in", cfg: func(c *Config) { withSASL(c); c.BasicWithoutTLS = true }, rule: read, path: "/t/orders/g/app", plaintext: true, auth: basic("alice", "alice-pw"), want: 200, principal: "User:alice"},
		{name: "bearer", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: "Bearer " + is.token(t, "alice", now.Add(time.Hour)), want: 200, principal: "User:alice"},
		{name: "bearer denied", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: "Bearer " + is.token(t, "carol", now.Add(time.Hour)), want: 403},
		{name: "expired bearer", cfg: withSASL, rule: read, path: "/t/orders/g/app", auth: "Bearer " + is.token(t, "alice", now.Add(-time.Hour)), want: 401,
			challenges: []string{challenges[0], `Bearer realm="strata", error="invalid_token"`}},
		{name: "bearer without OAUTHBEARER", cfg: func(c *Config) { withSASL(c); c.Bearer = nil }, rule: read, path: "/t/orders/g/app", auth: "Bearer " + is.token(t, "alice", now.Add(time.Hour)), want: 401, challenges: challenges[:1]},
		{name: "no SASL: anonymous denied", cfg: noSASL, rule: read, path: "/t/orders/g/app", want: 403},
		{name: "no SASL: authenticated rule", cfg: noSASL, rule: Authenticated(), path: "/t/orders/g/app", want: 200, principal: "User:ANONYMOUS"},
		{name: "cluster need", cfg: withSASL, rule: Needs(OnCluster(kmsg.ACLOperationDescribe)), path: "/t/orders/g/app", auth: basic("alice", "alice-pw"), want: 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{}
			c.cfg(&cfg)
			g := New(cfg)
			var seen string
			mux := http.NewServeMux()
			mux.Handle("/t/{topic}/g/{group}", g.Wrap(c.rule, writeErr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = Principal(r)
			})))
			r := httptest.NewRequest("GET", c.path, nil)
			if !c.plaintext {
				r.TLS = &tls.ConnectionState{}
			}
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body)
			}
			if seen != c.principal {
				t.Fatalf("handler saw principal %q, want %q", seen, c.principal)
			}
			if got := w.Header().Values("WWW-Authenticate"); strings.Join(got, "|") != strings.Join(c.challenges, "|") {
				t.Fatalf("WWW-Authenticate %q, want %q", got, c.challenges)
			}
		})
	}
}

// TestGuardNoEnumeration: a wrong password and an unknown user get the same
// answer, and both are counted and audited.
func TestGuardNoEnumeration(t *testing.T) {
	u := newUsers(t)
	var logs bytes.Buffer
	counts := map[string]int{}
	g := New(Config{Basic: sasl.NewAuthenticator(u.lookup), Lookup: u.lookup,
		Audit:            slog.New(slog.NewJSONHandler(&logs, nil)),
		OnAuthentication: func(scheme string, ok bool) { counts[scheme+"/"+map[bool]string{true: "ok", false: "fail"}[ok]]++ }})
	h := g.Wrap(Authenticated(), writeErr, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	answer := func(user, pass string) (int, string, string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.TLS = &tls.ConnectionState{}
		r.SetBasicAuth(user, pass)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String(), strings.Join(w.Header().Values("WWW-Authenticate"), "|")
	}
	s1, b1, c1 := answer("alice", "wrong")
	s2, b2, c2 := answer("nobody", "wrong")
	if s1 != 401 || s1 != s2 || b1 != b2 || c1 != c2 {
		t.Fatalf("wrong password %d %q %q, unknown user %d %q %q", s1, b1, c1, s2, b2, c2)
	}
	if s, _, _ := answer("alice", "alice-pw"); s != 200 {
		t.Fatalf("right password: %d", s)
	}
	if counts["basic/fail"] != 2 || counts["basic/ok"] != 1 {
		t.Fatalf("counts %v", counts)
	}
	var failures int
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["event"] != "authentication" || m["result"] != "failure" || m["scheme"] != "basic" {
			t.Fatalf("audit line %s", line)
		}
		failures++
	}
	if failures != 2 {
		t.Fatalf("%d audit lines, want 2:\n%s", failures, logs.String())
	}
}

// TestGuardBasicCache: a verified password is remembered, but a changed
// credential is checked afresh at once.
func TestGuardBasicCache(t *testing.T) {
	u := newUsers(t)
	g := New(Config{Basic: sasl.NewAuthenticator(u.lookup), Lookup: u.lookup})
	if !g.checkBasic("alice", "alice-pw") || len(g.cache.ok) != 1 {
		t.Fatalf("first check: cache %d", len(g.cache.ok))
	}
	if !g.checkBasic("alice", "alice-pw") {
		t.Fatal("cached check failed")
	}
	u.set(t, "alice", "new-pw", sasl.ScramSHA512)
	if g.checkBasic("alice", "alice-pw") {
		t.Fatal("the old password passed after the credential changed")
	}
	if !g.checkBasic("alice", "new-pw") {
		t.Fatal("the new password failed")
	}
	u.mu.Lock()
	delete(u.creds, "alice/"+string(sasl.ScramSHA512))
	u.mu.Unlock()
	if g.checkBasic("alice", "new-pw") {
		t.Fatal("a deleted user passed")
	}
}

// TestNilGuard: without a guard every route is served as before.
func TestNilGuard(t *testing.T) {
	var g *Guard
	served := false
	h := g.Wrap(Rule{}, writeErr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = Check(r, kmsg.ACLOperationAll, kmsg.ACLResourceTypeCluster, acl.ClusterName) && Require(r, kmsg.ACLOperationAll, kmsg.ACLResourceTypeCluster, acl.ClusterName) == nil
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if !served {
		t.Fatal("a nil guard refused")
	}
}

// tokenStore holds delegation tokens as the metadata image would, changed by
// the test as the controller changes them (renewed, expired, removed).
type tokenStore struct {
	mu     sync.Mutex
	tokens map[string]sasl.Token
}

func (s *tokenStore) set(id string, tok sasl.Token) {
	s.mu.Lock()
	s.tokens[id] = tok
	s.mu.Unlock()
}

func (s *tokenStore) remove(id string) {
	s.mu.Lock()
	delete(s.tokens, id)
	s.mu.Unlock()
}

func (s *tokenStore) lookup(id string) (sasl.Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.tokens[id]
	return tok, ok
}

// TestGuardDelegationTokens: a delegation token sent as "Bearer <id>.<hmac>"
// authenticates as its owner, whose ACLs apply, only over TLS, and only while
// it is live: a token expired early, removed, or whose expiry the clock
// passes is refused at its next request, although the same credential was
// accepted a moment before (a cache of accepted tokens would pass it). A JWT
// still goes to the OAUTHBEARER validator.
func TestGuardDelegationTokens(t *testing.T) {
	const secret = "token-key"
	u := newUsers(t)
	is := newIssuer(t)
	bearer, err := sasl.NewOAuthValidator(sasl.OAuthConfig{JWKS: is.jwks})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var clock struct {
		sync.Mutex
		now time.Time
	}
	clock.now = start
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.now }
	store := &tokenStore{tokens: map[string]sasl.Token{}}
	store.set("tok-1", sasl.Token{Owner: "User:alice", Expiry: start.Add(time.Hour)})
	authn := sasl.NewAuthenticator(u.lookup).WithDelegationTokens(secret, store.lookup)
	counts := map[string]int{}
	cfgs := map[string]Config{
		"with OAUTHBEARER": {Basic: authn, Lookup: u.lookup, Bearer: bearer, Token: authn.VerifyToken, Authorizer: authorizer, Now: now,
			OnAuthentication: func(scheme string, ok bool) { counts[scheme+"/"+map[bool]string{true: "ok", false: "fail"}[ok]]++ }},
		"without OAUTHBEARER": {Basic: authn, Lookup: u.lookup, Token: authn.VerifyToken, Authorizer: authorizer, Now: now},
	}
	tokenAuth := func(id string) string { return "Bearer " + id + "." + sasl.TokenPassword(sasl.TokenHMAC(secret, id)) }
	basicChallenge, invalid := `Basic realm="strata", charset="UTF-8"`, `Bearer realm="strata", error="invalid_token"`
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			clock.Lock()
			clock.now = start
			clock.Unlock()
			store.set("tok-1", sasl.Token{Owner: "User:alice", Expiry: start.Add(time.Hour)})
			g := New(cfg)
			read := Needs(OnTopic(kmsg.ACLOperationRead, "topic"), OnGroup(kmsg.ACLOperationRead, "group"))
			var seen string
			mux := http.NewServeMux()
			mux.Handle("/t/{topic}/g/{group}", g.Wrap(read, writeErr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = Principal(r)
			})))
			for _, step := range []struct {
				name      string
				change    func() // applied before the request
				path      string
				plaintext bool
				auth      string
				want      int
				principal string
				challenge string // the Bearer challenge of a 401
			}{
				{name: "live token", path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 200, principal: "User:alice"},
				{name: "the owner's ACLs apply", path: "/t/other/g/app", auth: tokenAuth("tok-1"), want: 403},
				{name: "refused over plaintext", path: "/t/orders/g/app", plaintext: true, auth: tokenAuth("tok-1"), want: 401, challenge: `Bearer realm="strata"`},
				{name: "wrong hmac", path: "/t/orders/g/app", auth: "Bearer tok-1." + sasl.TokenPassword(sasl.TokenHMAC(secret, "tok-2")), want: 401, challenge: invalid},
				{name: "unknown token", path: "/t/orders/g/app", auth: tokenAuth("tok-2"), want: 401, challenge: invalid},
				{name: "hmac not base64", path: "/t/orders/g/app", auth: "Bearer tok-1.!!", want: 401, challenge: invalid},
				{name: "live again", path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 200, principal: "User:alice"},
				{name: "expired early", change: func() { store.set("tok-1", sasl.Token{Owner: "User:alice", Expiry: now().Add(-time.Millisecond)}) },
					path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 401, challenge: invalid},
				{name: "renewed", change: func() { store.set("tok-1", sasl.Token{Owner: "User:alice", Expiry: now().Add(10 * time.Second)}) },
					path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 200, principal: "User:alice"},
				{name: "its expiry passes", change: func() { clock.Lock(); clock.now = clock.now.Add(11 * time.Second); clock.Unlock() },
					path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 401, challenge: invalid},
				{name: "renewed once more", change: func() { store.set("tok-1", sasl.Token{Owner: "User:alice", Expiry: now().Add(time.Hour)}) },
					path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 200, principal: "User:alice"},
				{name: "removed", change: func() { store.remove("tok-1") }, path: "/t/orders/g/app", auth: tokenAuth("tok-1"), want: 401, challenge: invalid},
			} {
				if step.change != nil {
					step.change()
				}
				seen = ""
				r := httptest.NewRequest("GET", step.path, nil)
				if !step.plaintext {
					r.TLS = &tls.ConnectionState{}
				}
				r.Header.Set("Authorization", step.auth)
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, r)
				if w.Code != step.want || seen != step.principal {
					t.Fatalf("%s: status %d principal %q, want %d %q: %s", step.name, w.Code, seen, step.want, step.principal, w.Body)
				}
				if w.Code == 401 {
					if got, want := w.Header().Values("WWW-Authenticate"), []string{basicChallenge, step.challenge}; strings.Join(got, "|") != strings.Join(want, "|") {
						t.Fatalf("%s: WWW-Authenticate %q, want %q", step.name, got, want)
					}
				}
			}
		})
	}
	if counts["token/ok"] != 5 || counts["token/fail"] != 6 {
		t.Errorf("token checks counted %v, want 5 successes and 6 failures", counts)
	}

	// Beside tokens, a JWT is still validated as OAUTHBEARER's.
	g := New(cfgs["with OAUTHBEARER"])
	var seen string
	h := g.Wrap(Authenticated(), writeErr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = Principal(r) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.TLS = &tls.ConnectionState{}
	r.Header.Set("Authorization", "Bearer "+is.token(t, "carol", time.Now().Add(time.Hour)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || seen != "User:carol" {
		t.Fatalf("JWT beside tokens: %d %q: %s", w.Code, seen, w.Body)
	}
}
