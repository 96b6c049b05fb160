package protocol

// Tests of SaslServerAuthenticator's rules (KIP-152, KIP-368) that a client or
// an attacker can observe: when a session ends, when and how a connection may
// re-authenticate, and what is served meanwhile.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/sasl"
)

// fakeClock is a SASLConfig clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// withClock makes the SASL setup run on clk.
func withClock(clk *fakeClock) func(*Server) {
	return func(s *Server) { s.SASL.now = clk.now }
}

var alicePlain = plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()

// saslLogin runs SaslHandshake v1 and SaslAuthenticate v1 for mech from
// correlation id corr on, checks every answer succeeded, and returns the last
// SaslAuthenticate answer and the next correlation id.
func (c *rawClient) saslLogin(mech ksasl.Mechanism, corr int32) (*kmsg.SASLAuthenticateResponse, int32) {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		c.t.Fatalf("SaslHandshake %s: %s", mech.Name(), kerr.ErrorForCode(hr.ErrorCode))
	}
	corr++
	sess, msg, err := mech.Authenticate(context.Background(), "broker")
	if err != nil {
		c.t.Fatal(err)
	}
	for {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = msg
		ar := c.roundTrip(auth, 1, corr).(*kmsg.SASLAuthenticateResponse)
		corr++
		if ar.ErrorCode != 0 {
			c.t.Fatalf("SaslAuthenticate %s: %s", mech.Name(), kerr.ErrorForCode(ar.ErrorCode))
		}
		done, next, err := sess.Challenge(ar.SASLAuthBytes)
		if err != nil {
			c.t.Fatal(err)
		}
		if done {
			return ar, corr
		}
		msg = next
	}
}

// TestSASLCredentialExpiryEndsSession: a login whose credential expires (a
// delegation token here, an OAUTHBEARER token alike) lasts no longer than the
// credential also when no session lifetime is configured, as Kafka's
// calcCompletionTimesAndReturnSessionLifetimeMs does with
// connections.max.reauth.ms unset: the answer carries the time left, and a
// request after it closes the connection.
func TestSASLCredentialExpiryEndsSession(t *testing.T) {
	const secret = "token-secret"
	clk := newFakeClock()
	expiry := clk.now().Add(90 * time.Second)
	authn := sasl.NewAuthenticator(func(string, sasl.Mechanism) (sasl.Credential, bool) { return sasl.Credential{}, false }).
		WithDelegationTokens(secret, func(id string) (sasl.Token, bool) {
			return sasl.Token{Owner: "User:bob", Expiry: expiry}, id == "tok-1"
		})
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.SASL = &SASLConfig{Mechanisms: []sasl.Mechanism{sasl.ScramSHA256}, Authenticator: authn}
		withClock(clk)(s)
	})
	c := dial(t, ts.addr)
	token := scram.Auth{User: "tok-1", Pass: sasl.TokenPassword(sasl.TokenHMAC(secret, "tok-1")), IsToken: true}
	ar, corr := c.saslLogin(token.AsSha256Mechanism(), 1)
	if want := time.Until(expiry).Milliseconds(); ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 90_000 {
		t.Fatalf("session lifetime %d ms, want the token's remaining ~%d ms", ar.SessionLifetimeMillis, want)
	}
	c.roundTrip(metadataRequest("in-time"), 12, corr)
	clk.advance(91 * time.Second)
	c.send(metadataRequest("late"), 12, corr+1)
	c.expectClosed()
}
