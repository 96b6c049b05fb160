package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/sasl"
	"github.com/strata-stream/strata/internal/wait"
)

const testTokenSecret = "token-secret"

var testTokenConfig = TokenConfig{SecretKey: testTokenSecret, MaxLifetime: 10 * time.Hour, ExpiryTime: time.Hour}

// TestPlanDelegationTokens walks one token through creation, renewals and
// expiries on a fake clock, with the lifetimes Kafka's controller computes
// (DelegationTokenControlManager): expiry = min(max, now + min(expiry time,
// asked period)), max = issue + min(max lifetime, asked max).
func TestPlanDelegationTokens(t *testing.T) {
	t0 := time.UnixMilli(1_000_000_000)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := func(d time.Duration) int64 { return at(d).UnixMilli() }

	// Creation.
	for _, tc := range []struct {
		name            string
		cfg             TokenConfig
		req             CreateToken
		wantMax, wantEx int64
		wantErr         error
	}{
		{"defaults", testTokenConfig, CreateToken{Owner: "User:alice", Requester: "User:alice"}, ms(10 * time.Hour), ms(time.Hour), nil},
		{"shorter max", testTokenConfig, CreateToken{Owner: "User:alice", Requester: "User:alice", MaxLifetimeMs: 30 * 60 * 1000}, ms(30 * time.Minute), ms(30 * time.Minute), nil},
		{"longer max ignored", testTokenConfig, CreateToken{Owner: "User:alice", Requester: "User:alice", MaxLifetimeMs: 100 * 3600 * 1000}, ms(10 * time.Hour), ms(time.Hour), nil},
		{"kafka's defaults", TokenConfig{SecretKey: "k"}, CreateToken{Owner: "User:alice", Requester: "User:alice", MaxLifetimeMs: -1}, ms(7 * 24 * time.Hour), ms(24 * time.Hour), nil},
		{"disabled", TokenConfig{}, CreateToken{Owner: "User:alice", Requester: "User:alice"}, 0, 0, ErrTokenAuthDisabled},
		{"group renewer", testTokenConfig, CreateToken{Owner: "User:alice", Requester: "User:alice", Renewers: []string{"User:bob", "Group:ops"}}, 0, 0, ErrInvalidPrincipal},
	} {
		recs, tok, err := PlanCreateDelegationToken(tc.cfg, t0, "tok", tc.req)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("create %s: err %v, want %v", tc.name, err, tc.wantErr)
			continue
		}
		if err != nil {
			if recs != nil {
				t.Errorf("create %s: records %v with an error", tc.name, recs)
			}
			continue
		}
		if tok.IssueTimestamp != t0.UnixMilli() || tok.MaxTimestamp != tc.wantMax || tok.ExpiryTimestamp != tc.wantEx || len(recs) != 1 {
			t.Errorf("create %s: %+v (%d records), want max %d expiry %d", tc.name, tok, len(recs), tc.wantMax, tc.wantEx)
		}
	}

	recs, _, err := PlanCreateDelegationToken(testTokenConfig, t0, "tok", CreateToken{Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"}})
	if err != nil {
		t.Fatal(err)
	}
	img := apply(t, metadata.NewImage(), recs...)
	hmac := sasl.TokenHMAC(testTokenSecret, "tok")

	// Renewals and expiries, each against the image the steps before left.
	type op int
	const (
		renew op = iota
		expire
	)
	for _, s := range []struct {
		name      string
		op        op
		now       time.Duration
		principal string
		hmac      []byte
		period    int64
		cfg       TokenConfig
		wantEx    int64 // expiry after the step
		wantErr   error
		removed   bool
	}{
		{"renew default period", renew, 30 * time.Minute, "User:alice", hmac, -1, testTokenConfig, ms(90 * time.Minute), nil, false},
		{"renew by a renewer, shorter", renew, 40 * time.Minute, "User:bob", hmac, 10 * 60 * 1000, testTokenConfig, ms(50 * time.Minute), nil, false},
		{"renew longer than expiry time", renew, 45 * time.Minute, "User:alice", hmac, 5 * 3600 * 1000, testTokenConfig, ms(105 * time.Minute), nil, false},
		{"renew by the requester", renew, 50 * time.Minute, "User:admin", hmac, -1, testTokenConfig, 0, ErrTokenOwnerMismatch, false},
		{"renew by another", renew, 50 * time.Minute, "User:eve", hmac, -1, testTokenConfig, 0, ErrTokenOwnerMismatch, false},
		{"renew unknown hmac", renew, 50 * time.Minute, "User:alice", []byte("nope"), -1, testTokenConfig, 0, ErrTokenNotFound, false},
		{"renew disabled", renew, 50 * time.Minute, "User:alice", hmac, -1, TokenConfig{}, 0, ErrTokenAuthDisabled, false},
		{"expire later", expire, 100 * time.Minute, "User:alice", hmac, 60 * 60 * 1000, testTokenConfig, ms(160 * time.Minute), nil, false},
		{"renew long after expiry", renew, 9*time.Hour + 30*time.Minute, "User:alice", hmac, -1, testTokenConfig, 0, ErrTokenExpired, false},
		{"expire by another", expire, 110 * time.Minute, "User:eve", hmac, -1, testTokenConfig, 0, ErrTokenOwnerMismatch, false},
		{"renew within", renew, 150 * time.Minute, "User:alice", hmac, -1, testTokenConfig, ms(210 * time.Minute), nil, false},
		{"renew past expiry", renew, 211 * time.Minute, "User:alice", hmac, -1, testTokenConfig, 0, ErrTokenExpired, false},
		{"expire past expiry with a period", expire, 211 * time.Minute, "User:alice", hmac, 1000, testTokenConfig, 0, ErrTokenExpired, false},
		{"expire now by a renewer", expire, 211 * time.Minute, "User:bob", hmac, -1, testTokenConfig, ms(211 * time.Minute), nil, true},
		{"expire removed", expire, 212 * time.Minute, "User:alice", hmac, -1, testTokenConfig, 0, ErrTokenNotFound, false},
	} {
		var recs []metadata.Record
		var ex int64
		var err error
		if s.op == renew {
			recs, ex, err = PlanRenewDelegationToken(img, s.cfg, at(s.now), s.principal, s.hmac, s.period)
		} else {
			recs, ex, err = PlanExpireDelegationToken(img, s.cfg, at(s.now), s.principal, s.hmac, s.period)
		}
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
		}
		if err != nil {
			continue
		}
		if ex != s.wantEx {
			t.Fatalf("%s: expiry %d, want %d", s.name, ex, s.wantEx)
		}
		img = apply(t, img, recs...)
		tok, ok := img.DelegationToken("tok")
		switch {
		case s.removed && ok:
			t.Fatalf("%s: token still there", s.name)
		case !s.removed && (!ok || tok.ExpiryTimestamp != s.wantEx):
			t.Fatalf("%s: token %+v, want expiry %d", s.name, tok, s.wantEx)
		}
	}
}

// TestPlanRenewCappedByMaxLifetime: a renewal never moves the expiry past the
// token's maximum lifetime.
func TestPlanRenewCappedByMaxLifetime(t *testing.T) {
	t0 := time.UnixMilli(1_000_000_000)
	recs, tok, err := PlanCreateDelegationToken(testTokenConfig, t0, "tok", CreateToken{Owner: "User:alice", Requester: "User:alice", MaxLifetimeMs: 90 * 60 * 1000})
	if err != nil {
		t.Fatal(err)
	}
	img := apply(t, metadata.NewImage(), recs...)
	hmac := sasl.TokenHMAC(testTokenSecret, "tok")
	if _, ex, err := PlanRenewDelegationToken(img, testTokenConfig, t0.Add(40*time.Minute), "User:alice", hmac, -1); err != nil || ex != tok.MaxTimestamp {
		t.Errorf("renew: expiry %d err %v, want the maximum %d", ex, err, tok.MaxTimestamp)
	}
	if _, ex, err := PlanExpireDelegationToken(img, testTokenConfig, t0.Add(40*time.Minute), "User:alice", hmac, 24*3600*1000); err != nil || ex != tok.MaxTimestamp {
		t.Errorf("expire later: expiry %d err %v, want the maximum %d", ex, err, tok.MaxTimestamp)
	}
}

// TestPlanSweepDelegationTokens removes the tokens past their expiry or their
// maximum lifetime, and only those.
func TestPlanSweepDelegationTokens(t *testing.T) {
	t0 := time.UnixMilli(1_000_000_000)
	img := metadata.NewImage()
	for _, tok := range []metadata.DelegationToken{
		{ID: "live", ExpiryTimestamp: t0.UnixMilli(), MaxTimestamp: t0.UnixMilli() + 1},
		{ID: "expired", ExpiryTimestamp: t0.UnixMilli() - 1, MaxTimestamp: t0.UnixMilli() + 1},
	} {
		tok.Owner, tok.Requester = "User:a", "User:a"
		img = apply(t, img, &metadata.DelegationTokenRecord{DelegationToken: tok})
	}
	recs := PlanSweepDelegationTokens(img, t0)
	if len(recs) != 1 || recs[0].(*metadata.RemoveDelegationTokenRecord).ID != "expired" {
		t.Fatalf("sweep at t0: %+v, want the expired token only", recs)
	}
	if recs := PlanSweepDelegationTokens(img, t0.Add(2*time.Millisecond)); len(recs) != 2 {
		t.Fatalf("sweep after both: %d records, want 2", len(recs))
	}
}

// TestControllerRemovesExpiredTokens: the active controller creates and
// renews tokens on its clock, and its background duty removes a token once
// the (fake) clock passes its expiry, while a renewed one stays.
func TestControllerRemovesExpiredTokens(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, func(c *Config) {
		c.Tokens = testTokenConfig
		c.Tokens.ExpiryCheckInterval = 20 * time.Millisecond
	})
	var short, long metadata.DelegationToken
	cl.retry(func(c *Controller) (err error) {
		short, _, err = c.CreateDelegationToken(ctxT(t), CreateToken{Owner: "User:alice", Requester: "User:alice"})
		return err
	})
	cl.retry(func(c *Controller) (err error) {
		var hmac []byte
		long, hmac, err = c.CreateDelegationToken(ctxT(t), CreateToken{Owner: "User:bob", Requester: "User:bob"})
		if err == nil && string(hmac) != string(sasl.TokenHMAC(testTokenSecret, long.ID)) {
			t.Errorf("CreateDelegationToken's HMAC is not the token's")
		}
		return err
	})
	if short.ID == long.ID || short.IssueTimestamp != clock.Now().UnixMilli() || short.ExpiryTimestamp != clock.Now().Add(time.Hour).UnixMilli() {
		t.Fatalf("created %+v and %+v", short, long)
	}
	clock.Advance(50 * time.Minute)
	cl.retry(func(c *Controller) error {
		_, err := c.RenewDelegationToken(ctxT(t), "User:bob", sasl.TokenHMAC(testTokenSecret, long.ID), -1)
		return err
	})
	clock.Advance(11 * time.Minute) // the short token is past its expiry, the renewed one is not
	wait.For(t, "the expired token removed", func() bool {
		_, ok := cl.image().DelegationToken(short.ID)
		return !ok
	})
	if _, ok := cl.image().DelegationToken(long.ID); !ok {
		t.Fatal("the renewed token was removed too")
	}
	cl.retry(func(c *Controller) error {
		_, err := c.RenewDelegationToken(ctxT(t), "User:alice", sasl.TokenHMAC(testTokenSecret, short.ID), -1)
		if !errors.Is(err, ErrTokenNotFound) {
			t.Errorf("renewing the removed token: %v, want ErrTokenNotFound", err)
		}
		return nil
	})
}
