package sasl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628, KIP-255, KIP-768).
const OAuthBearer Mechanism = "OAUTHBEARER"

// signatureAlgorithms are the JWS algorithms accepted; never "none" or HMAC
// (a shared secret in a JWKS would let anyone holding it mint tokens).
var signatureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// OAuthConfig says how OAUTHBEARER tokens are validated: a JWT signed by a key of
// the JWKS, not expired (exp is required), from Issuer and for Audience when
// those are set; the principal is the PrincipalClaim ("sub" by default).
type OAuthConfig struct {
	// JWKS is a file path, or an http(s) URL, holding the JSON Web Key Set. It
	// is read again at most once every RefreshInterval (a failed read keeps the
	// keys loaded before).
	JWKS            string
	Issuer          string
	Audience        string
	PrincipalClaim  string
	RefreshInterval time.Duration // default one minute
	ClockSkew       time.Duration // leeway on exp, nbf and iat; default 30s
	Now             func() time.Time
}

// OAuthValidator validates bearer tokens; safe for concurrent use.
type OAuthValidator struct {
	cfg OAuthConfig
	mu  struct {
		sync.Mutex
		keys    *jose.JSONWebKeySet
		fetched time.Time
	}
}

// NewOAuthValidator loads the key set once; it fails when the keys cannot be read.
func NewOAuthValidator(cfg OAuthConfig) (*OAuthValidator, error) {
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Minute
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &OAuthValidator{cfg: cfg}
	keys, err := v.load()
	if err != nil {
		return nil, err
	}
	v.mu.keys, v.mu.fetched = keys, cfg.Now()
	return v, nil
}

// load reads and parses the key set.
func (v *OAuthValidator) load() (*jose.JSONWebKeySet, error) {
	var raw []byte
	var err error
	if strings.HasPrefix(v.cfg.JWKS, "https://") || strings.HasPrefix(v.cfg.JWKS, "http://") {
		raw, err = fetch(v.cfg.JWKS)
	} else {
		raw, err = os.ReadFile(v.cfg.JWKS)
	}
	if err != nil {
		return nil, fmt.Errorf("sasl: reading the JWKS: %w", err)
	}
	keys := new(jose.JSONWebKeySet)
	if err := json.Unmarshal(raw, keys); err != nil {
		return nil, fmt.Errorf("sasl: JWKS %s: %w", v.cfg.JWKS, err)
	}
	if len(keys.Keys) == 0 {
		return nil, fmt.Errorf("sasl: JWKS %s holds no keys", v.cfg.JWKS)
	}
	return keys, nil
}

func fetch(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// keys returns the key set, re-reading it when RefreshInterval has passed.
func (v *OAuthValidator) keys() *jose.JSONWebKeySet {
	v.mu.Lock()
	defer v.mu.Unlock()
	if now := v.cfg.Now(); now.Sub(v.mu.fetched) >= v.cfg.RefreshInterval {
		v.mu.fetched = now
		if keys, err := v.load(); err == nil {
			v.mu.keys = keys
		}
	}
	return v.mu.keys
}

// Validate checks a compact JWS token and returns its principal name and expiry.
func (v *OAuthValidator) Validate(token string) (user string, expiry time.Time, err error) {
	tok, err := jwt.ParseSigned(token, signatureAlgorithms)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %v", ErrAuthFailed, err)
	}
	var claims jwt.Claims
	custom := map[string]any{}
	if err := tok.Claims(v.keys(), &claims, &custom); err != nil {
		return "", time.Time{}, fmt.Errorf("%w: signature: %v", ErrAuthFailed, err)
	}
	if claims.Expiry == nil {
		return "", time.Time{}, fmt.Errorf("%w: the token has no exp claim", ErrAuthFailed)
	}
	want := jwt.Expected{Issuer: v.cfg.Issuer, Time: v.cfg.Now()}
	if v.cfg.Audience != "" {
		want.AnyAudience = jwt.Audience{v.cfg.Audience}
	}
	if err := claims.ValidateWithLeeway(want, v.cfg.ClockSkew); err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %v", ErrAuthFailed, err)
	}
	// Kafka's validator requires iat too, and checks the scope's shape.
	if claims.IssuedAt == nil || *claims.IssuedAt < 0 {
		return "", time.Time{}, fmt.Errorf("%w: the token has no valid iat claim", ErrAuthFailed)
	}
	if err := checkScope(custom["scope"]); err != nil {
		return "", time.Time{}, err
	}
	name, _ := custom[v.cfg.PrincipalClaim].(string)
	if name = trimJava(name); name == "" {
		return "", time.Time{}, fmt.Errorf("%w: no %q claim", ErrAuthFailed, v.cfg.PrincipalClaim)
	}
	return name, claims.Expiry.Time(), nil
}

// checkScope checks a scope claim as Kafka's ClaimValidationUtils.validateScopes
// does: a string, or an array of strings none blank and none twice (compared
// trimmed); a claim of another shape, or none, is no scope.
func checkScope(claim any) error {
	var scopes []any
	switch c := claim.(type) {
	case string:
		scopes = []any{c}
	case []any:
		scopes = c
	}
	seen := make(map[string]bool, len(scopes))
	for _, s := range scopes {
		str, _ := s.(string)
		if str = trimJava(str); str == "" || seen[str] {
			return fmt.Errorf("%w: scope %v: an entry is blank, not a string or repeated", ErrAuthFailed, claim)
		}
		seen[str] = true
	}
	return nil
}

// trimJava trims s as Java's String.trim does: every character up to ' '.
func trimJava(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// oauthExchange is the server side of OAUTHBEARER, as Kafka's
// OAuthBearerSaslServer: the client message
// "n,[a=authzid], \x01 auth=Bearer TOKEN \x01 [key=value \x01]... \x01"
// either authenticates (an empty answer), or, for a token that does not
// validate, is answered with RFC 7628's error challenge; the client then sends
// %x01 and is refused with that challenge as the message (or sends another
// client message).
type oauthExchange struct {
	v       *OAuthValidator
	user    string
	expiry  time.Time
	done    bool
	refused error // the last token's validation error, answered with the error challenge
}

// invalidToken is the error challenge (Kafka's, from its validator's
// "invalid_token" status).
const invalidToken = `{"status":"invalid_token"}`

func (x *oauthExchange) Step(in []byte) ([]byte, error) {
	if x.done {
		return nil, fmt.Errorf("%w: OAUTHBEARER exchange already finished", ErrMalformed)
	}
	if x.refused != nil && len(in) == 1 && in[0] == 0x01 {
		return nil, &Refusal{Err: x.refused, Message: invalidToken}
	}
	x.refused = nil
	if len(in) > maxMessageBytes {
		return nil, fmt.Errorf("%w: OAUTHBEARER message of %d bytes", ErrMalformed, len(in))
	}
	gs2, rest, ok := strings.Cut(string(in), "\x01")
	// The gs2 flag must be "n", as Kafka's OAuthBearerClientInitialResponse wants.
	if !ok || !strings.HasSuffix(rest, "\x01\x01") || !strings.HasPrefix(gs2, "n,") {
		return nil, fmt.Errorf("%w: not an OAUTHBEARER client message", ErrMalformed)
	}
	var token string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		if v, ok := strings.CutPrefix(kv, "auth="); ok {
			scheme, t, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || t == "" {
				return nil, fmt.Errorf("%w: auth is not a Bearer token", ErrMalformed)
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return nil, fmt.Errorf("%w: no auth=Bearer token", ErrMalformed)
	}
	user, expiry, err := x.v.Validate(token)
	if err != nil {
		x.refused = err
		return []byte(invalidToken), nil
	}
	if authzField, _, _ := strings.Cut(strings.TrimPrefix(gs2, "n,"), ","); authzField != "" {
		authzid, ok := strings.CutPrefix(authzField, "a=")
		if !ok {
			return nil, fmt.Errorf("%w: authzid %q", ErrMalformed, authzField)
		}
		if authzid != user {
			return nil, &Refusal{Err: ErrAuthFailed, Message: fmt.Sprintf(
				"Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzid, user)}
		}
	}
	x.user, x.expiry, x.done = user, expiry, true
	return nil, nil
}

func (x *oauthExchange) Done() bool           { return x.done }
func (x *oauthExchange) User() string         { return x.user }
func (x *oauthExchange) Mechanism() Mechanism { return OAuthBearer }

// SessionExpiry is when the token expires; the session must not outlive it.
func (x *oauthExchange) SessionExpiry() time.Time { return x.expiry }
