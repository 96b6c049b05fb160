// Package httpauth guards Strata's HTTP front doors (the HTTP API and the web
// console): it authenticates each request and authorizes it with the same ACLs
// the Kafka listener enforces.
//
// # Authentication
//
// With SASL on the Kafka listener, every request that is not open by design needs
// credentials:
//
//   - HTTP Basic, checked against the SCRAM users of the metadata log exactly as
//     SASL PLAIN checks them (sasl.Authenticator): only over TLS, unless PLAIN
//     without TLS was allowed too (--sasl-plain-without-tls);
//   - a bearer JWT when OAUTHBEARER is on, validated by the Kafka listener's
//     validator (signature, issuer, audience, expiry, principal claim);
//   - a delegation token when tokens are on, sent as "Bearer <token
//     id>.<HMAC>" (one dot, which no JWT has), where Basic is accepted. It
//     authenticates as the token's owner, checked against the current metadata
//     on every request and never cached, so an expiry, early or not, counts
//     at once. The HTTP API has no token routes, so a token cannot make
//     tokens there either (a Kafka token session may not).
//
// A request without usable credentials gets 401 with a WWW-Authenticate header
// per scheme offered. A wrong password and an unknown user get the same answer
// (PLAIN's decoy credential makes the work the same too). Every failure is
// counted (Config.OnAuthentication) and written as an audit line. A successful
// Basic check is remembered for a minute, keyed by an HMAC of the user, the
// password and the credential, so a polling client does not pay for PBKDF2 on
// every request; a changed or deleted credential misses the cache at once.
//
// Without SASL the principal is the TLS client certificate's (User:<CN>) when
// the listener asks for one, else User:ANONYMOUS, as on the Kafka listener.
//
// # Authorization
//
// Each route has a Rule, declared beside its route table:
//
//   - Open: served without credentials (health checks, the API document);
//   - Authenticated: any authenticated principal; the handler filters what it
//     shows (listings) or the page holds nothing of the cluster's;
//   - Needs(needs...): every need must pass; a check names an operation and
//     a resource: the cluster, or the topic or group a path value names.
//
// Resources named in a request body are checked by the handler once it has parsed
// the body, with Check (filtering) or Require (refusing). A route registered
// without a Rule (the zero Rule) refuses everyone when an authorizer is on, so a
// new route is closed until its rule is written; each route table has a test that
// fails for a route with no rule.
//
// # Concurrency
//
// A Guard is safe for concurrent use; its only mutable state is the Basic cache,
// behind a mutex never held across the password check.
package httpauth
