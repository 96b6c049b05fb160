package sasl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// tokenIssuer signs test tokens with an ECDSA key published in a JWKS file.
type tokenIssuer struct {
	key  *ecdsa.PrivateKey
	kid  string
	jwks string
}

func newTokenIssuer(t *testing.T) *tokenIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ti := &tokenIssuer{key: key, kid: "k1", jwks: filepath.Join(t.TempDir(), "jwks.json")}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: ti.kid, Algorithm: string(jose.ES256), Use: "sig"}}}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ti.jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return ti
}

func (ti *tokenIssuer) sign(t *testing.T, key *ecdsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", ti.kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOAuthBearer(t *testing.T) {
	ti := newTokenIssuer(t)
	v, err := NewOAuthValidator(OAuthConfig{JWKS: ti.jwks, Issuer: "https://idp", Audience: "strata"})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(store{}.lookup).WithOAuthBearer(v)
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "alice", "iss": "https://idp", "aud": "strata", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := ti.sign(t, ti.key, claims(nil))
	x, _, err := run(t, a, OAuthBearer, oauth.Auth{Token: good}.AsMechanism())
	if err != nil || x.User() != "alice" {
		t.Fatalf("good token: %q %v", x.User(), err)
	}
	if exp := x.(interface{ SessionExpiry() time.Time }).SessionExpiry(); exp.Unix() != now.Add(time.Hour).Unix() {
		t.Fatalf("session expiry %v", exp)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// Kafka's JWKS validator (ValidatorAccessTokenValidator) refuses these:
	// the exchange answers the RFC 7628 error challenge, and the client's
	// %x01 then fails with it as the message.
	for name, tok := range map[string]string{
		"expired":           ti.sign(t, ti.key, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })),
		"no exp":            ti.sign(t, ti.key, claims(func(c map[string]any) { delete(c, "exp") })),
		"no iat":            ti.sign(t, ti.key, claims(func(c map[string]any) { delete(c, "iat") })),
		"negative iat":      ti.sign(t, ti.key, claims(func(c map[string]any) { c["iat"] = -1 })),
		"issuer":            ti.sign(t, ti.key, claims(func(c map[string]any) { c["iss"] = "https://evil" })),
		"audience":          ti.sign(t, ti.key, claims(func(c map[string]any) { c["aud"] = "other" })),
		"no principal":      ti.sign(t, ti.key, claims(func(c map[string]any) { delete(c, "sub") })),
		"blank principal":   ti.sign(t, ti.key, claims(func(c map[string]any) { c["sub"] = "  " })),
		"empty scope":       ti.sign(t, ti.key, claims(func(c map[string]any) { c["scope"] = "" })),
		"blank scope entry": ti.sign(t, ti.key, claims(func(c map[string]any) { c["scope"] = []any{"read", " "} })),
		"duplicate scope":   ti.sign(t, ti.key, claims(func(c map[string]any) { c["scope"] = []any{"read", " read"} })),
		"null scope entry":  ti.sign(t, ti.key, claims(func(c map[string]any) { c["scope"] = []any{"read", nil} })),
		"foreign key":       ti.sign(t, other, claims(nil)),
		"not a jwt":         "abc.def.ghi",
		"unsigned":          "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.",
	} {
		x, _ := a.Start(OAuthBearer)
		msg := []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
		const status = `{"status":"invalid_token"}`
		if out, err := x.Step(msg); err != nil || string(out) != status || x.Done() {
			t.Errorf("%s: %q %v, want the challenge %s", name, out, err, status)
			continue
		}
		var r *Refusal
		if _, err := x.Step([]byte{1}); !errors.As(err, &r) || r.Message != status || !errors.Is(err, ErrAuthFailed) || x.Done() {
			t.Errorf("%s: after %%x01: %v, want a refusal with %s", name, err, status)
		}
	}
	// A scope is a string or an array of strings; Kafka's validator takes a
	// claim of another shape as no scope.
	for _, scope := range []any{"read write", []any{"read", "write"}, 7} {
		x, _ := a.Start(OAuthBearer)
		tok := ti.sign(t, ti.key, claims(func(c map[string]any) { c["scope"] = scope }))
		if _, err := x.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err != nil || !x.Done() {
			t.Errorf("scope %v: %v", scope, err)
		}
	}
	// After the error challenge the client may try another token, as Kafka's
	// OAuthBearerSaslServer allows.
	x, _ = a.Start(OAuthBearer)
	if _, err := x.Step([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01")); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Step([]byte("n,,\x01auth=Bearer " + good + "\x01\x01")); err != nil || !x.Done() {
		t.Fatalf("a good token after the error challenge: %v", err)
	}
	// An authorization id other than the token's principal: Kafka's message.
	x, _ = a.Start(OAuthBearer)
	var r *Refusal
	_, err = x.Step([]byte("n,a=bob,\x01auth=Bearer " + good + "\x01\x01"))
	if want := "Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)"; !errors.As(err, &r) || r.Message != want {
		t.Errorf("authzid bob: %v, want %q", err, want)
	}
	for _, msg := range []string{"", "n,,auth=Bearer x", "n,,\x01auth=Basic x\x01\x01", "n,,\x01host=a\x01\x01",
		"y,,\x01auth=Bearer x\x01\x01", // Kafka takes only the gs2 flag "n"
	} {
		x, _ := a.Start(OAuthBearer)
		if _, err := x.Step([]byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", msg, err)
		}
	}
	// A custom principal claim.
	v2, err := NewOAuthValidator(OAuthConfig{JWKS: ti.jwks, PrincipalClaim: "preferred_username"})
	if err != nil {
		t.Fatal(err)
	}
	x2, _ := NewAuthenticator(store{}.lookup).WithOAuthBearer(v2).Start(OAuthBearer)
	tok := ti.sign(t, ti.key, claims(func(c map[string]any) { c["preferred_username"] = "bob" }))
	if _, err := x2.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err != nil || x2.User() != "bob" {
		t.Fatalf("custom claim: %q %v", x2.User(), err)
	}
	if _, err := NewAuthenticator(store{}.lookup).Start(OAuthBearer); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("OAUTHBEARER without a validator: %v", err)
	}
	if _, err := NewOAuthValidator(OAuthConfig{JWKS: filepath.Join(t.TempDir(), "missing.json")}); err == nil {
		t.Fatal("a missing JWKS was accepted")
	}
}

// FuzzOAuthBearer: arbitrary client messages never panic and never authenticate
// (an invalid token is answered with an error challenge, not an error).
func FuzzOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=Bearer x\x01host=h\x01\x01"))
	dir := f.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: string(jose.ES256)}}})
	path := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		f.Fatal(err)
	}
	v, err := NewOAuthValidator(OAuthConfig{JWKS: path})
	if err != nil {
		f.Fatal(err)
	}
	a := NewAuthenticator(store{}.lookup).WithOAuthBearer(v)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, _ := a.Start(OAuthBearer)
		if x.Step(msg); x.Done() {
			t.Fatalf("authenticated with %q", msg)
		}
	})
}
