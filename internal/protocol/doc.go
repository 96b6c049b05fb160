// Package protocol owns the broker side of the Kafka wire protocol: reading and
// checking request frames, decoding request headers and bodies (always with kmsg),
// framing responses, the API version registry with the ApiVersions answer derived
// from it, and the goroutines that serve one client connection.
//
// # Wire format
//
// Every integer is big-endian. A request frame:
//
//	+----------------+------------------------------+-------------------------------+
//	| field          | encoding                     | when                          |
//	+----------------+------------------------------+-------------------------------+
//	| size           | int32, bytes after this one  | always, 1..MaxRequestBytes    |
//	| api key        | int16                        | always                        |
//	| api version    | int16                        | always                        |
//	| correlation id | int32                        | always                        |
//	| client id      | int16 length + bytes, -1=nil | header v1+ (all but           |
//	|                | (never compact)              | ControlledShutdown v0)        |
//	| header tags    | uvarint count, tagged fields | header v2: flexible versions  |
//	| body           | kmsg ReadFrom                | always                        |
//	+----------------+------------------------------+-------------------------------+
//
// A response frame:
//
//	+----------------+------------------------------+-------------------------------+
//	| size           | int32, bytes after this one  | always                        |
//	| correlation id | int32, copied from request   | always                        |
//	| header tags    | one 0x00 byte (no tags)      | flexible versions, except     |
//	|                |                              | ApiVersions (key 18, always   |
//	|                |                              | response header v0)           |
//	| body           | kmsg AppendTo, or a Body     | always                        |
//	+----------------+------------------------------+-------------------------------+
//
// # Serving
//
//  1. Fill in a Server (Handler, Versions, optional limits, Logger, Hooks) and call
//     Serve with a listener; Serve validates Versions once and returns its error.
//     Do not change the Server's fields after the first Serve.
//  2. For each accepted connection the server runs three goroutines: a reader that
//     reads and decodes frames ahead into a bounded queue (MaxInFlight; when it is
//     full the reader stops reading, which pushes back on the client through TCP), a
//     handler that serves the queued requests one at a time in arrival order, and a
//     writer that frames the responses in that same order and flushes whenever its
//     queue runs empty. A handler may return Response.Wait to finish a request off
//     the handler goroutine: the next request is handled meanwhile and the writer
//     waits for that response in its turn. A Wait runs on a goroutine of its own
//     from when Handle returns, unless Response.WaitOnWriter says it only waits
//     (a Produce waiting for acks=all): then the writer runs it in its turn.
//     The writer flushes what it wrote before a deferred response whose wait
//     may block; one whose Response.Ready reports the wait over already goes
//     into the same socket write, so the answers one fsync completes leave
//     together.
//     On a TLS listener (NewTLSListener, or tls.NewListener) the reader first
//     completes the handshake within HandshakeTimeout; ConnInfo.Principal is then
//     "User:<CN>" of a verified client certificate (mTLS), else "User:ANONYMOUS".
//     Responses are copied through TLS: sendfile applies to plaintext connections
//     only. Under NewTLSListener the TLS records of the responses written between
//     two flushes leave in few socket writes, and file ranges are read in large
//     chunks straight into the buffer handed to crypto/tls (tlsconn.go). Kernel
//     TLS is not used: docs/security.md says why.
//     Before reading a frame's body the reader reserves the frame's size in a memory
//     pool shared by all connections (MaxQueuedRequestBytes, Kafka's
//     queued.max.request.bytes, on by default); the reservation is released once
//     Handle has returned. When the pool is full the reader waits (first come,
//     first served) without reading, so however many clients announce large frames
//     and trickle them in, request memory stays bounded by the pool. Once its room
//     is reserved, a body must arrive within BodyTimeout (30 s, a client's
//     default request.timeout.ms, after which the client has given the request
//     up), or the connection is closed and the room released: clients that
//     announce frames and stall hold the pool for that long at most, so a
//     waiting request always gets its turn. A connection
//     over MaxConnections or MaxConnectionsPerIP is closed as soon as it is
//     accepted; Stats reports pool use and refusals. A connection with nothing
//     read and no request in flight for ConnectionsMaxIdle (10 minutes, Kafka's
//     connections.max.idle.ms) is closed; a request being handled or waiting (a
//     long-polling Fetch) keeps it open, and its idle time starts once it is
//     answered. One sweeper per Server looks every tenth of the timeout; reads
//     and answers only set a flag.
//     With Server.SASL set, a connection must authenticate (SaslHandshake and
//     SaslAuthenticate, or raw tokens after SaslHandshake v0, answered by this
//     package; see sasl.go) before any request but ApiVersions; until then frames are bounded by SASLConfig.MaxReceiveBytes
//     and read one at a time.
//     A Response with Throttle mutes the connection for that long (KIP-219):
//     nothing more is read or handled from it until then.
//  3. ApiVersions is answered by this package from Versions (versions 0-5; a newer
//     version gets a v0 reply with UNSUPPORTED_VERSION and the ApiVersions range, per
//     KIP-511). With Server.ClusterID set, a v5 request naming another cluster or
//     node is answered REBOOTSTRAP_REQUIRED (KIP-1242). Every other request goes to
//     Handler.Handle.
//  4. A frame whose size is not in 1..MaxRequestBytes, a truncated frame, an unknown
//     API key, a version outside the registered range, an undecodable body, an
//     invalid Response from the handler or a handler panic closes that connection
//     only; the reason is logged with the remote address and handed to ConnCloseHook.
//     So does a Response with None and Close (an acks=0 Produce that failed),
//     once the responses to the requests before it are written.
//     Requests read before the close are still handled, with a cancelled context,
//     and their responses dropped.
//  5. Shutdown stops accepting and reading, lets the requests already read finish
//     and their responses be written, then closes the connections. Close closes
//     them at once: the remaining requests see a cancelled context.
//
// # Concurrency
//
// Handle is called from one goroutine per connection, so calls for one connection
// never overlap and happen in request order; calls for different connections run in
// parallel. The decoded Request belongs to the handler. A returned Response must not
// be touched by the handler again: the writer encodes Msg, or writes Body and then
// calls its Release exactly once (also when the connection closes before the body
// was written). Handle must return soon after its context is cancelled, or Close
// and Shutdown wait for it. Hooks are called concurrently from every connection.
package protocol
