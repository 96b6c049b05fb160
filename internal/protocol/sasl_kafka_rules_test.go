package protocol

// Tests of SaslServerAuthenticator's rules (KIP-152, KIP-368) that a client or
// an attacker can observe: when a session ends, when and how a connection may
// re-authenticate, and what is served meanwhile.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
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

// expectClosedUnanswered checks the server closes the connection without
// writing anything more.
func (c *rawClient) expectClosedUnanswered() {
	c.t.Helper()
	rest, err := io.ReadAll(c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
	if len(rest) > 0 {
		c.t.Fatalf("answered with %d bytes before closing", len(rest))
	}
}

// TestSASLReauthMustKeepMechanism: Kafka's REAUTH_BAD_MECHANISM. A
// re-authentication's SaslHandshake naming another mechanism than the
// session's is answered without error, and its SaslAuthenticate closes the
// connection unanswered, also when it would authenticate the same principal.
func TestSASLReauthMustKeepMechanism(t *testing.T) {
	ts, log := startSASLServer(t, time.Hour)
	c := dial(t, ts.addr)
	_, corr := c.saslLogin(alicePlain, 1)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = string(sasl.ScramSHA256)
	if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake: %s", kerr.ErrorForCode(hr.ErrorCode))
	}
	_, first, err := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism().Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = first
	c.send(auth, 1, corr+1)
	c.expectClosedUnanswered()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("closed with %v, want ErrAuthentication", err)
	}
	if log.count("SCRAM-SHA-256  reauth fail") != 1 {
		t.Errorf("audit entries %v, want the failed re-authentication", log.entries)
	}
}

// TestSASLReauthRefusals: where Kafka does not begin a re-authentication
// (KafkaChannel.maybeBeginServerReauthentication) its API layer answers the
// SASL request with ILLEGAL_SASL_STATE and the connection stays open: a session
// that never expires cannot re-authenticate, nor one that began its last
// re-authentication less than a second ago; a SaslAuthenticate without a
// SaslHandshake after authentication is refused the same way.
func TestSASLReauthRefusals(t *testing.T) {
	refused := func(t *testing.T, c *rawClient, corr int32) {
		t.Helper()
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslHandshake: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(hr.ErrorCode))
		}
		c.roundTrip(metadataRequest("still-served"), 12, corr+1)
	}
	t.Run("no session expiry", func(t *testing.T) {
		ts, _ := startSASLServer(t, 0)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		refused(t, c, corr)
	})
	t.Run("more than once a second", func(t *testing.T) {
		clk := newFakeClock()
		ts, log := startSASLServer(t, time.Hour, withClock(clk))
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		_, corr = c.saslLogin(alicePlain, corr) // the first re-authentication may follow at once
		refused(t, c, corr)
		clk.advance(time.Second)
		c.saslLogin(alicePlain, corr+2)
		if n := log.count("PLAIN alice reauth ok"); n != 2 {
			t.Errorf("%d re-authentications, want 2: %v", n, log.entries)
		}
	})
	t.Run("SaslAuthenticate after authentication", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
		ar := c.roundTrip(auth, 1, corr).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslAuthenticate: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(ar.ErrorCode))
		}
		c.roundTrip(metadataRequest("still-served"), 12, corr+1)
	})
}

// TestSASLNothingServedDuringReauthentication: once a re-authentication began,
// the connection serves only its SaslAuthenticate requests (Kafka's
// authenticator owns the channel until it completes), and once a session
// expired, nothing but a re-authentication's SaslHandshake, not even
// ApiVersions.
func TestSASLNothingServedDuringReauthentication(t *testing.T) {
	t.Run("during re-authentication", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
			t.Fatalf("re-authentication handshake: %s", kerr.ErrorForCode(hr.ErrorCode))
		}
		// Answered with its own kind, then closed (TestSASLIllegalStateDuringExchange).
		c.roundTrip(metadataRequest("mid-reauth"), 12, corr+1)
		c.expectClosedUnanswered()
		if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("closed with %v, want ErrAuthentication", err)
		}
	})
	t.Run("ApiVersions after expiry", func(t *testing.T) {
		clk := newFakeClock()
		ts, _ := startSASLServer(t, time.Minute, withClock(clk))
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		clk.advance(2 * time.Minute)
		c.send(kmsg.NewPtrApiVersionsRequest(), 3, corr)
		c.expectClosedUnanswered()
	})
}

// TestSASLSSLIgnoresPrincipalMappingRules: on a SASL_SSL listener the
// principal is the SASL login's, and Kafka applies
// ssl.principal.mapping.rules only on SSL listeners: a client certificate no
// rule maps does not stop a SASL client.
func TestSASLSSLIgnoresPrincipalMappingRules(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "broker-1")
	srvCerts, err := certs.New(certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := certs.ParsePrincipalMappingRules("RULE:^CN=(alice),O=strata-test$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := sasl.NewCredential(sasl.ScramSHA512, "alice-secret", sasl.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	authn := sasl.NewAuthenticator(func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
		return cred, user == "alice" && m == sasl.ScramSHA512
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	principals := make(chan string, 10)
	ts := serveOn(t, NewTLSListener(ln, srvCerts.ServerConfig()), HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		principals <- c.Principal()
		return echoHandler(ctx, c, r)
	}), func(s *Server) {
		s.Principals = rules
		s.SASL = &SASLConfig{Mechanisms: []sasl.Mechanism{sasl.Plain}, Authenticator: authn}
	})
	bob := ca.Issue(t, "bob", "bob")
	cliCerts, err := certs.New(certs.Files{CertFile: bob.CertFile, KeyFile: bob.KeyFile, CAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.DialTLSConfig(cliCerts.DialConfig(ts.addr)),
		kgo.SASL(alicePlain), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := cl.Request(ctx, metadataRequest("sasl-ssl")); err != nil {
		t.Fatalf("a SASL client with a certificate no rule maps: %v", err)
	}
	if p := <-principals; p != "User:alice" {
		t.Errorf("principal %q, want the SASL login's User:alice", p)
	}
}

// TestSASLApiVersionsOnceBeforeHandshake: before authentication Kafka takes
// one ApiVersions, before SaslHandshake (SaslServerAuthenticator's
// HANDSHAKE_OR_VERSIONS_REQUEST state; one answered with an error does not
// count, so a client may retry at another version). A second one closes the
// connection unanswered, and one during the exchange is answered
// ILLEGAL_SASL_STATE and closes it: an unauthenticated client cannot keep a
// connection busy with ApiVersions.
func TestSASLApiVersionsOnceBeforeHandshake(t *testing.T) {
	ts, _ := startSASLServer(t, 0)
	t.Run("twice", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.write(rawFrame(apiVersionsKey, 300, 1, []byte{0xFF, 0xFF}))
		if resp := c.read(kmsg.NewPtrApiVersionsRequest(), 0, 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("ApiVersions v300: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp := c.roundTrip(apiVersionsV3(), 3, 2).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions v3: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.send(apiVersionsV3(), 3, 3)
		c.expectClosedUnanswered()
		if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("closed with %v, want ErrAuthentication", err)
		}
	})
	t.Run("during the exchange", func(t *testing.T) {
		c := dial(t, ts.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = string(sasl.ScramSHA256)
		if hr := c.roundTrip(hs, 1, 1).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
			t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(hr.ErrorCode))
		}
		if resp := c.roundTrip(apiVersionsV3(), 3, 2).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("ApiVersions mid-exchange: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.expectClosedUnanswered()
	})
	t.Run("once, then a login", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.roundTrip(apiVersionsV3(), 3, 1)
		_, corr := c.saslLogin(alicePlain, 2)
		c.roundTrip(apiVersionsV3(), 3, corr) // once authenticated, at will
		c.roundTrip(apiVersionsV3(), 3, corr+1)
	})
}

// apiVersionsV3 is a valid ApiVersions request for v3.
func apiVersionsV3() *kmsg.ApiVersionsRequest {
	return &kmsg.ApiVersionsRequest{ClientSoftwareName: "strata-test", ClientSoftwareVersion: "0.1.0", NodeID: -1}
}

// TestSASLFailureMessages: a failure Kafka's mechanism explains (a
// SaslAuthenticationException: PLAIN's checks, an authorization id other than
// the user, a re-authentication as another principal) reaches the client with
// Kafka's message; any other failure gets the generic one, which names
// authentication or re-authentication.
func TestSASLFailureMessages(t *testing.T) {
	ts, _ := startSASLServer(t, time.Hour)
	const authzid = "Authentication failed: Client requested an authorization id that is different from username"
	const badLogin = "Authentication failed: Invalid username or password"
	for _, tc := range []struct {
		name, mech, msg, want string
	}{
		{"plain authzid", "PLAIN", "admin\x00alice\x00alice-secret", authzid},
		{"plain wrong password", "PLAIN", "\x00alice\x00guess", badLogin},
		{"plain unknown user", "PLAIN", "\x00mallory\x00guess", badLogin},
		{"plain authzid and wrong password", "PLAIN", "admin\x00alice\x00guess", badLogin},
		{"plain no user", "PLAIN", "\x00\x00pw", "Authentication failed: username not specified"},
		{"plain no password", "PLAIN", "\x00alice\x00", "Authentication failed: password not specified"},
		{"plain one token", "PLAIN", "alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{"plain five tokens", "PLAIN", "a\x00b\x00c\x00d\x00e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"},
		{"scram authzid", "SCRAM-SHA-256", "n,a=bob,n=alice,r=abcdef", authzid},
		{"scram malformed", "SCRAM-SHA-512", "n,,r=abcdef",
			"Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Mechanism = tc.mech
			c.roundTrip(hs, 1, 1)
			auth := kmsg.NewPtrSASLAuthenticateRequest()
			auth.SASLAuthBytes = []byte(tc.msg)
			ar := c.roundTrip(auth, 1, 2).(*kmsg.SASLAuthenticateResponse)
			if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage != tc.want {
				t.Fatalf("answer %v %q, want SASL_AUTHENTICATION_FAILED %q", kerr.ErrorForCode(ar.ErrorCode), derefOr(ar.ErrorMessage), tc.want)
			}
			c.expectClosed()
		})
	}
	t.Run("re-authentication", func(t *testing.T) {
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), 1)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "SCRAM-SHA-256"
		c.roundTrip(hs, 1, corr)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("n,,r=abcdef")
		ar := c.roundTrip(auth, 1, corr+1).(*kmsg.SASLAuthenticateResponse)
		const want = "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		if ar.ErrorMessage == nil || *ar.ErrorMessage != want {
			t.Fatalf("answer %q, want %q", derefOr(ar.ErrorMessage), want)
		}
	})
	t.Run("another principal", func(t *testing.T) {
		authn := sasl.NewAuthenticator(func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
			c, err := sasl.NewCredential(m, "pw", sasl.MinIterations)
			return c, err == nil && (user == "alice" || user == "bob")
		})
		ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
			s.SASL = &SASLConfig{Mechanisms: []sasl.Mechanism{sasl.Plain}, Authenticator: authn, SessionLifetime: time.Hour}
		})
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism(), 1)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		c.roundTrip(hs, 1, corr)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00bob\x00pw")
		ar := c.roundTrip(auth, 1, corr+1).(*kmsg.SASLAuthenticateResponse)
		const want = "Cannot change principals during re-authentication from User.alice: User.bob"
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage != want {
			t.Fatalf("answer %v %q, want %q", kerr.ErrorForCode(ar.ErrorCode), derefOr(ar.ErrorMessage), want)
		}
	})
}

// derefOr is *p, or "<nil>".
func derefOr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestSASLReauthWhateverTheLogin: Kafka begins a re-authentication of any
// session with an expiry (KafkaChannel.maybeBeginServerReauthentication asks
// nothing else), also one that logged in with SaslAuthenticate v0 and so was
// never told its lifetime; and a re-authentication may start with SaslHandshake
// v0, whose tokens then travel raw.
func TestSASLReauthWhateverTheLogin(t *testing.T) {
	t.Run("login with SaslAuthenticate v0", func(t *testing.T) {
		ts, log := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		c.roundTrip(hs, 1, 1)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
		if ar := c.roundTrip(auth, 0, 2).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 {
			t.Fatalf("SaslAuthenticate v0: %v", kerr.ErrorForCode(ar.ErrorCode))
		}
		c.saslLogin(alicePlain, 3)
		c.roundTrip(metadataRequest("after-reauth"), 12, 5)
		if log.count("PLAIN alice reauth ok") != 1 {
			t.Fatalf("audit entries %v", log.entries)
		}
	})
	t.Run("re-authentication with SaslHandshake v0", func(t *testing.T) {
		ts, log := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		c.handshakeV0At("PLAIN", corr)
		c.writeToken([]byte("\x00alice\x00alice-secret"))
		if tok := c.readToken(); len(tok) != 0 {
			t.Fatalf("PLAIN's answer %q, want an empty token", tok)
		}
		c.roundTrip(metadataRequest("after-reauth"), 12, corr+1)
		if log.count("PLAIN alice reauth ok") != 1 {
			t.Fatalf("audit entries %v", log.entries)
		}
	})
	t.Run("raw re-authentication as another mechanism", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		c.handshakeV0At("SCRAM-SHA-256", corr)
		_, first, err := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism().Authenticate(context.Background(), "broker")
		if err != nil {
			t.Fatal(err)
		}
		c.writeToken(first)
		c.expectClosedUnanswered()
	})
}

// TestSASLIllegalStateDuringExchange: once SaslHandshake v1 began an exchange
// (authentication or re-authentication), Kafka's SaslServerAuthenticator
// answers any request but SaslAuthenticate with that request's own error
// response, ILLEGAL_SASL_STATE, and then closes the connection; before the
// handshake, and in a re-authentication refused for its mechanism, such a
// request closes it unanswered.
func TestSASLIllegalStateDuringExchange(t *testing.T) {
	ts, _ := startSASLServer(t, time.Hour)
	handshake := func(c *rawClient, mech string, corr int32) {
		t.Helper()
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = mech
		if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
			t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(hr.ErrorCode))
		}
	}
	t.Run("Metadata in the login", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(c, "PLAIN", 1)
		if resp := c.roundTrip(metadataRequest("mid-login"), 13, 2).(*kmsg.MetadataResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("Metadata v13: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.expectClosedUnanswered()
	})
	t.Run("SaslHandshake in the login", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(c, "PLAIN", 1)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		if hr := c.roundTrip(hs, 1, 2).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != kerr.IllegalSaslState.Code || len(hr.SupportedMechanisms) != 0 {
			t.Fatalf("second SaslHandshake: %+v, want ILLEGAL_SASL_STATE and no mechanisms", hr)
		}
		c.expectClosedUnanswered()
	})
	t.Run("Metadata in a re-authentication", func(t *testing.T) {
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		handshake(c, "PLAIN", corr)
		c.roundTrip(metadataRequest("mid-reauth"), 12, corr+1) // v12: no top-level error code
		c.expectClosedUnanswered()
	})
	t.Run("Metadata before the handshake", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.send(metadataRequest("early"), 12, 1)
		c.expectClosedUnanswered()
	})
	t.Run("a re-authentication refused for its mechanism", func(t *testing.T) {
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		handshake(c, "SCRAM-SHA-256", corr)
		c.send(metadataRequest("bad-mechanism"), 12, corr+1)
		c.expectClosedUnanswered()
	})
}

// TestSASLReauthBoundedBySASLMaxReceive: Kafka's authenticator reads every
// frame of a re-authentication after its SaslHandshake as it reads a first
// authentication's, bounded by sasl.server.max.receive.size
// (SaslServerAuthenticator.authenticate); a larger one fails the
// authentication and closes the connection. Once the re-authentication is
// done, frames are bounded by the request size limit again.
func TestSASLReauthBoundedBySASLMaxReceive(t *testing.T) {
	const oversized = DefaultSASLMaxReceiveBytes + 1
	announce := binary.BigEndian.AppendUint32(nil, oversized)
	t.Run("SaslAuthenticate", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		if hr := c.roundTrip(hs, 1, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
			t.Fatalf("re-authentication handshake: %s", kerr.ErrorForCode(hr.ErrorCode))
		}
		c.write(announce)
		c.expectClosedUnanswered()
		if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("closed with %v, want ErrFrameTooLarge", err)
		}
	})
	t.Run("after the re-authentication", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour)
		c := dial(t, ts.addr)
		_, corr := c.saslLogin(alicePlain, 1)
		_, corr = c.saslLogin(alicePlain, corr)
		topics := make([]string, oversized/32+1)
		for i := range topics {
			topics[i] = fmt.Sprintf("topic-with-a-long-name-%08d", i) // 31 bytes, 33 with its length
		}
		req := metadataRequest(topics...)
		if n := len(frameOf(req, 12, corr, kmsg.StringPtr("raw"))); n <= oversized {
			t.Fatalf("a %d-byte frame is within the SASL bound", n)
		}
		if resp := c.roundTrip(req, 12, corr).(*kmsg.MetadataResponse); len(resp.Topics) != len(topics) {
			t.Fatalf("answered %d topics, want %d", len(resp.Topics), len(topics))
		}
	})
}
