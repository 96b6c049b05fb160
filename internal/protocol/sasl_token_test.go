package protocol

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/sasl"
)

// TestSASLDelegationTokenLogin: a franz-go client logging in with a delegation
// token (scram.Auth.IsToken) is served as the token's owner and marked token
// authenticated; a user's login is not; the session lasts no longer than the
// token (KIP-368).
func TestSASLDelegationTokenLogin(t *testing.T) {
	const secret = "token-secret"
	expiry := time.Now().Add(time.Hour)
	cred, err := sasl.NewCredential(sasl.ScramSHA512, "alice-secret", sasl.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	authn := sasl.NewAuthenticator(func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
		return cred, user == "alice" && m == sasl.ScramSHA512
	}).WithDelegationTokens(secret, func(id string) (sasl.Token, bool) {
		return sasl.Token{Owner: "User:bob", Expiry: expiry}, id == "tok-1"
	})
	type seen struct {
		principal   string
		token, sasl bool
	}
	var mu sync.Mutex
	var got []seen
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		mu.Lock()
		got = append(got, seen{c.Principal(), c.TokenAuthenticated(), c.SASLAuthenticated()})
		mu.Unlock()
		return echoHandler(ctx, c, r)
	}), func(s *Server) {
		s.SASL = &SASLConfig{Mechanisms: []sasl.Mechanism{sasl.ScramSHA512}, Authenticator: authn, SessionLifetime: 24 * time.Hour}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, tc := range []struct {
		auth scram.Auth
		want seen
	}{
		{scram.Auth{User: "tok-1", Pass: sasl.TokenPassword(sasl.TokenHMAC(secret, "tok-1")), IsToken: true}, seen{"User:bob", true, true}},
		{scram.Auth{User: "alice", Pass: "alice-secret"}, seen{"User:alice", false, true}},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.SASL(tc.auth.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Request(ctx, metadataRequest("t"))
		cl.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.auth.User, err)
		}
		mu.Lock()
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("%s: handler saw %+v, want %+v", tc.auth.User, got, tc.want)
		}
		mu.Unlock()
	}

	// The SaslAuthenticate answer's session lifetime is the token's.
	c := dial(t, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = string(sasl.ScramSHA512)
	c.roundTrip(hs, 1, 1)
	mech := scram.Auth{User: "tok-1", Pass: sasl.TokenPassword(sasl.TokenHMAC(secret, "tok-1")), IsToken: true}.AsSha512Mechanism()
	sess, msg, err := mech.Authenticate(ctx, "broker")
	if err != nil {
		t.Fatal(err)
	}
	var lifetime time.Duration
	for corr := int32(2); ; corr++ {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = msg
		ar := c.roundTrip(auth, 1, corr).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			t.Fatalf("SaslAuthenticate: %+v", ar)
		}
		done, next, err := sess.Challenge(ar.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			lifetime = time.Duration(ar.SessionLifetimeMillis) * time.Millisecond
			break
		}
		msg = next
	}
	if lifetime <= 0 || lifetime > time.Until(expiry)+time.Second {
		t.Errorf("session lifetime %v, want at most the token's remaining %v", lifetime, time.Until(expiry))
	}
}
