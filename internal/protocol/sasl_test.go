package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
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
// alice-secret for both SCRAM mechanisms. opts adjust the Server after that.
func startSASLServer(t *testing.T, lifetime time.Duration, opts ...func(*Server)) (*testServer, *authLog) {
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
		for _, o := range opts {
			o(s)
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

	// SaslAuthenticate without a handshake closes the connection unanswered,
	// as any request but ApiVersions and SaslHandshake then does in Kafka.
	n := dial(t, ts.addr)
	n.send(kmsg.NewPtrSASLAuthenticateRequest(), 2, 1)
	n.expectClosedUnanswered()

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
	if hr := c.roundTrip(hs, 1, 1).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != kerr.IllegalSaslState.Code || len(hr.SupportedMechanisms) != 0 {
		t.Fatalf("handshake without SASL: %+v", hr)
	}
	// Kafka's API layer answers, with its message, and the connection stays.
	ar := c.roundTrip(kmsg.NewPtrSASLAuthenticateRequest(), 1, 2).(*kmsg.SASLAuthenticateResponse)
	if want := "SaslAuthenticate request received after successful authentication"; ar.ErrorCode != kerr.IllegalSaslState.Code || derefOr(ar.ErrorMessage) != want {
		t.Fatalf("authenticate without SASL: %v %q, want ILLEGAL_SASL_STATE %q", kerr.ErrorForCode(ar.ErrorCode), derefOr(ar.ErrorMessage), want)
	}
	c.roundTrip(metadataRequest("x"), 12, 3)
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
	// The lifetime left, counted from the broker's clock: at most the configured one.
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > lifetime.Milliseconds() {
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

// writeToken writes a raw SASL token (the framing after SaslHandshake v0).
func (c *rawClient) writeToken(token []byte) {
	c.t.Helper()
	c.write(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	c.write(token)
}

// readToken reads a raw SASL token.
func (c *rawClient) readToken() []byte {
	c.t.Helper()
	return c.readSized("SASL token")
}

// handshakeV0 sends SaslHandshake v0 for mech and checks it is accepted.
func (c *rawClient) handshakeV0(mech string) {
	c.t.Helper()
	c.handshakeV0At(mech, 1)
}

// handshakeV0At is handshakeV0 with correlation id corr.
func (c *rawClient) handshakeV0At(mech string, corr int32) {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech
	if hr := c.roundTrip(hs, 0, corr).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 || len(hr.SupportedMechanisms) != 3 {
		c.t.Fatalf("SaslHandshake v0 for %s: %+v", mech, hr)
	}
}

// TestSASLHandshakeV0 logs in the way librdkafka does after SaslHandshake v0:
// the mechanism's messages as raw size-prefixed tokens, each answered with one,
// and then serves requests as the user.
func TestSASLHandshakeV0(t *testing.T) {
	ts, log := startSASLServer(t, time.Hour)
	versions := dial(t, ts.addr).roundTrip(kmsg.NewPtrApiVersionsRequest(), 3, 1).(*kmsg.ApiVersionsResponse)
	for _, k := range versions.ApiKeys {
		if k.ApiKey == saslHandshakeKey && (k.MinVersion != 0 || k.MaxVersion != 1) {
			t.Fatalf("ApiVersions lists SaslHandshake %d..%d, want 0..1", k.MinVersion, k.MaxVersion)
		}
	}
	for _, mech := range []ksasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
	} {
		t.Run(mech.Name(), func(t *testing.T) {
			c := dial(t, ts.addr)
			c.handshakeV0(mech.Name())
			session, msg, err := mech.Authenticate(context.Background(), ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			for done := false; !done; {
				c.writeToken(msg)
				if done, msg, err = session.Challenge(c.readToken()); err != nil {
					t.Fatalf("the server's token: %v", err)
				}
			}
			resp := c.roundTrip(metadataRequest("t"), 12, 2).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("Metadata after authenticating: %+v", resp)
			}
			if log.count(mech.Name()+" alice ok") != 1 {
				t.Fatalf("audit entries %v", log.entries)
			}
			// The session has an expiry, so Kafka re-authenticates it as any
			// other (KafkaChannel.maybeBeginServerReauthentication does not
			// ask how the client logged in), here with SaslHandshake v0 again.
			c.handshakeV0At(mech.Name(), 3)
			session, msg, err = mech.Authenticate(context.Background(), ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			for done := false; !done; {
				c.writeToken(msg)
				if done, msg, err = session.Challenge(c.readToken()); err != nil {
					t.Fatalf("the server's token in re-authentication: %v", err)
				}
			}
			c.roundTrip(metadataRequest("t"), 12, 4)
			if log.count(mech.Name()+" alice reauth ok") != 1 {
				t.Fatalf("audit entries %v", log.entries)
			}
		})
	}
}

// TestSASLHandshakeV0Failures: a failed login or a bad token frame after
// SaslHandshake v0 closes the connection without an answer (the framing has no
// error response), and the server keeps serving.
func TestSASLHandshakeV0Failures(t *testing.T) {
	ts, log := startSASLServer(t, 0)
	t.Run("wrong-password-scram", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.handshakeV0("SCRAM-SHA-512")
		session, msg, err := scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism().Authenticate(context.Background(), ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.writeToken(msg)
		if _, msg, err = session.Challenge(c.readToken()); err != nil {
			t.Fatal(err)
		}
		c.writeToken(msg) // the client proof, computed from the wrong password
		c.expectClosed()
		if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("closed with %v, want ErrAuthentication", err)
		}
		if log.count("SCRAM-SHA-512 alice fail") != 1 {
			t.Fatalf("audit entries %v", log.entries)
		}
	})
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  error
	}{
		{"wrong-password-plain", binary.BigEndian.AppendUint32(nil, 19), ErrAuthentication}, // then "\x00alice\x00wrong-secret"
		{"negative-size", []byte{0xff, 0xff, 0xff, 0xfe}, ErrFrameSize},
		{"oversized", []byte{0, 0x10, 0, 0}, ErrFrameTooLarge}, // 1 MiB > the 512 KiB bound
		{"truncated-size", []byte{0, 0}, ErrTruncatedFrame},
		{"truncated-token", []byte{0, 0, 0, 10, 'a', 'b'}, ErrTruncatedFrame},
		{"empty-token", []byte{0, 0, 0, 0}, ErrAuthentication},
		// A SaslAuthenticate request is just a malformed PLAIN message here.
		{"kafka-request", frameOf(kmsg.NewPtrSASLAuthenticateRequest(), 1, 2, kmsg.StringPtr("c")), ErrAuthentication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			c.handshakeV0("PLAIN")
			c.write(tc.bytes)
			if tc.name == "wrong-password-plain" {
				c.write([]byte("\x00alice\x00wrong-secret"))
			}
			if tc.want == ErrTruncatedFrame {
				if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			c.expectClosed()
			if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, tc.want) {
				t.Fatalf("closed with %v, want %v", err, tc.want)
			}
		})
	}
	checkServing(t, ts.addr)
}

// FuzzSASLToken feeds arbitrary bytes through raw SASL token reading, as the
// reader goroutine does after SaslHandshake v0: nothing may panic, errors must be
// this package's, and a token must be exactly as long as its size says.
func FuzzSASLToken(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 1, 0, 1, 'x'})
	known := []error{io.EOF, ErrFrameSize, ErrFrameTooLarge, ErrTruncatedFrame}
	const maxBytes = 1 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := bytes.NewReader(data)
		for {
			before := rd.Len()
			size, err := readSize(rd, 0, maxBytes)
			var token []byte
			if err == nil {
				if size < 0 || size > maxBytes {
					t.Fatalf("size %d accepted", size)
				}
				token, err = readFrameBody(rd, size)
			}
			if err != nil {
				if !slices.ContainsFunc(known, func(k error) bool { return errors.Is(err, k) }) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(token) != int(size) || before-rd.Len() != 4+len(token) {
				t.Fatalf("token of %d bytes for size %d, consumed %d", len(token), size, before-rd.Len())
			}
		}
	})
}
