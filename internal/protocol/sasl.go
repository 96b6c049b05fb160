package protocol

// SaslHandshake (key 17) v0-v1 and SaslAuthenticate (key 36) v0-v2 (v2 flexible)
// are answered by this package, which owns each connection's authentication
// state (KIP-43, KIP-152, KIP-368):
//
//   - With Server.SASL nil, both answer ILLEGAL_SASL_STATE, as on Kafka's
//     PLAINTEXT and SSL listeners.
//   - With SASL on, a connection may send only ApiVersions (once, before
//     SaslHandshake), SaslHandshake and SaslAuthenticate until it is
//     authenticated; anything else closes it. Once SaslHandshake v1 began an
//     exchange (authentication or re-authentication), any request but
//     SaslAuthenticate is first answered with its own response kind carrying
//     ILLEGAL_SASL_STATE (checkAuthenticated). Frames
//     before authentication, and those of a re-authentication after its
//     SaslHandshake, are bounded by SASLConfig.MaxReceiveBytes (Kafka's
//     sasl.server.max.receive.size), and the reader reads one such frame only
//     after the previous one was handled.
//   - SaslHandshake picks the mechanism: an unsupported one answers
//     UNSUPPORTED_SASL_MECHANISM with the enabled list and closes.
//   - After a successful SaslHandshake v0 (KIP-152's legacy framing), the
//     mechanism's messages travel as raw tokens, not in SaslAuthenticate: each
//     client token is an int32 size (0..MaxReceiveBytes) and that many bytes,
//     and each server answer is framed the same way, also when empty (PLAIN's
//     success), as Kafka does. There is no error response in this framing: a
//     failed authentication, a negative or oversized size, or a truncated token
//     closes the connection without an answer.
//   - SaslAuthenticate carries the mechanism's messages. A failure answers
//     SASL_AUTHENTICATION_FAILED and closes the connection after the response.
//     Its message is Kafka's: the mechanism's own where Kafka's explains the
//     refusal (sasl.Refusal: PLAIN's checks, an authorization id other than the
//     user, a re-authentication as another principal), else one generic text
//     (a wrong password and an unknown user alike).
//   - A session lasts SASLConfig.SessionLifetime, and no longer than a
//     credential that expires (an OAUTHBEARER or delegation token) also without
//     one; v1+ answers carry what is left (SessionLifetimeMillis, 0: forever).
//     A request other than a re-authentication's SaslHandshake arriving after
//     the session expired closes the connection, ApiVersions included.
//   - Re-authentication, as Kafka's KafkaChannel and SaslServerAuthenticator
//     serve it: a client sends SaslHandshake and SaslAuthenticate again (or,
//     after SaslHandshake v0, raw tokens), with the session's mechanism
//     (another one is answered without error at the handshake and closes the
//     connection unanswered at its next request), as the same principal (else
//     SASL_AUTHENTICATION_FAILED). Any session that expires may, however it
//     logged in: Kafka does not ask, so also one that used SaslAuthenticate
//     v0 and was never told its lifetime. Until it completes, any other request
//     is refused as in an authentication and closes the connection. A session that never expires cannot
//     re-authenticate, nor one whose last re-authentication began less than
//     a second ago: SaslHandshake answers ILLEGAL_SASL_STATE and the session
//     goes on, as does a SaslAuthenticate without a SaslHandshake.
//   - A SCRAM login with a delegation token (tokenauth=true) is served as the
//     token's owner and marks the ConnInfo TokenAuthenticated.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/sasl"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
	// DefaultSASLMaxReceiveBytes is Kafka's sasl.server.max.receive.size.
	DefaultSASLMaxReceiveBytes = 512 << 10
)

// SASLConfig turns SASL authentication on for a Server.
type SASLConfig struct {
	// Mechanisms are the enabled mechanisms, as SaslHandshake lists them.
	Mechanisms []sasl.Mechanism
	// Authenticator checks credentials.
	Authenticator *sasl.Authenticator
	// MaxReceiveBytes bounds a request frame before authentication and during
	// a re-authentication; zero means DefaultSASLMaxReceiveBytes.
	MaxReceiveBytes int32
	// SessionLifetime is how long an authentication lasts (KIP-368,
	// connections.max.reauth.ms); zero: until its credential expires (a token),
	// else forever.
	SessionLifetime time.Duration
	// OnAuthenticate, when set, is called after every authentication attempt that
	// got as far as a mechanism (user is what the client claimed, possibly empty;
	// err nil on success), for audit logs and metrics.
	OnAuthenticate func(c *ConnInfo, mech sasl.Mechanism, user string, reauth bool, err error)

	now func() time.Time // nil: time.Now; tests set it
}

// clock is the time session lifetimes are measured on.
func (cfg *SASLConfig) clock() time.Time {
	if cfg.now != nil {
		return cfg.now()
	}
	return time.Now()
}

// saslVersions are registered with every Server.
var saslVersions = []VersionRange{{Key: saslHandshakeKey, Min: 0, Max: 1}, {Key: saslAuthenticateKey, Min: 0, Max: 2}}

// authState is a connection's authentication, owned by its handler goroutine.
// The reader only reads authenticated (an atomic on conn).
type authState struct {
	exchange      sasl.Exchange  // between SaslHandshake and the last SaslAuthenticate
	mechanism     sasl.Mechanism // set once authenticated
	principal     string         // set once authenticated
	expiry        time.Time      // zero: no expiry
	authenticated bool
	rawTokens     bool // SaslHandshake v0: the exchange's tokens come as raw frames
	// sawApiVersions: an ApiVersions was answered without error before
	// authentication; Kafka takes no second one.
	sawApiVersions bool
	reauthStarted  time.Time // the last re-authentication's SaslHandshake
	// refuse, set by a re-authentication's SaslHandshake naming another
	// mechanism than the session's, fails the next SaslAuthenticate without an
	// answer (Kafka's REAUTH_BAD_MECHANISM).
	refuse error
}

// minReauthInterval is how soon after the last one a re-authentication may
// begin (Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

// saslTokenKey marks a Request that is a raw SASL token read after SaslHandshake
// v0 rather than a Kafka request; it never reaches the Handler or the hooks.
const saslTokenKey = -1

// ErrAuthentication means a SASL client failed to authenticate, broke the SASL
// sequence, sent another request before authenticating, or kept using a session
// that expired, or that no principal mapping rule applies to a TLS client's
// certificate (Server.Principals). The connection closes (after the error
// response, if any).
var ErrAuthentication = errors.New("protocol: authentication failed")

// authFailureMessage is what a failed SaslAuthenticate answers: the message of
// a sasl.Refusal, else Kafka's generic one.
func authFailureMessage(err error, mech sasl.Mechanism, reauth bool) string {
	if r := (*sasl.Refusal)(nil); errors.As(err, &r) {
		return r.Message
	}
	during := "authentication"
	if reauth {
		during = "re-authentication"
	}
	return fmt.Sprintf("Authentication failed during %s due to invalid credentials with SASL mechanism %s", during, mech)
}

// principalChange refuses a re-authentication as another principal, with
// Kafka's message (it writes a principal type.name).
func principalChange(from, to string) error {
	dotted := func(p string) string { return strings.Replace(p, ":", ".", 1) }
	return &sasl.Refusal{Err: sasl.ErrAuthFailed,
		Message: fmt.Sprintf("Cannot change principals during re-authentication from %s: %s", dotted(from), dotted(to))}
}

// checkAuthenticated decides whether a request other than ApiVersions and the
// SASL keys may be served: it returns an error (closing the connection) when
// SASL is on and the connection is not, or no longer, authenticated. During an
// exchange begun by SaslHandshake v1 (an authentication or a
// re-authentication) it also returns refusal, written before the close: the
// request's own response carrying ILLEGAL_SASL_STATE, as SaslServerAuthenticator
// answers anything but SaslAuthenticate then. Before the handshake, in a
// re-authentication refused for its mechanism, or after the session expired,
// Kafka closes without an answer.
func (c *conn) checkAuthenticated(r *Request) (refusal kmsg.Response, err error) {
	if c.srv.SASL == nil {
		return nil, nil
	}
	a := &c.auth
	switch {
	case a.exchange != nil:
		err := fmt.Errorf("%w: %s during SASL authentication", ErrAuthentication, kmsg.NameForKey(r.Key))
		if a.refuse != nil {
			return nil, err
		}
		return illegalSASLState(r.Msg), err
	case !a.authenticated:
		return nil, fmt.Errorf("%w: %s before authentication", ErrAuthentication, kmsg.NameForKey(r.Key))
	case !a.expiry.IsZero() && c.srv.SASL.clock().After(a.expiry):
		return nil, fmt.Errorf("%w: %s after the session expired", ErrAuthentication, kmsg.NameForKey(r.Key))
	}
	return nil, nil
}

// illegalSASLState is req's response kind with ILLEGAL_SASL_STATE as its
// top-level error code, where it has one. Kafka's getErrorResponse also puts
// the code on each entry the request names (a Metadata topic, a Produce
// partition); here those lists stay empty, as no client reads them before the
// connection closes.
func illegalSASLState(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	setErrorCode(resp, kerr.IllegalSaslState.Code)
	return resp
}

// checkApiVersions applies SASL's rules to an ApiVersions request, as
// SaslServerAuthenticator does: one during an exchange (authentication or
// re-authentication) is answered ILLEGAL_SASL_STATE (refusal) and closes the
// connection (err); before authentication, a second one answered without
// error closes it unanswered; once authenticated, it is served as any request.
func (c *conn) checkApiVersions(r *Request) (refusal kmsg.Response, err error) {
	a := &c.auth
	switch {
	case a.exchange != nil && a.refuse != nil:
		return nil, fmt.Errorf("%w: ApiVersions in a re-authentication with another mechanism", ErrAuthentication)
	case a.exchange != nil:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.SetVersion(0)
		if apiVersionsSupported(r.Version) {
			resp.SetVersion(r.Version)
		}
		return resp, fmt.Errorf("%w: ApiVersions during SASL authentication", ErrAuthentication)
	case a.authenticated:
		_, err := c.checkAuthenticated(r)
		return nil, err
	case a.sawApiVersions:
		return nil, fmt.Errorf("%w: a second ApiVersions before authentication", ErrAuthentication)
	}
	return nil, nil
}

// serveSASL answers SaslHandshake and SaslAuthenticate. closeAfter asks the
// writer to close the connection once the response is out; apiLayer tells an
// answer Kafka's API layer gives (KafkaApis, outside an authentication) from
// one of its authenticator.
func (c *conn) serveSASL(r *Request) (msg kmsg.Response, apiLayer bool, closeAfter error) {
	cfg := c.srv.SASL
	a := &c.auth
	switch req := r.Msg.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		if cfg == nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, true, nil
		}
		now := cfg.clock()
		if a.exchange == nil && a.authenticated && (a.expiry.IsZero() || now.Sub(a.reauthStarted) < minReauthInterval) {
			// Kafka begins no re-authentication of a session that never
			// expires, nor more than once a second; its API layer answers.
			if _, err := c.checkAuthenticated(r); err != nil {
				return nil, false, err
			}
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, true, nil
		}
		if a.exchange != nil {
			// As any request during the exchange (checkAuthenticated).
			refusal, err := c.checkAuthenticated(r)
			return refusal, false, err
		}
		for _, m := range cfg.Mechanisms {
			resp.SupportedMechanisms = append(resp.SupportedMechanisms, string(m))
		}
		mech, ok := enabledMechanism(cfg.Mechanisms, req.Mechanism)
		if !ok {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, false, fmt.Errorf("%w: mechanism %q is not enabled", ErrAuthentication, req.Mechanism)
		}
		x, err := cfg.Authenticator.Start(mech)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, false, fmt.Errorf("%w: %w", ErrAuthentication, err)
		}
		a.exchange = x
		if a.authenticated {
			a.reauthStarted = now
			if mech != a.mechanism {
				a.refuse = fmt.Errorf("%w: SASL mechanism %s requested by client is not supported for re-authentication of mechanism %s",
					ErrAuthentication, mech, a.mechanism)
			}
		}
		if r.Version == 0 {
			// The reader reads the next frame only after this request was
			// handled (authStep), so it sees the flag before that frame.
			a.rawTokens = true
			c.rawTokens.Store(true)
		}
		return resp, false, nil
	case *kmsg.SASLAuthenticateRequest:
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if cfg == nil || a.exchange == nil && a.authenticated {
			// Kafka's API layer answers it (also on a listener without
			// SASL); the session goes on.
			if _, err := c.checkAuthenticated(r); err != nil {
				return nil, false, err
			}
			resp.ErrorCode = kerr.IllegalSaslState.Code
			m := "SaslAuthenticate request received after successful authentication"
			resp.ErrorMessage = &m
			return resp, true, nil
		}
		if a.exchange == nil {
			return nil, false, fmt.Errorf("%w: SaslAuthenticate without a preceding SaslHandshake", ErrAuthentication)
		}
		if a.refuse != nil {
			x, err := a.exchange, a.refuse
			a.exchange, a.refuse = nil, nil
			c.reportAuth(x, true, err)
			return nil, false, err
		}
		x := a.exchange
		out, err := x.Step(req.SASLAuthBytes)
		reauth := a.authenticated
		if err == nil && x.Done() && reauth && principalOf(x) != a.principal {
			err = principalChange(a.principal, principalOf(x))
		}
		if err != nil {
			a.exchange = nil
			c.reportAuth(x, reauth, err)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			m := authFailureMessage(err, x.Mechanism(), reauth)
			resp.ErrorMessage = &m
			return resp, false, fmt.Errorf("%w: %s: %w", ErrAuthentication, x.Mechanism(), err)
		}
		resp.SASLAuthBytes = out
		if !x.Done() {
			return resp, false, nil
		}
		resp.SessionLifetimeMillis = c.completeAuth(x, reauth).Milliseconds()
		return resp, false, nil
	}
	return nil, false, fmt.Errorf("%w: %T is not a SASL request", ErrBadResponse, r.Msg)
}

// completeAuth records a finished exchange: the connection is authenticated as
// x's user until the returned session lifetime has passed (zero: forever).
func (c *conn) completeAuth(x sasl.Exchange, reauth bool) (lifetime time.Duration) {
	a := &c.auth
	a.exchange = nil
	a.rawTokens = false
	c.rawTokens.Store(false)
	a.authenticated = true
	a.mechanism = x.Mechanism()
	a.principal = principalOf(x)
	a.expiry = time.Time{}
	now := c.srv.SASL.clock()
	lifetime = c.srv.SASL.SessionLifetime
	// A credential that expires (an OAUTHBEARER or delegation token) ends the
	// session no later than itself, with or without a configured lifetime, as
	// in Kafka. At least a millisecond: zero would tell the client "forever".
	if e, ok := x.(interface{ SessionExpiry() time.Time }); ok && !e.SessionExpiry().IsZero() {
		left := e.SessionExpiry().Sub(now)
		if lifetime <= 0 || left < lifetime {
			lifetime = max(left, time.Millisecond)
		}
	}
	if lifetime > 0 {
		a.expiry = now.Add(lifetime)
	}
	principal := a.principal
	c.info.principal.Store(&principal)
	c.info.sasl.Store(true)
	c.info.tokenAuth.Store(isTokenLogin(x))
	c.authed.Store(true)
	c.reportAuth(x, reauth, nil)
	return lifetime
}

// serveSASLToken steps the exchange a SaslHandshake v0 started (an
// authentication or a re-authentication) with one raw client token. The answer
// is a raw token frame; a failure closes the connection without one, as the
// legacy framing has no way to say why.
func (c *conn) serveSASLToken(r *Request) (*outgoing, error) {
	a := &c.auth
	x := a.exchange
	if x == nil || !a.rawTokens {
		return nil, fmt.Errorf("%w: a raw SASL token outside a SaslHandshake v0 exchange", ErrAuthentication)
	}
	reauth := a.authenticated
	if a.refuse != nil {
		a.exchange = nil
		c.reportAuth(x, reauth, a.refuse)
		return nil, a.refuse
	}
	out, err := x.Step(r.saslToken)
	if err == nil && x.Done() && reauth && principalOf(x) != a.principal {
		err = principalChange(a.principal, principalOf(x))
	}
	if err != nil {
		a.exchange = nil
		c.reportAuth(x, reauth, err)
		return nil, fmt.Errorf("%w: %s (SaslHandshake v0): %w", ErrAuthentication, x.Mechanism(), err)
	}
	if x.Done() {
		c.completeAuth(x, reauth)
	}
	return &outgoing{req: r, raw: true, token: out}, nil
}

// tokenLogin is an exchange that may have logged in with a delegation token.
type tokenLogin interface {
	TokenOwner() (principal string, ok bool)
}

// principalOf is the principal a finished exchange authenticated: the
// token's owner for a delegation token login, else User:<name>.
func principalOf(x sasl.Exchange) string {
	if t, ok := x.(tokenLogin); ok {
		if owner, ok := t.TokenOwner(); ok {
			return owner
		}
	}
	return "User:" + x.User()
}

func isTokenLogin(x sasl.Exchange) bool {
	t, ok := x.(tokenLogin)
	if !ok {
		return false
	}
	_, ok = t.TokenOwner()
	return ok
}

func (c *conn) reportAuth(x sasl.Exchange, reauth bool, err error) {
	if f := c.srv.SASL.OnAuthenticate; f != nil {
		f(c.info, x.Mechanism(), x.User(), reauth, err)
	}
}

func enabledMechanism(enabled []sasl.Mechanism, name string) (sasl.Mechanism, bool) {
	for _, m := range enabled {
		if string(m) == name {
			return m, true
		}
	}
	return "", false
}
