package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// store is an in-memory credential table.
type store map[string]Credential // user + "/" + mechanism

func (s store) lookup(user string, m Mechanism) (Credential, bool) {
	c, ok := s[user+"/"+string(m)]
	return c, ok
}

func newStore(t testing.TB, users map[string]string, mechs ...Mechanism) store {
	t.Helper()
	s := store{}
	for user, password := range users {
		for _, m := range mechs {
			c, err := NewCredential(m, password, MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			s[user+"/"+string(m)] = c
		}
	}
	return s
}

// run drives a franz-go client mechanism against a server exchange until one
// side finishes or fails, and returns the server's error and the step it
// failed at (0-based).
func run(t *testing.T, a *Authenticator, mech Mechanism, client kgosasl.Mechanism) (Exchange, int, error) {
	t.Helper()
	x, err := a.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	sess, msg, err := client.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; ; step++ {
		out, err := x.Step(msg)
		if err != nil {
			return x, step, err
		}
		done, next, cerr := sess.Challenge(out)
		if cerr != nil {
			t.Fatalf("client rejected the server's step %d: %v", step, cerr)
		}
		if x.Done() {
			if !done {
				t.Fatal("server done but client not")
			}
			return x, step, nil
		}
		if done {
			t.Fatal("client done but server not")
		}
		msg = next
	}
}

func scramClient(mech Mechanism, user, pass string) kgosasl.Mechanism {
	a := scram.Auth{User: user, Pass: pass}
	if mech == ScramSHA512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

func TestScramAgainstFranzGo(t *testing.T) {
	for _, mech := range ScramMechanisms {
		t.Run(string(mech), func(t *testing.T) {
			a := NewAuthenticator(newStore(t, map[string]string{"alice": "alice-secret", "we,ird=name": "pw"}, mech).lookup)
			x, _, err := run(t, a, mech, scramClient(mech, "alice", "alice-secret"))
			if err != nil || x.User() != "alice" || x.Mechanism() != mech {
				t.Fatalf("good password: user %q err %v", x.User(), err)
			}
			if x, _, err := run(t, a, mech, scramClient(mech, "we,ird=name", "pw")); err != nil || x.User() != "we,ird=name" {
				t.Fatalf("escaped name: user %q err %v", x.User(), err)
			}
			// A wrong password and an unknown user fail alike, at the proof.
			_, wrongStep, wrongErr := run(t, a, mech, scramClient(mech, "alice", "guess"))
			_, unknownStep, unknownErr := run(t, a, mech, scramClient(mech, "mallory", "guess"))
			if !errors.Is(wrongErr, ErrAuthFailed) || !errors.Is(unknownErr, ErrAuthFailed) {
				t.Fatalf("wrong password: %v; unknown user: %v; want ErrAuthFailed", wrongErr, unknownErr)
			}
			if wrongStep != 1 || unknownStep != 1 || wrongErr.Error() != unknownErr.Error() {
				t.Fatalf("wrong password failed at step %d (%v), unknown user at %d (%v): must not differ",
					wrongStep, wrongErr, unknownStep, unknownErr)
			}
		})
	}
}

func TestScramUnknownUserLooksReal(t *testing.T) {
	cred, err := NewCredential(ScramSHA256, "pw", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(store{"alice/" + string(ScramSHA256): cred}.lookup)
	first := func(user string) string {
		x, _ := a.Start(ScramSHA256)
		out, err := x.Step([]byte("n,,n=" + user + ",r=abcdefgh"))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	shape := func(s string) string { // the server-first with the nonce and salt values cut out
		parts := strings.Split(s, ",")
		return parts[0][:10] + "|" + strings.Split(parts[1], "=")[0] + "|" + parts[2]
	}
	real, unknown := first("alice"), first("nobody")
	if len(real) != len(unknown) || shape(real) != shape(unknown) {
		t.Fatalf("server-first differs for a real and an unknown user:\n%s\n%s", real, unknown)
	}
	if first("nobody") == unknown {
		t.Fatal("server nonce repeated")
	}
	// The decoy salt is stable, so asking twice does not reveal the user is unknown.
	salt := func(s string) string { return strings.Split(s, ",")[1] }
	if salt(first("nobody")) != salt(unknown) {
		t.Fatal("decoy salt changes between attempts")
	}
}

func TestScramReplayedFinalFails(t *testing.T) {
	a := NewAuthenticator(newStore(t, map[string]string{"alice": "pw"}, ScramSHA256).lookup)
	client := scramClient(ScramSHA256, "alice", "pw")
	sess, clientFirst, _ := client.Authenticate(context.Background(), "b")
	x, _ := a.Start(ScramSHA256)
	serverFirst, err := x.Step(clientFirst)
	if err != nil {
		t.Fatal(err)
	}
	_, clientFinal, err := sess.Challenge(serverFirst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Step(clientFinal); err != nil {
		t.Fatal(err)
	}
	// The same two client messages against a new exchange: its nonce differs.
	y, _ := a.Start(ScramSHA256)
	if _, err := y.Step(clientFirst); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Step(clientFinal); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("replayed client-final: %v, want ErrAuthFailed", err)
	}
	if _, err := x.Step(clientFinal); err == nil {
		t.Fatal("a finished exchange took another message")
	}
}

func TestPlain(t *testing.T) {
	a := NewAuthenticator(newStore(t, map[string]string{"alice": "pw"}, ScramSHA256).lookup)
	good := plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()
	if x, _, err := run(t, a, Plain, good); err != nil || x.User() != "alice" {
		t.Fatalf("PLAIN good: %q %v", x.User(), err)
	}
	for _, client := range []kgosasl.Mechanism{
		plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		plain.Auth{User: "nobody", Pass: "pw"}.AsMechanism(),
		plain.Auth{Zid: "admin", User: "alice", Pass: "pw"}.AsMechanism(),
	} {
		if _, _, err := run(t, a, Plain, client); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("PLAIN: %v, want ErrAuthFailed", err)
		}
	}
}

func TestMalformed(t *testing.T) {
	a := NewAuthenticator(store{}.lookup)
	for _, tt := range []struct {
		mech Mechanism
		msgs []string
		want error
	}{
		{ScramSHA256, []string{""}, ErrMalformed},
		{ScramSHA256, []string{"n,,"}, ErrMalformed},
		{ScramSHA256, []string{"x,,n=a,r=b"}, ErrMalformed},
		// Kafka's ScramSaslServer takes only the gs2 flag "n".
		{ScramSHA256, []string{"y,,n=a,r=b"}, ErrMalformed},
		{ScramSHA256, []string{"p=tls-unique,,n=a,r=b"}, ErrUnsupportedFeature},
		{ScramSHA256, []string{"n,,m=ext,n=a,r=b"}, ErrUnsupportedFeature},
		{ScramSHA256, []string{"n,,n=a,r=b,tokenauth=true"}, ErrUnsupportedFeature},
		{ScramSHA256, []string{"n,,n=a=ZZ,r=b"}, ErrMalformed},
		{ScramSHA256, []string{"n,,n=,r=b"}, ErrMalformed},
		{ScramSHA256, []string{"n,,n=a,r=b,c"}, nil}, // unknown extension ignored
		{ScramSHA256, []string{"n,a=b,n=a,r=b"}, ErrAuthFailed},
		{ScramSHA256, []string{"n,,n=a,r="}, ErrMalformed},
		{ScramSHA256, []string{"n,,n=a,r=b", "c=biws,r=b"}, ErrMalformed},
		{ScramSHA256, []string{"n,,n=a,r=b", "c=xx,r=b,p=AAAA"}, ErrMalformed},
		{ScramSHA256, []string{"n,,n=a,r=b", "c=biws,r=b,p=AAAA"}, ErrAuthFailed},
		{ScramSHA256, []string{"n,,n=a,r=b," + strings.Repeat("x", maxMessageBytes)}, ErrMalformed},
		{Plain, []string{"alice"}, ErrMalformed},
		{Plain, []string{"\x00\x00pw"}, ErrMalformed},
		{Plain, []string{"a\x00b\x00c\x00d"}, ErrMalformed},
	} {
		x, err := a.Start(tt.mech)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tt.msgs {
			if _, err = x.Step([]byte(m)); err != nil {
				break
			}
		}
		if (tt.want == nil) != (err == nil) || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s %q: err %v, want %v", tt.mech, tt.msgs, err, tt.want)
		}
	}
	if _, err := a.Start("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("Start(GSSAPI): %v", err)
	}
}

func TestCredentialBounds(t *testing.T) {
	if _, err := NewCredential(ScramSHA256, "pw", MinIterations-1); !errors.Is(err, ErrIterations) {
		t.Errorf("too few iterations: %v", err)
	}
	if _, err := NewCredential(ScramSHA512, "pw", MaxIterations+1); !errors.Is(err, ErrIterations) {
		t.Errorf("too many iterations: %v", err)
	}
	if _, err := NewCredential(Plain, "pw", MinIterations); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("PLAIN credential: %v", err)
	}
	c, err := NewCredential(ScramSHA512, "pw", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.StoredKey) != 64 || len(c.ServerKey) != 64 || len(c.Salt) != saltBytes {
		t.Fatalf("credential sizes: stored %d server %d salt %d", len(c.StoredKey), len(c.ServerKey), len(c.Salt))
	}
}

// FuzzScram feeds arbitrary client messages to both steps: the exchange must
// fail or succeed, never panic, and never authenticate without a credential.
func FuzzScram(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=x,ext=1"), []byte("c=eSxhPWFsaWNlLA==,r=x,p="))
	f.Add([]byte("n,,n=a=2Cb=3Dc,r=n"), []byte(""))
	a := NewAuthenticator(store{}.lookup)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, m := range ScramMechanisms {
			x, _ := a.Start(m)
			if _, err := x.Step(first); err != nil {
				continue
			}
			if _, err := x.Step(final); err == nil || x.Done() {
				t.Fatalf("authenticated without a credential: %q %q", first, final)
			}
		}
	})
}

// FuzzPlain: PLAIN never panics and never accepts a user it does not know.
func FuzzPlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("alice\x00alice\x00"))
	a := NewAuthenticator(newStore(f, map[string]string{"alice": "pw"}, ScramSHA256).lookup)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, _ := a.Start(Plain)
		_, err := x.Step(msg)
		if err == nil && (x.User() != "alice" || !strings.HasSuffix(string(msg), "\x00pw")) {
			t.Fatalf("accepted %q as %q", msg, x.User())
		}
	})
}

// TestScramNoncePrefixed: librdkafka before 2.1 (Debian's kcat) sends its own
// nonce again in front of the server-first's in its client-final. Kafka only
// checks that the nonce ends with the server-first's, so the login succeeds
// there and must here; a nonce that does not end with it still fails.
func TestScramNoncePrefixed(t *testing.T) {
	const user, password, cnonce = "alice", "pw", "fyko+d2lbbFgONRv9qkxdawL"
	a := NewAuthenticator(newStore(t, map[string]string{user: password}, ScramSHA256).lookup)
	for _, tc := range []struct {
		name  string
		nonce func(serverNonce string) string
		ok    bool
	}{
		{"prefixed", func(n string) string { return cnonce + n }, true},
		{"exact", func(n string) string { return n }, true},
		{"suffixed", func(n string) string { return n + "x" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, _ := a.Start(ScramSHA256)
			clientFirstBare := "n=" + user + ",r=" + cnonce
			serverFirst, err := x.Step([]byte("n,," + clientFirstBare))
			if err != nil {
				t.Fatal(err)
			}
			attrs := strings.Split(string(serverFirst), ",")
			salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(attrs[1], "s="))
			iterations, _ := strconv.Atoi(strings.TrimPrefix(attrs[2], "i="))
			withoutProof := "c=biws,r=" + tc.nonce(strings.TrimPrefix(attrs[0], "r="))
			salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
			if err != nil {
				t.Fatal(err)
			}
			mac := func(key []byte, msg string) []byte {
				h := hmac.New(sha256.New, key)
				h.Write([]byte(msg))
				return h.Sum(nil)
			}
			clientKey := mac(salted, "Client Key")
			storedKey := sha256.Sum256(clientKey)
			signature := mac(storedKey[:], clientFirstBare+","+string(serverFirst)+","+withoutProof)
			proof := make([]byte, len(clientKey))
			subtle.XORBytes(proof, clientKey, signature)
			_, err = x.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
			if tc.ok && (err != nil || !x.Done()) {
				t.Fatalf("client-final: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("client-final: %v, want ErrAuthFailed", err)
			}
		})
	}
}

// TestScramUnknownUserLooksLikeADefaultUser: a user made the default way
// (--add-scram, strata user create: DefaultIterations) and an unknown user
// get the same iteration count in server-first, and PLAIN derives a key with
// as many iterations for both: neither the answer nor the time it takes tells
// that the user does not exist.
func TestScramUnknownUserLooksLikeADefaultUser(t *testing.T) {
	spec, err := ParseScramSpec("SCRAM-SHA-256=[name=alice,password=pw]")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := NewCredential(spec.Mechanism, spec.Password, spec.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(func(user string, m Mechanism) (Credential, bool) {
		return cred, user == spec.Name && m == spec.Mechanism
	})
	iterations := func(user string) string {
		x, _ := a.Start(ScramSHA256)
		out, err := x.Step([]byte("n,,n=" + user + ",r=abcdefgh"))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(out), ",")
		return parts[len(parts)-1]
	}
	if real, unknown := iterations("alice"), iterations("nobody"); real != unknown {
		t.Fatalf("server-first says %s for a user made by default, %s for an unknown one", real, unknown)
	}
	if got := a.decoy("nobody", scramHash{mech: ScramSHA512}).Iterations; got != spec.Iterations {
		t.Fatalf("PLAIN's decoy derives with %d iterations, a default user's with %d", got, spec.Iterations)
	}
}
