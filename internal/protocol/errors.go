package protocol

import "errors"

// Errors that end a connection (all but the last three, which Serve returns). The
// server never retries after any of them: the connection is closed, the error is
// logged and passed to ConnCloseHook (wrapped with details; match with errors.Is),
// and the client is expected to reconnect. Kafka-level failures are never Go
// errors: they travel as response error codes.
var (
	// ErrFrameSize means a request frame declared a size of zero or less.
	ErrFrameSize = errors.New("protocol: request frame size is not positive")
	// ErrFrameTooLarge means a request frame declared more than MaxRequestBytes.
	ErrFrameTooLarge = errors.New("protocol: request frame larger than MaxRequestBytes")
	// ErrTruncatedFrame means the connection ended inside a request frame.
	ErrTruncatedFrame = errors.New("protocol: request frame truncated")
	// ErrTruncatedHeader means a frame ended inside the request header.
	ErrTruncatedHeader = errors.New("protocol: request header truncated")
	// ErrUnknownAPIKey means the request's API key is not in the registry.
	ErrUnknownAPIKey = errors.New("protocol: unknown API key")
	// ErrUnsupportedVersion means the request's version is outside the registered
	// range for its key (ApiVersions is answered instead, per KIP-511).
	ErrUnsupportedVersion = errors.New("protocol: unsupported API version")
	// ErrMalformedRequest means kmsg could not decode the request body.
	ErrMalformedRequest = errors.New("protocol: malformed request body")
	// ErrBadResponse means the handler returned an empty Response, both Msg and
	// Body, a Msg for another API key, or a Body whose Len is out of range.
	ErrBadResponse = errors.New("protocol: handler returned an invalid response")
	// ErrBodyLength means a Body wrote a different number of bytes than its Len.
	ErrBodyLength = errors.New("protocol: response body length differs from Len")
	// ErrTLSHandshake means a TLS client did not complete its handshake within
	// HandshakeTimeout, or the handshake failed (no or an untrusted client
	// certificate on an mTLS listener, say).
	ErrTLSHandshake = errors.New("protocol: TLS handshake failed")
	// ErrBodyTimeout means a request frame's body did not arrive within
	// BodyTimeout of its size prefix (time waiting for pool room not counted).
	ErrBodyTimeout = errors.New("protocol: request body not received in time")
	// ErrConnectionIdle means the connection was idle for ConnectionsMaxIdle.
	ErrConnectionIdle = errors.New("protocol: connection idle")
	// ErrClosedByHandler means the handler asked for the connection to be closed
	// (Response.Close): an acks=0 Produce that failed on a partition.
	ErrClosedByHandler = errors.New("protocol: closed by the handler")
	// ErrPanic means a handler, body or hook panicked while serving the connection.
	ErrPanic = errors.New("protocol: panic while serving connection")
	// ErrServerClosed is returned by Serve after Close or Shutdown.
	ErrServerClosed = errors.New("protocol: server closed")
	// ErrInvalidVersions means Server.Versions is not a valid registry.
	ErrInvalidVersions = errors.New("protocol: invalid version registry")
	// ErrNoHandler means Server.Handler is nil.
	ErrNoHandler = errors.New("protocol: Server.Handler is nil")
)
