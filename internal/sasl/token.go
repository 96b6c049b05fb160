package sasl

// Delegation tokens (KIP-48): a client logs in with SCRAM, the token id as
// the user name, the token's HMAC (base64) as the password and the SCRAM
// extension tokenauth=true. The HMAC is never stored: it is HMAC-SHA512 of
// the token id under the cluster's token secret key, so every node with the
// key derives it, and from it the token's SCRAM credential, as Kafka's
// DelegationTokenManager does. A successful token login authenticates as the
// token's owner, and the exchange reports itself token-authenticated
// (TokenOwner), which bars the session from creating or renewing tokens.

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"sync"
	"time"
)

// TokenHMAC is a delegation token's HMAC: HMAC-SHA512 of the token id under
// the secret key (Kafka's delegation.token.secret.key, used as UTF-8 bytes).
func TokenHMAC(secretKey, tokenID string) []byte {
	m := hmac.New(sha512.New, []byte(secretKey))
	m.Write([]byte(tokenID))
	return m.Sum(nil)
}

// TokenPassword is the password a client logs in with: the HMAC in standard
// base64, as Kafka's clients encode it.
func TokenPassword(hmac []byte) string { return base64.StdEncoding.EncodeToString(hmac) }

// Token is what a token login needs to know of a live token.
type Token struct {
	Owner  string    // the principal the login authenticates as, "User:alice"
	Expiry time.Time // after it the token no longer logs in
}

// TokenLookup finds a delegation token by id.
type TokenLookup func(tokenID string) (Token, bool)

// maxTokenCredentials bounds the cache of derived token credentials; when it
// is full it is emptied, and the next logins derive theirs again.
const maxTokenCredentials = 4096

// tokens is an Authenticator's delegation-token support.
type tokens struct {
	secretKey string
	lookup    TokenLookup
	now       func() time.Time

	mu    sync.Mutex
	creds map[tokenCredKey]Credential
}

type tokenCredKey struct {
	id   string
	mech Mechanism
}

// WithDelegationTokens lets SCRAM logins use the delegation tokens lookup
// finds, whose HMACs are keyed by secretKey; call it before the first Start.
func (a *Authenticator) WithDelegationTokens(secretKey string, lookup TokenLookup) *Authenticator {
	a.tokens = &tokens{secretKey: secretKey, lookup: lookup, now: time.Now, creds: map[tokenCredKey]Credential{}}
	return a
}

// token looks a live token up: ok is false for an unknown or expired one.
func (t *tokens) token(id string) (Token, bool) { return t.tokenAt(id, t.now()) }

// tokenAt is token at the time now.
func (t *tokens) tokenAt(id string, now time.Time) (Token, bool) {
	tok, ok := t.lookup(id)
	if !ok || !tok.Expiry.IsZero() && now.After(tok.Expiry) {
		return Token{}, false
	}
	return tok, true
}

// VerifyToken checks a delegation token presented whole, without a SCRAM
// exchange (the HTTP API takes it so): it returns the token's owner when
// hmac is the HMAC of token id and the token is live at now. Every call looks
// the token up afresh, so an expiry, a renewal or a removal counts at once.
// ok is false without delegation tokens, and for an unknown, expired or wrong
// token alike; the HMAC is derived either way, so all take the same work.
func (a *Authenticator) VerifyToken(id string, mac []byte, now time.Time) (owner string, ok bool) {
	if a.tokens == nil {
		return "", false
	}
	match := hmac.Equal(TokenHMAC(a.tokens.secretKey, id), mac)
	tok, live := a.tokens.tokenAt(id, now)
	if !match || !live {
		return "", false
	}
	return tok.Owner, true
}

// credential is the SCRAM credential of token id for h's mechanism, derived
// once from its HMAC with a random salt and Kafka's minimum iterations (the
// client learns both from the server-first message).
func (t *tokens) credential(id string, h scramHash) (Credential, error) {
	key := tokenCredKey{id, h.mech}
	t.mu.Lock()
	c, ok := t.creds[key]
	t.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := NewCredential(h.mech, TokenPassword(TokenHMAC(t.secretKey, id)), MinIterations)
	if err != nil {
		return Credential{}, err
	}
	t.mu.Lock()
	if len(t.creds) >= maxTokenCredentials {
		clear(t.creds)
	}
	t.creds[key] = c
	t.mu.Unlock()
	return c, nil
}
