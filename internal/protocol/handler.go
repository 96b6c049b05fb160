package protocol

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one decoded request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string // nil when the client sent a null client id
	// Msg is the decoded body with SetVersion already applied. For an ApiVersions
	// request newer than supported it is an empty v0 request (the body is not
	// parsed, per KIP-511) while Version keeps what the client asked for.
	Msg      kmsg.Request
	Size     int       // bytes on the wire, including the 4-byte size prefix
	Received time.Time // when the whole frame had been read

	reserved int64 // bytes held in the server's memory pool until handled
	preAuth  bool  // read during an authentication or re-authentication, or a SaslHandshake: the reader waits for it to be handled
	// saslToken is a raw SASL token (Key saslTokenKey) read after SaslHandshake v0.
	saslToken []byte
	// frame, for a key in Server.ReuseFrameKeys, is the pooled buffer the frame
	// was read into; it goes back to its pool once the request is done.
	frame *[]byte
	// queue is the connection's queue of requests read and not yet handled.
	queue chan *Request
}

// Queued tells whether, at the moment of the call, another request of the
// connection has been read and waits to be handled behind r (a client
// pipelining its requests).
func (r *Request) Queued() bool { return len(r.queue) > 0 }

// Response is what a Handler returns: exactly one of Msg, Body, None or Wait.
type Response struct {
	// Msg is encoded by the writer with kmsg AppendTo at the request's version
	// (the writer calls SetVersion). Its key must be the request's key.
	Msg kmsg.Response
	// Body is a pre-encoded body: everything after the response header.
	Body Body
	// None sends nothing at all (Produce with acks=0).
	None bool
	// Close, beside None, closes the connection once the responses to the
	// requests before this one are written (Kafka's closeConnection): a Produce
	// with acks=0 that failed on a partition, whose client reads no answer and
	// learns from the closed connection to refresh its metadata. The reason is
	// logged and passed to ConnCloseHook wrapped in ErrClosedByHandler.
	Close error
	// Wait finishes the request off the handler goroutine: the handler did the part
	// that must happen in arrival order (a Produce's appends) and Wait does the
	// waiting (acks=all). The connection's next request is handled meanwhile, and
	// responses still go out in request order. Wait returns a Response with Msg,
	// Body or None set; ctx is cancelled when the connection closes.
	Wait func(ctx context.Context) Response
	// WaitOnWriter marks a Wait that only waits, for state the handler set up and
	// against deadlines fixed before Handle returned (an acks=all Produce waiting
	// for the high-water mark): the connection's writer runs it when the
	// response's turn comes, instead of a goroutine of its own from when Handle
	// returns. The answer goes out at the same moment either way, since the
	// writer sends responses in order, and no goroutine is started, grown and
	// handed off per request. A Wait that does work of its own (asks a
	// coordinator, retries) must not set it: that work would start only once the
	// responses before it are written.
	WaitOnWriter bool
	// Ready, beside a WaitOnWriter Wait, reports without blocking whether that
	// Wait would return at once (what it waits for has happened: the
	// high-water mark passed the appended batches). The writer then writes the
	// response right behind the ones before it, in one socket write, instead of
	// sending those first: the answers that one fsync completes leave together.
	// Optional (nil: the writer sends what is before it first). A Ready that
	// reports true while Wait blocks delays the responses before it until Wait
	// returns.
	Ready func() bool
	// Throttle, beside Msg, Body or Wait, mutes the connection for that long
	// from when Handle returns: nothing more is read or served from it (KIP-219).
	// The response itself goes out at once and says so in throttle_time_ms.
	Throttle time.Duration
}

// Body is a pre-encoded response body that may contain file ranges, so Fetch can
// send record data with sendfile(2).
type Body interface {
	// Len is the exact number of bytes WriteBody writes.
	Len() int
	// WriteBody writes the body. Writing more than Len bytes fails; writing fewer
	// closes the connection with ErrBodyLength.
	WriteBody(w BodyWriter) error
	// Release is called exactly once, after WriteBody returned or, when the
	// connection closed first, without WriteBody being called.
	Release()
}

// BodyWriter is what a Body writes to; it is valid only during WriteBody.
type BodyWriter interface {
	io.Writer
	// SendFile writes n bytes of f starting at off. On a TCP or Unix connection it
	// flushes the buffered bytes and uses sendfile(2) with an explicit offset, so
	// f's file position is never used or moved; otherwise it copies with ReadAt.
	// A file shorter than off+n fails with io.ErrUnexpectedEOF.
	SendFile(f *os.File, off int64, n int) error
}

// Handler serves every request except ApiVersions.
type Handler interface {
	// Handle serves one request. Requests from one connection are handled one at
	// a time in arrival order (an idempotent producer's pipelined batches must be
	// appended in sequence order), while the reader keeps decoding ahead. A long
	// wait (acks=all, a Fetch long-poll) blocks only this connection.
	//
	// ctx is cancelled when the connection closes: nobody will read the response.
	// Requests read before that are still handed to Handle, in order, with the
	// cancelled ctx (as Kafka processes a closed connection's queued requests):
	// the request should still take effect (a Produce is appended) but waiting
	// may stop, and the response is dropped.
	Handle(ctx context.Context, c *ConnInfo, r *Request) Response
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *ConnInfo, r *Request) Response

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *ConnInfo, r *Request) Response {
	return f(ctx, c, r)
}
