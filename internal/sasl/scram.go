package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// SCRAM iteration bounds, Kafka's: fewer is too weak, more is a denial of
// service on every authentication.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
	saltBytes         = 32
	nonceBytes        = 24
)

// scramHash is one SCRAM variant's hash.
type scramHash struct {
	mech Mechanism
	new  func() hash.Hash
	size int
}

func scramHashFor(m Mechanism) (scramHash, bool) {
	switch m {
	case ScramSHA256:
		return scramHash{m, sha256.New, sha256.Size}, true
	case ScramSHA512:
		return scramHash{m, sha512.New, sha512.Size}, true
	}
	return scramHash{}, false
}

func (h scramHash) hmac(key []byte, msg string) []byte {
	m := hmac.New(h.new, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (h scramHash) sum(b []byte) []byte {
	d := h.new()
	d.Write(b)
	return d.Sum(nil)
}

// saltedPassword is RFC 5802's Hi(password, salt, i).
func (h scramHash) saltedPassword(password string, salt []byte, iterations int32) ([]byte, error) {
	return pbkdf2.Key(h.new, password, salt, int(iterations), h.size)
}

// Credential is what the cluster stores for one user and SCRAM mechanism: the
// salt, the iteration count and two keys derived from the salted password. The
// password itself is never stored.
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	Iterations int32
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// NewCredential derives the credential for password with a random salt.
// iterations must be within MinIterations and MaxIterations.
func NewCredential(mech Mechanism, password string, iterations int32) (Credential, error) {
	salt, sp, err := SaltPassword(mech, password, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(mech, salt, sp, iterations)
}

// SaltPassword salts password with a fresh random salt, as a client of
// AlterUserScramCredentials does; the result goes to CredentialFromSalted.
func SaltPassword(mech Mechanism, password string, iterations int32) (salt, salted []byte, err error) {
	h, ok := scramHashFor(mech)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q is not a SCRAM mechanism", ErrUnsupportedMechanism, mech)
	}
	if err := CheckIterations(iterations); err != nil {
		return nil, nil, err
	}
	salt = make([]byte, saltBytes)
	rand.Read(salt)
	salted, err = h.saltedPassword(password, salt, iterations)
	return salt, salted, err
}

// CredentialFromSalted builds a credential from a salted password, as
// AlterUserScramCredentials sends it.
func CredentialFromSalted(mech Mechanism, salt, saltedPassword []byte, iterations int32) (Credential, error) {
	h, ok := scramHashFor(mech)
	if !ok {
		return Credential{}, fmt.Errorf("%w: %q is not a SCRAM mechanism", ErrUnsupportedMechanism, mech)
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	if len(salt) == 0 || len(saltedPassword) == 0 {
		return Credential{}, fmt.Errorf("%w: empty salt or salted password", ErrMalformed)
	}
	clientKey := h.hmac(saltedPassword, "Client Key")
	return Credential{
		Mechanism: mech, Salt: bytes.Clone(salt), Iterations: iterations,
		StoredKey: h.sum(clientKey), ServerKey: h.hmac(saltedPassword, "Server Key"),
	}, nil
}

// CheckIterations checks a SCRAM iteration count against Kafka's bounds.
func CheckIterations(iterations int32) error {
	if iterations < MinIterations || iterations > MaxIterations {
		return fmt.Errorf("%w: %d iterations, want %d..%d", ErrIterations, iterations, MinIterations, MaxIterations)
	}
	return nil
}

// verifyPassword reports whether password matches c, in time independent of
// where the keys differ.
func (c Credential) verifyPassword(password string) bool {
	h, ok := scramHashFor(c.Mechanism)
	if !ok {
		return false
	}
	sp, err := h.saltedPassword(password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(h.sum(h.hmac(sp, "Client Key")), c.StoredKey) == 1
}

// scramExchange is the server side of one SCRAM authentication (RFC 5802, RFC
// 7677): client-first, server-first, client-final, server-final.
type scramExchange struct {
	a             *Authenticator
	h             scramHash
	step          int // 0: awaiting client-first; 1: awaiting client-final; 2: finished
	authenticated bool

	user            string
	cred            Credential
	known           bool   // false: a made-up credential; the proof cannot match
	gs2Header       string // "n,," or "n,a=...,"
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	token           *Token // a delegation token login: the token (nil when unknown or expired)
	tokenAuth       bool   // the client asked for a token login (tokenauth=true)
}

func (x *scramExchange) Step(in []byte) ([]byte, error) {
	switch x.step {
	case 0:
		x.step = 1
		return x.clientFirst(string(in))
	case 1:
		x.step = 2
		out, err := x.clientFinal(string(in))
		x.authenticated = err == nil
		return out, err
	}
	return nil, fmt.Errorf("%w: SCRAM exchange already finished", ErrMalformed)
}

func (x *scramExchange) Done() bool { return x.authenticated }

// TokenOwner is the principal a delegation token login authenticated as, the
// token's owner; ok is false for a user's login.
func (x *scramExchange) TokenOwner() (principal string, ok bool) {
	if !x.tokenAuth || x.token == nil {
		return "", false
	}
	return x.token.Owner, true
}

// SessionExpiry ends a token-authenticated session no later than the token
// expires (KIP-368, as Kafka's SCRAM server reports the token's expiry).
func (x *scramExchange) SessionExpiry() time.Time {
	if x.token == nil {
		return time.Time{}
	}
	return x.token.Expiry
}
func (x *scramExchange) User() string         { return x.user }
func (x *scramExchange) Mechanism() Mechanism { return x.h.mech }

// clientFirst parses "gs2-header client-first-bare" and answers server-first.
// An unknown user gets a made-up salt (stable per user name) and fails only at
// the proof, exactly as a wrong password does.
func (x *scramExchange) clientFirst(msg string) ([]byte, error) {
	if len(msg) > maxMessageBytes {
		return nil, fmt.Errorf("%w: client-first of %d bytes", ErrMalformed, len(msg))
	}
	// gs2-header: cbind-flag "," [authzid] ","
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no gs2 header", ErrMalformed)
	}
	// Only "n" (no channel binding), as Kafka's ScramSaslServer: it refuses
	// "y" (a client that could bind but thinks the server cannot) as well.
	switch {
	case cbind == "n":
	case strings.HasPrefix(cbind, "p="):
		return nil, fmt.Errorf("%w: channel binding", ErrUnsupportedFeature)
	default:
		return nil, fmt.Errorf("%w: gs2 flag %q", ErrMalformed, cbind)
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: gs2 header not terminated", ErrMalformed)
	}
	// The authorization id is compared with the user name as sent, escapes
	// and all, as Kafka's ScramSaslServer does.
	var authzid string
	if authzField != "" {
		v, ok := strings.CutPrefix(authzField, "a=")
		if !ok {
			return nil, fmt.Errorf("%w: authzid %q", ErrMalformed, authzField)
		}
		if _, err := decodeSaslName(v); err != nil {
			return nil, err
		}
		authzid = v
	}
	x.gs2Header = msg[:len(msg)-len(bare)]
	x.clientFirstBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return nil, fmt.Errorf("%w: client-first needs n= and r=", ErrMalformed)
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, fmt.Errorf("%w: mandatory extension", ErrUnsupportedFeature)
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return nil, fmt.Errorf("%w: client-first does not start with n=", ErrMalformed)
	}
	user, err := decodeSaslName(name)
	if err != nil {
		return nil, err
	}
	if user == "" {
		return nil, fmt.Errorf("%w: empty user name", ErrMalformed)
	}
	// Kafka checks this once it found the user's credential (an unknown user
	// fails first); here every user is refused alike, before the lookup.
	if authzid != "" && authzid != user {
		return nil, &Refusal{Err: ErrAuthFailed, Message: authzidRefusal}
	}
	cnonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(cnonce) {
		return nil, fmt.Errorf("%w: client nonce", ErrMalformed)
	}
	for _, ext := range attrs[2:] {
		// Kafka's clients send tokenauth=true for delegation tokens (then the
		// user name is a token id); other extensions are ignored.
		if k, v, _ := strings.Cut(ext, "="); k == "tokenauth" && strings.EqualFold(v, "true") {
			if x.a.tokens == nil {
				return nil, fmt.Errorf("%w: delegation tokens", ErrUnsupportedFeature)
			}
			x.tokenAuth = true
		}
	}
	x.user = user
	if x.tokenAuth {
		// An unknown or expired token fails at the proof, as a wrong password.
		if tok, ok := x.a.tokens.token(user); ok {
			cred, err := x.a.tokens.credential(user, x.h)
			if err != nil {
				return nil, err
			}
			x.token, x.cred, x.known = &tok, cred, true
		}
	} else {
		x.cred, x.known = x.a.lookup(user, x.h.mech)
	}
	if !x.known {
		x.cred = x.a.decoy(user, x.h)
	}
	snonce := make([]byte, nonceBytes)
	rand.Read(snonce)
	x.nonce = cnonce + base64.RawURLEncoding.EncodeToString(snonce)
	x.serverFirst = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(x.cred.Salt) + ",i=" + strconv.Itoa(int(x.cred.Iterations))
	return []byte(x.serverFirst), nil
}

// clientFinal checks "c=...,r=...,p=..." and answers server-final "v=...".
func (x *scramExchange) clientFinal(msg string) ([]byte, error) {
	if len(msg) > maxMessageBytes {
		return nil, fmt.Errorf("%w: client-final of %d bytes", ErrMalformed, len(msg))
	}
	withoutProof, proofAttr, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, fmt.Errorf("%w: client-final has no proof", ErrMalformed)
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return nil, fmt.Errorf("%w: client-final needs c= and r=", ErrMalformed)
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, fmt.Errorf("%w: client-final does not start with c=", ErrMalformed)
	}
	if cb != base64.StdEncoding.EncodeToString([]byte(x.gs2Header)) {
		return nil, fmt.Errorf("%w: channel binding differs from the gs2 header", ErrMalformed)
	}
	// The nonce must end with the server-first's (Kafka's check): librdkafka
	// before 2.1 sends its own nonce again in front of it, and Kafka accepts
	// that. A replayed client-final carries an old server nonce.
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !strings.HasSuffix(nonce, x.nonce) {
		return nil, fmt.Errorf("%w: nonce mismatch", ErrAuthFailed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr)
	if err != nil || len(proof) != x.h.size {
		return nil, fmt.Errorf("%w: client proof", ErrMalformed)
	}
	authMessage := x.clientFirstBare + "," + x.serverFirst + "," + withoutProof
	clientSignature := x.h.hmac(x.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSignature)
	match := subtle.ConstantTimeCompare(x.h.sum(clientKey), x.cred.StoredKey) == 1
	if !match || !x.known {
		return nil, ErrAuthFailed
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(x.h.hmac(x.cred.ServerKey, authMessage))), nil
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// validNonce: printable ASCII except ','.
func validNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// decodeSaslName undoes RFC 5802's escaping: "=2C" is ',' and "=3D" is '='.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in user name", ErrMalformed)
		}
		i += 2
	}
	return b.String(), nil
}
