package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/sasl"
	"github.com/strata-stream/strata/internal/wait"
)

// authLog records OnAuthenticate calls.
type authLog struct {
	mu      sync.Mutex
	entries []string // "mech user reauth ok|fail"
}

func (l *authLog) record(_ *ConnInfo, mech sasl.Mechanism, user string, reauth bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := string(mech) + " " + user
	if reauth {
		e += " reauth"
	}
	if err != nil {
		e += " fail"
	} else {
		e += " ok"
	}
	l.entries = append(l.entries, e)
}

func (l *authLog) count(entry string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e == entry {
			n++
		}
	}
	return n
}

// startSASLServer serves echoHandler with SASL on; alice's password is
// alice-secret for both SCRAM mechanisms.
func startSASLServer(t *testing.T, lifetime time.Duration) (*testServer, *authLog) {
	t.Helper()
	creds := map[sasl.Mechanism]sasl.Credential{}
	for _, m := range sasl.ScramMechanisms {
		c, err := sasl.NewCredential(m, "alice-secret", sasl.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[m] = c
	}
	lookup := func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
		c, ok := creds[m]
		return c, ok && user == "alice"
	}
	log := &authLog{}
	var mu sync.Mutex
	principals := map[string]bool{}
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		mu.Lock()
		principals[c.Principal()] = true
		mu.Unlock()
		if c.Principal() != "User:alice" {
			t.Errorf("request served for principal %q", c.Principal())
		}
		return echoHandler(ctx, c, r)
	}), func(s *Server) {
		s.SASL = &SASLConfig{
			Mechanisms:      []sasl.Mechanism{sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain},
			Authenticator:   sasl.NewAuthenticator(lookup),
			SessionLifetime: lifetime,
			OnAuthenticate:  log.record,
		}
	})
	return ts, log
}

func TestSASLWithFranzGo(t *testing.T) {
	ts, log := startSASLServer(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for name, opt := range map[string]kgo.Opt{
		"SCRAM-SHA-256": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		"PLAIN":         kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), opt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Request(ctx, metadataRequest("t")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		cl.Close()
		if log.count(name+" alice ok") != 1 {
			t.Errorf("%s: audit entries %v", name, log.entries)
		}
	}
	// Wrong password and unknown user: the same error code and message.
	var msgs []string
	for _, a := range []scram.Auth{{User: "alice", Pass: "wrong"}, {User: "mallory", Pass: "wrong"}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.SASL(a.AsSha512Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Request(ctx, metadataRequest("t"))
		cl.Close()
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke != kerr.SaslAuthenticationFailed {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", a.User, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Errorf("wrong password and unknown user differ:\n%s\n%s", msgs[0], msgs[1])
	}
	if log.count("SCRAM-SHA-512 mallory fail") != 1 || log.count("SCRAM-SHA-512 alice fail") != 1 {
		t.Errorf("audit entries %v", log.entries)
	}
}

func TestSASLBeforeAuthentication(t *testing.T) {
	ts, _ := startSASLServer(t, 0)
	// ApiVersions is answered and lists the SASL keys; Metadata closes.
	c := dial(t, ts.addr)
	resp := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 1).(*kmsg.ApiVersionsResponse)
	found := 0
	for _, k := range resp.ApiKeys {
		if k.ApiKey == saslHandshakeKey || k.ApiKey == saslAuthenticateKey {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("ApiVersions lists %d SASL keys", found)
	}
	c.send(metadataRequest("x"), 12, 2)
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("closed with %v, want ErrAuthentication", err)
	}

	// A frame above the pre-authentication bound closes the connection.
	big := dial(t, ts.addr)
	big.write([]byte{0, 0x10, 0, 0}) // 1 MiB announced
	big.expectClosed()
	if err := ts.hooks.closeErr(t, big.addr()); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("closed with %v, want ErrFrameTooLarge", err)
	}

	// An unsupported mechanism gets the enabled list, then the connection closes.
	m := dial(t, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "GSSAPI"
	hr := m.roundTrip(hs, 1, 1).(*kmsg.SASLHandshakeResponse)
	if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hr.SupportedMechanisms) != 3 {
		t.Fatalf("handshake for GSSAPI: %+v", hr)
	}
	m.expectClosed()

	// SaslAuthenticate without a handshake is an illegal state.
	n := dial(t, ts.addr)
	ar := n.roundTrip(kmsg.NewPtrSASLAuthenticateRequest(), 2, 1).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate without handshake: %+v", ar)
	}
	n.expectClosed()

	// A malformed PLAIN message fails like a wrong password.
	p := dial(t, ts.addr)
	hs.Mechanism = "PLAIN"
	if hr := p.roundTrip(hs, 1, 1).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		t.Fatalf("PLAIN handshake: %+v", hr)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("no separators")
	if ar := p.roundTrip(auth, 1, 2).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("malformed PLAIN: %+v", ar)
	}
	p.expectClosed()
	checkServing(t, ts.addr)
}

func TestSASLServerWithoutSASL(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler))
	c := dial(t, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if hr := c.roundTrip(hs, 1, 1).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake without SASL: %+v", hr)
	}
}

// TestSASLSessionLifetime is KIP-368: franz-go re-authenticates before the
// session ends and keeps working; a raw client that does not is cut off.
func TestSASLSessionLifetime(t *testing.T) {
	const lifetime = 400 * time.Millisecond
	ts, log := startSASLServer(t, lifetime)
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	wait.For(t, "a re-authentication", func() bool {
		if _, err := cl.Request(ctx, metadataRequest("t")); err != nil {
			t.Fatal(err)
		}
		return log.count("SCRAM-SHA-256 alice reauth ok") > 0
	})

	// A raw PLAIN client that never re-authenticates.
	c := dial(t, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	c.roundTrip(hs, 1, 1)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	ar := c.roundTrip(auth, 1, 2).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("authenticate: %+v", ar)
	}
	c.roundTrip(metadataRequest("in-time"), 12, 3)
	expired := time.NewTimer(lifetime + 50*time.Millisecond) // the session must end; nothing to poll for
	<-expired.C
	c.send(metadataRequest("late"), 12, 4)
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("closed with %v, want ErrAuthentication", err)
	}
}
