package controller

// Delegation tokens (KIP-48) as Kafka's DelegationTokenControlManager plans
// them: the active controller creates, renews and expires tokens with its own
// clock and removes those past their expiry (sweepExpiredTokens). A token is
// named by its HMAC in renewals and expiries; the controller finds it by
// deriving each token's HMAC from the secret key.

import (
	"context"
	"crypto/subtle"
	"io"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/sasl"
)

// TokenConfig turns delegation tokens on.
type TokenConfig struct {
	// SecretKey keys every token's HMAC (delegation.token.secret.key); every
	// node of the cluster must have the same. Empty: tokens are off and the
	// token APIs answer DELEGATION_TOKEN_AUTH_DISABLED.
	SecretKey string
	// MaxLifetime bounds a token's life however often it is renewed
	// (delegation.token.max.lifetime.ms, 7 days).
	MaxLifetime time.Duration
	// ExpiryTime is how long a token lives from its creation or last renewal
	// (delegation.token.expiry.time.ms, 24 hours), and the longest renewal.
	ExpiryTime time.Duration
	// ExpiryCheckInterval is how often the active controller removes the
	// tokens past their expiry (delegation.token.expiry.check.interval.ms, 1
	// hour). Until then an expired token answers DELEGATION_TOKEN_EXPIRED to
	// renewals and is still described, as in Kafka; it no longer logs in.
	ExpiryCheckInterval time.Duration
}

// Default token lifetimes, Kafka's.
const (
	DefaultTokenMaxLifetime = 7 * 24 * time.Hour
	DefaultTokenExpiryTime  = 24 * time.Hour
	DefaultTokenExpiryCheck = time.Hour
)

func (c TokenConfig) withDefaults() TokenConfig {
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultTokenMaxLifetime
	}
	if c.ExpiryTime == 0 {
		c.ExpiryTime = DefaultTokenExpiryTime
	}
	if c.ExpiryCheckInterval == 0 {
		c.ExpiryCheckInterval = DefaultTokenExpiryCheck
	}
	return c
}

// Errors of the token plans, with Kafka's codes.
var (
	ErrTokenAuthDisabled  = &metadata.KafkaError{Code: kerr.DelegationTokenAuthDisabled.Code, Msg: "delegation token authentication is disabled"}
	ErrTokenNotFound      = &metadata.KafkaError{Code: kerr.DelegationTokenNotFound.Code, Msg: "delegation token not found"}
	ErrTokenExpired       = &metadata.KafkaError{Code: kerr.DelegationTokenExpired.Code, Msg: "delegation token expired"}
	ErrTokenOwnerMismatch = &metadata.KafkaError{Code: kerr.DelegationTokenOwnerMismatch.Code, Msg: "the principal is neither the owner nor a renewer of the token"}
	ErrInvalidPrincipal   = &metadata.KafkaError{Code: kerr.InvalidPrincipalType.Code, Msg: "invalid principal type"}
)

// CreateToken asks for a token.
type CreateToken struct {
	Owner     string   // the principal the token will authenticate as
	Requester string   // the principal asking
	Renewers  []string // principals that may renew it; each must be a User
	// MaxLifetimeMs shortens the configured maximum lifetime; <= 0: the
	// configured one.
	MaxLifetimeMs int64
}

// IsUserPrincipal reports whether p is a User principal, the only type a
// renewer may have.
func IsUserPrincipal(p string) bool { return strings.HasPrefix(p, "User:") }

// PlanCreateDelegationToken plans the record of a new token with id, issued
// at now.
func PlanCreateDelegationToken(cfg TokenConfig, now time.Time, id string, req CreateToken) ([]metadata.Record, metadata.DelegationToken, error) {
	if cfg.SecretKey == "" {
		return nil, metadata.DelegationToken{}, ErrTokenAuthDisabled
	}
	cfg = cfg.withDefaults()
	maxLifetime := cfg.MaxLifetime.Milliseconds()
	if req.MaxLifetimeMs > 0 {
		maxLifetime = min(maxLifetime, req.MaxLifetimeMs)
	}
	nowMs := now.UnixMilli()
	maxTs := addMs(nowMs, maxLifetime)
	for _, r := range req.Renewers {
		if !IsUserPrincipal(r) {
			return nil, metadata.DelegationToken{}, ErrInvalidPrincipal
		}
	}
	tok := metadata.DelegationToken{
		ID: id, Owner: req.Owner, Requester: req.Requester, Renewers: req.Renewers,
		IssueTimestamp: nowMs, MaxTimestamp: maxTs, ExpiryTimestamp: min(maxTs, addMs(nowMs, cfg.ExpiryTime.Milliseconds())),
	}
	return []metadata.Record{&metadata.DelegationTokenRecord{DelegationToken: tok}}, tok, nil
}

// PlanRenewDelegationToken plans moving the expiry of the token whose HMAC is
// hmac to now + periodMs (the configured expiry time when periodMs <= 0 or
// longer), never past its maximum lifetime; principal must own or renew it.
// It returns the new expiry in milliseconds.
func PlanRenewDelegationToken(img *metadata.Image, cfg TokenConfig, now time.Time, principal string, hmac []byte, periodMs int64) ([]metadata.Record, int64, error) {
	if cfg.SecretKey == "" {
		return nil, 0, ErrTokenAuthDisabled
	}
	cfg = cfg.withDefaults()
	tok, ok := TokenByHMAC(img, cfg.SecretKey, hmac)
	if !ok {
		return nil, 0, ErrTokenNotFound
	}
	nowMs := now.UnixMilli()
	if tok.Expired(nowMs) {
		return nil, 0, ErrTokenExpired
	}
	if !tok.OwnerOrRenewer(principal) {
		return nil, 0, ErrTokenOwnerMismatch
	}
	renew := cfg.ExpiryTime.Milliseconds()
	if periodMs > 0 {
		renew = min(renew, periodMs)
	}
	return withExpiry(tok, min(tok.MaxTimestamp, addMs(nowMs, renew)))
}

// PlanExpireDelegationToken plans the expiry of the token whose HMAC is hmac:
// a negative periodMs removes it now, else its expiry moves to now + periodMs
// (never past its maximum lifetime). principal must own or renew it. It
// returns the new expiry in milliseconds.
func PlanExpireDelegationToken(img *metadata.Image, cfg TokenConfig, now time.Time, principal string, hmac []byte, periodMs int64) ([]metadata.Record, int64, error) {
	if cfg.SecretKey == "" {
		return nil, 0, ErrTokenAuthDisabled
	}
	tok, ok := TokenByHMAC(img, cfg.SecretKey, hmac)
	if !ok {
		return nil, 0, ErrTokenNotFound
	}
	if !tok.OwnerOrRenewer(principal) {
		return nil, 0, ErrTokenOwnerMismatch
	}
	nowMs := now.UnixMilli()
	switch {
	case periodMs < 0:
		return []metadata.Record{&metadata.RemoveDelegationTokenRecord{ID: tok.ID}}, nowMs, nil
	case tok.Expired(nowMs):
		return nil, 0, ErrTokenExpired
	}
	return withExpiry(tok, min(tok.MaxTimestamp, addMs(nowMs, periodMs)))
}

func withExpiry(tok *metadata.DelegationToken, expiry int64) ([]metadata.Record, int64, error) {
	t := *tok
	t.ExpiryTimestamp = expiry
	return []metadata.Record{&metadata.DelegationTokenRecord{DelegationToken: t}}, expiry, nil
}

// PlanSweepDelegationTokens removes every token past its expiry or maximum
// lifetime at now.
func PlanSweepDelegationTokens(img *metadata.Image, now time.Time) []metadata.Record {
	var recs []metadata.Record
	for _, t := range img.DelegationTokens() {
		if t.Expired(now.UnixMilli()) {
			recs = append(recs, &metadata.RemoveDelegationTokenRecord{ID: t.ID})
		}
	}
	return recs
}

// TokenByHMAC finds the token whose HMAC under secretKey is hmac.
func TokenByHMAC(img *metadata.Image, secretKey string, hmac []byte) (*metadata.DelegationToken, bool) {
	for _, t := range img.DelegationTokens() {
		if subtle.ConstantTimeCompare(sasl.TokenHMAC(secretKey, t.ID), hmac) == 1 {
			return t, true
		}
	}
	return nil, false
}

// addMs is now + d, saturating at the largest timestamp (Kafka's sum).
func addMs(now, d int64) int64 {
	if d > 0 && now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// NewTokenID is a fresh token id: a random UUID in Kafka's text form.
func NewTokenID(rnd io.Reader) (string, error) {
	u, err := metadata.NewUUID(rnd)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// CreateDelegationToken creates a token (PlanCreateDelegationToken) and
// returns it with its HMAC.
func (c *Controller) CreateDelegationToken(ctx context.Context, req CreateToken) (metadata.DelegationToken, []byte, error) {
	var tok metadata.DelegationToken
	var planErr error
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		id, err := NewTokenID(c.cfg.Rand)
		if err != nil {
			return nil, err
		}
		var recs []metadata.Record
		recs, tok, planErr = PlanCreateDelegationToken(c.cfg.Tokens, c.cfg.clock(), id, req)
		return recs, nil
	})
	if err == nil {
		err = planErr
	}
	if err != nil {
		return metadata.DelegationToken{}, nil, err
	}
	return tok, sasl.TokenHMAC(c.cfg.Tokens.SecretKey, tok.ID), nil
}

// RenewDelegationToken renews a token (PlanRenewDelegationToken) and returns
// its new expiry in milliseconds.
func (c *Controller) RenewDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error) {
	return c.changeToken(ctx, func(img *metadata.Image) ([]metadata.Record, int64, error) {
		return PlanRenewDelegationToken(img, c.cfg.Tokens, c.cfg.clock(), principal, hmac, periodMs)
	})
}

// ExpireDelegationToken expires a token (PlanExpireDelegationToken) and
// returns its new expiry in milliseconds.
func (c *Controller) ExpireDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error) {
	return c.changeToken(ctx, func(img *metadata.Image) ([]metadata.Record, int64, error) {
		return PlanExpireDelegationToken(img, c.cfg.Tokens, c.cfg.clock(), principal, hmac, periodMs)
	})
}

func (c *Controller) changeToken(ctx context.Context, plan func(*metadata.Image) ([]metadata.Record, int64, error)) (int64, error) {
	var expiry int64
	var planErr error
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, expiry, planErr = plan(img)
		return recs, nil
	})
	if err == nil {
		err = planErr
	}
	return expiry, err
}

// sweepExpiredTokens removes the tokens past their expiry, in one proposal,
// when the applied image has any (so that the check costs no proposal
// otherwise).
func (c *Controller) sweepExpiredTokens() error {
	if len(PlanSweepDelegationTokens(c.Image(), c.cfg.clock())) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	n := 0
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		recs := PlanSweepDelegationTokens(img, c.cfg.clock())
		n = len(recs)
		return recs, nil
	})
	if err == nil && n > 0 {
		c.log.Info("removed expired delegation tokens", "tokens", n)
	}
	return err
}
