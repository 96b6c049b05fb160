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
	for name, tok := range map[string]string{
		"expired":      ti.sign(t, ti.key, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })),
		"no exp":       ti.sign(t, ti.key, claims(func(c map[string]any) { delete(c, "exp") })),
		"issuer":       ti.sign(t, ti.key, claims(func(c map[string]any) { c["iss"] = "https://evil" })),
		"audience":     ti.sign(t, ti.key, claims(func(c map[string]any) { c["aud"] = "other" })),
		"no principal": ti.sign(t, ti.key, claims(func(c map[string]any) { delete(c, "sub") })),
		"foreign key":  ti.sign(t, other, claims(nil)),
		"not a jwt":    "abc.def.ghi",
		"unsigned":     "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.",
	} {
		x, _ := a.Start(OAuthBearer)
		msg := []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
		if _, err := x.Step(msg); !errors.Is(err, ErrAuthFailed) || x.Done() {
			t.Errorf("%s: %v, want ErrAuthFailed", name, err)
		}
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

// FuzzOAuthBearer: arbitrary client messages never panic and never authenticate.
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
		if _, err := x.Step(msg); err == nil || x.Done() {
			t.Fatalf("authenticated with %q", msg)
		}
	})
}
