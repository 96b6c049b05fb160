package sasl

import (
	"errors"
	"testing"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func tokenClient(mech Mechanism, id, password string) kgosasl.Mechanism {
	a := scram.Auth{User: id, Pass: password, IsToken: true}
	if mech == ScramSHA512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// TestTokenHMAC pins the HMAC to Kafka's: HMAC-SHA512 of the token id under
// the secret key's UTF-8 bytes (DelegationTokenManager.createHmac). The value
// was computed with `printf %s tok-1 | openssl dgst -sha512 -hmac secret -binary | base64 -w0`.
func TestTokenHMAC(t *testing.T) {
	const want = "kQYOHuevydbjB7lxWWehuvKCrnhF+98y7YvUj5EPUBXMivUMqNSlokLKj1OcEru2zAGCcnJxfIgr6ptokkiB7A=="
	if got := TokenPassword(TokenHMAC("secret", "tok-1")); got != want {
		t.Fatalf("TokenPassword = %s, want %s", got, want)
	}
}

// TestTokenLogin logs in with franz-go's SCRAM client in token mode
// (scram.Auth.IsToken: the tokenauth=true extension): the login authenticates
// as the token's owner, a user's login is not token-authenticated, and a wrong
// HMAC, an unknown token and an expired token fail alike at the proof.
func TestTokenLogin(t *testing.T) {
	const secret = "cluster-token-secret"
	now := time.UnixMilli(1_000_000)
	live := map[string]Token{
		"tok-live":    {Owner: "User:alice", Expiry: now.Add(time.Hour)},
		"tok-expired": {Owner: "User:alice", Expiry: now.Add(-time.Millisecond)},
	}
	users := newStore(t, map[string]string{"alice": "alice-secret"}, ScramMechanisms...)
	a := NewAuthenticator(users.lookup).WithDelegationTokens(secret, func(id string) (Token, bool) {
		tok, ok := live[id]
		return tok, ok
	})
	a.tokens.now = func() time.Time { return now }
	pw := func(id string) string { return TokenPassword(TokenHMAC(secret, id)) }

	for _, mech := range ScramMechanisms {
		t.Run(string(mech), func(t *testing.T) {
			x, _, err := run(t, a, mech, tokenClient(mech, "tok-live", pw("tok-live")))
			if err != nil {
				t.Fatalf("token login: %v", err)
			}
			owner, ok := x.(interface{ TokenOwner() (string, bool) }).TokenOwner()
			if !ok || owner != "User:alice" || x.User() != "tok-live" {
				t.Fatalf("token login: owner %q %v, user %q; want User:alice as a token login", owner, ok, x.User())
			}
			if exp := x.(interface{ SessionExpiry() time.Time }).SessionExpiry(); !exp.Equal(now.Add(time.Hour)) {
				t.Errorf("SessionExpiry = %v, want the token's expiry", exp)
			}
			// Twice: the second login uses the cached credential.
			if _, _, err := run(t, a, mech, tokenClient(mech, "tok-live", pw("tok-live"))); err != nil {
				t.Fatalf("second token login: %v", err)
			}
			x, _, err = run(t, a, mech, scramClient(mech, "alice", "alice-secret"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := x.(interface{ TokenOwner() (string, bool) }).TokenOwner(); ok {
				t.Error("a user's login reports a token owner")
			}
			for name, c := range map[string]kgosasl.Mechanism{
				"wrong hmac":             tokenClient(mech, "tok-live", pw("other")),
				"unknown token":          tokenClient(mech, "tok-none", pw("tok-none")),
				"expired token":          tokenClient(mech, "tok-expired", pw("tok-expired")),
				"user password as token": tokenClient(mech, "alice", "alice-secret"),
			} {
				if _, step, err := run(t, a, mech, c); !errors.Is(err, ErrAuthFailed) || step != 1 {
					t.Errorf("%s: step %d err %v, want ErrAuthFailed at the proof", name, step, err)
				}
			}
		})
	}

	// Without delegation tokens a token login is refused at once.
	plain := NewAuthenticator(users.lookup)
	if _, _, err := run(t, plain, ScramSHA256, tokenClient(ScramSHA256, "tok-live", pw("tok-live"))); !errors.Is(err, ErrUnsupportedFeature) {
		t.Errorf("token login without tokens: %v, want ErrUnsupportedFeature", err)
	}
}

// TestVerifyToken: a token presented whole (the HTTP API's form) names its
// owner only while it is live and with its own HMAC; every other case fails
// alike, and so does every token without delegation tokens on.
func TestVerifyToken(t *testing.T) {
	const secret = "cluster-token-secret"
	now := time.UnixMilli(1_000_000)
	live := map[string]Token{
		"tok-live":    {Owner: "User:alice", Expiry: now.Add(time.Hour)},
		"tok-edge":    {Owner: "User:bob", Expiry: now},
		"tok-expired": {Owner: "User:alice", Expiry: now.Add(-time.Millisecond)},
	}
	users := newStore(t, map[string]string{"alice": "alice-secret"}, ScramSHA512)
	a := NewAuthenticator(users.lookup).WithDelegationTokens(secret, func(id string) (Token, bool) {
		tok, ok := live[id]
		return tok, ok
	})
	mac := func(id string) []byte { return TokenHMAC(secret, id) }
	for _, c := range []struct {
		name, id string
		mac      []byte
		a        *Authenticator
		owner    string // "": refused
	}{
		{"live", "tok-live", mac("tok-live"), a, "User:alice"},
		{"expiring at this instant", "tok-edge", mac("tok-edge"), a, "User:bob"},
		{"expired", "tok-expired", mac("tok-expired"), a, ""},
		{"another token's hmac", "tok-live", mac("tok-edge"), a, ""},
		{"hmac under another key", "tok-live", TokenHMAC("other-key", "tok-live"), a, ""},
		{"unknown token", "tok-none", mac("tok-none"), a, ""},
		{"empty hmac", "tok-live", nil, a, ""},
		{"a user's name and password", "alice", []byte("alice-secret"), a, ""},
		{"tokens off", "tok-live", mac("tok-live"), NewAuthenticator(users.lookup), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			owner, ok := c.a.VerifyToken(c.id, c.mac, now)
			if owner != c.owner || ok != (c.owner != "") {
				t.Fatalf("VerifyToken = %q %v, want %q", owner, ok, c.owner)
			}
		})
	}
}
