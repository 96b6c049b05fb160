package protocol

import (
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/strata-stream/strata/internal/certs"
)

// ConnInfo describes one client connection, for handlers, hooks and logs. It is
// safe for concurrent use.
type ConnInfo struct {
	ID         uint64 // unique per Server, starting at 1
	RemoteAddr net.Addr
	LocalAddr  net.Addr

	clientID  atomic.Pointer[string]
	software  atomic.Pointer[clientSoftware]
	principal atomic.Pointer[string]
	tls       atomic.Bool
	sasl      atomic.Bool // authenticated with SASL
	tokenAuth atomic.Bool // with a delegation token (KIP-48)
}

type clientSoftware struct{ name, version string }

// ClientID returns the client id of the latest request that had a non-null one.
func (c *ConnInfo) ClientID() string {
	if p := c.clientID.Load(); p != nil {
		return *p
	}
	return ""
}

// Principal returns the Kafka principal the connection authenticated as: from its
// verified client certificate on a TLS listener ("User:<CN>"), else
// "User:ANONYMOUS".
func (c *ConnInfo) Principal() string {
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return certs.Anonymous
}

// SASLAuthenticated reports whether the connection authenticated with SASL.
func (c *ConnInfo) SASLAuthenticated() bool { return c.sasl.Load() }

// TokenAuthenticated reports whether the connection's SASL login used a
// delegation token: such a session may not create, renew or expire tokens.
func (c *ConnInfo) TokenAuthenticated() bool { return c.tokenAuth.Load() }

// TLS reports whether the connection runs over TLS.
func (c *ConnInfo) TLS() bool { return c.tls.Load() }

// ClientSoftware returns the name and version the client sent in ApiVersions v3+,
// or empty strings.
func (c *ConnInfo) ClientSoftware() (name, version string) {
	if p := c.software.Load(); p != nil {
		return p.name, p.version
	}
	return "", ""
}

// LogValue makes a *ConnInfo log as a group of its fields.
func (c *ConnInfo) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Uint64("id", c.ID), slog.String("remote", addrString(c.RemoteAddr))}
	if id := c.ClientID(); id != "" {
		attrs = append(attrs, slog.String("client_id", id))
	}
	if p := c.principal.Load(); p != nil {
		attrs = append(attrs, slog.String("principal", *p))
	}
	if name, version := c.ClientSoftware(); name != "" {
		attrs = append(attrs, slog.String("software", name+"/"+version))
	}
	return slog.GroupValue(attrs...)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// SASLConnInfo returns the ConnInfo of a connection that authenticated with
// SASL as principal, with a delegation token when token is set: what a
// handler sees of such a connection, for tests of handlers.
func SASLConnInfo(principal string, token bool) *ConnInfo {
	c := &ConnInfo{}
	c.principal.Store(&principal)
	c.sasl.Store(true)
	c.tokenAuth.Store(token)
	return c
}
