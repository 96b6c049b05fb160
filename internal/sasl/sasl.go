// Package sasl is the server side of the SASL mechanisms Strata accepts on its
// Kafka listener: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and PLAIN
// (RFC 4616), both checked against the SCRAM credentials kept in the metadata
// log, and OAUTHBEARER (RFC 7628): JWTs validated with go-jose against a JWKS. It is pure: no I/O, no goroutines; the protocol package drives it with
// the bytes of SaslAuthenticate requests.
//
// # Calling protocol
//
//  1. Authenticator.Start(mechanism) returns an Exchange.
//  2. Each SaslAuthenticate request's auth bytes go to Exchange.Step, whose
//     output is the response's auth bytes. A Step error ends the exchange: the
//     connection answers SASL_AUTHENTICATION_FAILED and closes.
//  3. When Done reports true, the client is authenticated as User.
//
// # No user enumeration
//
// A wrong password and an unknown user fail the same way, at the same step, with
// the same error (ErrAuthFailed): SCRAM answers an unknown user with a made-up
// salt that is stable per user name (an HMAC of the name under a per-process
// secret) and DecoyIterations, and fails at the proof; PLAIN derives a key for an
// unknown user too, so both take about as long as a real check.
package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// Mechanism is a SASL mechanism name as Kafka clients send it.
type Mechanism string

// The mechanisms this package serves.
const (
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
	Plain       Mechanism = "PLAIN"
)

// ScramMechanisms lists the SCRAM mechanisms, in Kafka's ScramMechanism order
// (type 1 then 2).
var ScramMechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// ParseMechanism checks a mechanism name.
func ParseMechanism(s string) (Mechanism, error) {
	switch m := Mechanism(s); m {
	case ScramSHA256, ScramSHA512, Plain, OAuthBearer:
		return m, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedMechanism, s)
}

// Errors of an exchange. Every one ends the authentication; none says whether
// the user exists.
var (
	// ErrAuthFailed: wrong password, unknown user, a nonce that is not this
	// exchange's (a replay), or an authorization id other than the user.
	ErrAuthFailed = errors.New("sasl: authentication failed: invalid credentials")
	// ErrMalformed: a message that does not parse.
	ErrMalformed = errors.New("sasl: malformed message")
	// ErrUnsupportedFeature: channel binding, delegation tokens when they are
	// off, mandatory extensions.
	ErrUnsupportedFeature = errors.New("sasl: unsupported feature")
	// ErrUnsupportedMechanism: a mechanism this package does not serve.
	ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")
	// ErrIterations: a SCRAM iteration count outside Kafka's bounds.
	ErrIterations = errors.New("sasl: SCRAM iterations out of range")
)

// Refusal is a failure whose Message the client is told, as Kafka tells a
// SaslAuthenticationException's; any other error of an exchange gets a generic
// message (Kafka's SaslException), so that none says whether a user exists.
// Err is the kind (ErrAuthFailed, ErrMalformed).
type Refusal struct {
	Message string
	Err     error
}

func (e *Refusal) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.Message) }
func (e *Refusal) Unwrap() error { return e.Err }

// Kafka's messages for an authorization id other than the user.
const authzidRefusal = "Authentication failed: Client requested an authorization id that is different from username"

// maxMessageBytes bounds one client message; real ones are a few hundred bytes.
const maxMessageBytes = 8 << 10

// DecoyIterations is the iteration count an unknown user is answered with,
// and PLAIN derives an unknown user's key with: that of a credential made the
// default way (--add-scram, strata user create), so that neither the answer
// nor its time tells such a user from an unknown one. A credential made with
// another count (kafka-configs defaults to 4096) stays distinguishable.
const DecoyIterations = DefaultIterations

// Lookup finds a user's credential for a SCRAM mechanism.
type Lookup func(user string, mech Mechanism) (Credential, bool)

// Authenticator starts exchanges against the credentials Lookup finds. It is
// safe for concurrent use.
type Authenticator struct {
	lookup Lookup
	secret []byte          // keys the decoy salts of unknown users
	oauth  *OAuthValidator // nil: no OAUTHBEARER
	tokens *tokens         // nil: no delegation tokens (token.go)
}

// WithOAuthBearer enables OAUTHBEARER with v; call it before the first Start.
func (a *Authenticator) WithOAuthBearer(v *OAuthValidator) *Authenticator {
	a.oauth = v
	return a
}

// NewAuthenticator returns an Authenticator over lookup.
func NewAuthenticator(lookup Lookup) *Authenticator {
	secret := make([]byte, 32)
	rand.Read(secret)
	return &Authenticator{lookup: lookup, secret: secret}
}

// Exchange is the server side of one authentication.
type Exchange interface {
	// Step consumes one client message and returns the server's answer.
	Step(in []byte) ([]byte, error)
	// Done reports whether the client is authenticated.
	Done() bool
	// User is the user name the client claimed (empty before it said); it is
	// authenticated only once Done reports true.
	User() string
	Mechanism() Mechanism
}

// Start begins an exchange for mech.
func (a *Authenticator) Start(mech Mechanism) (Exchange, error) {
	switch mech {
	case Plain:
		return &plainExchange{a: a}, nil
	case OAuthBearer:
		if a.oauth == nil {
			return nil, fmt.Errorf("%w: OAUTHBEARER has no token validator", ErrUnsupportedMechanism)
		}
		return &oauthExchange{v: a.oauth}, nil
	}
	h, ok := scramHashFor(mech)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mech)
	}
	return &scramExchange{a: a, h: h}, nil
}

// decoy is the made-up credential an unknown user is answered with.
func (a *Authenticator) decoy(user string, h scramHash) Credential {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(string(h.mech) + "\x00" + user))
	return Credential{
		Mechanism: h.mech, Salt: m.Sum(nil), Iterations: DecoyIterations,
		StoredKey: make([]byte, h.size), ServerKey: make([]byte, h.size),
	}
}

// plainExchange is PLAIN (RFC 4616): one message "authzid NUL authcid NUL
// password", checked against the user's SCRAM credential (SHA-512 if it has
// one, else SHA-256).
type plainExchange struct {
	a    *Authenticator
	user string
	done bool
	used bool
}

// Step checks the message as Kafka's PlainSaslServer does, with its messages:
// the user and password first, the authorization id last.
func (x *plainExchange) Step(in []byte) ([]byte, error) {
	if x.used {
		return nil, fmt.Errorf("%w: PLAIN takes one message", ErrMalformed)
	}
	x.used = true
	if len(in) > maxMessageBytes {
		return nil, fmt.Errorf("%w: PLAIN message of %d bytes", ErrMalformed, len(in))
	}
	parts := strings.SplitN(string(in), "\x00", 4) // Kafka counts no further
	if len(parts) != 3 {
		return nil, &Refusal{Err: ErrMalformed, Message: fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	authzid, user, password := parts[0], parts[1], parts[2]
	x.user = user // what the client claims, for audit logs; Done says whether it holds
	if user == "" {
		return nil, &Refusal{Err: ErrMalformed, Message: "Authentication failed: username not specified"}
	}
	if password == "" {
		return nil, &Refusal{Err: ErrMalformed, Message: "Authentication failed: password not specified"}
	}
	var cred Credential
	known := false
	for _, m := range []Mechanism{ScramSHA512, ScramSHA256} {
		if cred, known = x.a.lookup(user, m); known {
			break
		}
	}
	if !known {
		h, _ := scramHashFor(ScramSHA512)
		cred = x.a.decoy(user, h)
	}
	if !cred.verifyPassword(password) || !known {
		return nil, &Refusal{Err: ErrAuthFailed, Message: "Authentication failed: Invalid username or password"}
	}
	if authzid != "" && authzid != user {
		return nil, &Refusal{Err: ErrAuthFailed, Message: authzidRefusal}
	}
	x.done = true
	return nil, nil
}

func (x *plainExchange) Done() bool           { return x.done }
func (x *plainExchange) User() string         { return x.user }
func (x *plainExchange) Mechanism() Mechanism { return Plain }
