package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	readBufferSize  = 16 << 10
	writeBufferSize = 32 << 10
	// maxKeptEncodeBuffer bounds the encode buffer a connection keeps between
	// responses; a larger one (a big Metadata response) is dropped after use, so
	// idle connections do not pin memory.
	maxKeptEncodeBuffer = 64 << 10
)

// conn is one client connection and its three goroutines:
//
//	reader --reqs--> handler --resps--> writer
//
// The reader closes reqs when it stops, the handler then closes resps, and the
// writer, last, finishes the connection. Any goroutine may call close, which
// closes done, cancels ctx and closes the socket. The reader then stops; the
// handler still hands every request already read to Handle (with the cancelled
// ctx), as Kafka still processes the queued requests of a closed connection; the
// writer drops the responses, releasing their bodies.
type conn struct {
	srv    *Server
	nc     net.Conn
	ip     string // the key the server's connection limiter counts this connection under
	info   *ConnInfo
	ctx    context.Context // given to Handle; cancelled by close
	cancel context.CancelFunc
	reqs   chan *Request
	resps  chan *outgoing
	done   chan struct{}

	// Authentication (sasl.go): auth belongs to the handler goroutine; authed
	// mirrors auth.authenticated for the reader, and authStep wakes the reader
	// once a request read before authentication was handled.
	auth     authState
	authed   atomic.Bool
	authStep chan struct{}
	// rawTokens mirrors auth.rawTokens for the reader: after SaslHandshake v0
	// it reads raw SASL tokens until the exchange completes.
	rawTokens atomic.Bool
	// exchanging mirrors auth.exchange != nil for the reader, set before it
	// reads on after a request of an authentication (authenticating).
	exchanging atomic.Bool
	// mutedUntil (unix nanos) is set when a throttled response is handed back:
	// the connection reads and serves nothing before then (waitMuted).
	mutedUntil atomic.Int64

	// Idle tracking (Server.ConnectionsMaxIdle): active is set when bytes are
	// read or a request is answered, inFlight counts the requests read and not
	// yet answered, and lastActive, the idle sweeper's own (under srv.mu), is
	// when a sweep last saw the connection active.
	active     atomic.Bool
	inFlight   atomic.Int32
	lastActive time.Time

	closeOnce sync.Once
	closeErr  error       // the first close reason; read only after closeOnce.Do
	draining  atomic.Bool // Shutdown: stop reading, finish what was read

	// bodyTimer closes the connection when a frame's body is late (watchBody);
	// reader goroutine only.
	bodyTimer *time.Timer

	// Writer goroutine only.
	encodeBuf []byte
	body      bodyWriter
}

// outgoing is one handled request on its way to the writer.
type outgoing struct {
	req      *Request
	msg      kmsg.Response // version already set
	body     Body
	flexible bool // response header v1: one tag byte
	none     bool // nothing to write: a deferred None, or a None with Close
	// closeAfter, when set, closes the connection (with this reason) once the
	// response is written, or once the responses before it are when none is
	// set: a failed authentication, a Response.Close.
	closeAfter error
	// raw, for a raw SASL token (after SaslHandshake v0), writes token framed by
	// its size alone, with no response header.
	raw   bool
	token []byte
	// pending, for a deferred response (Response.Wait), is closed once msg, body or
	// none is set; waitErr is then a failure of Wait itself.
	pending chan struct{}
	waitErr error
	// wait, for a Response.WaitOnWriter, is the Wait the writer runs in this
	// response's turn (it then sets msg, body or none, or waitErr).
	wait    func(context.Context) Response
	ready   func() bool // Response.Ready of that wait, or nil
	started time.Time
	handled time.Time
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		srv:        s,
		nc:         nc,
		info:       &ConnInfo{ID: s.nextID.Add(1), RemoteAddr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr()},
		ctx:        ctx,
		cancel:     cancel,
		reqs:       make(chan *Request, s.maxInFlight),
		resps:      make(chan *outgoing, s.maxInFlight),
		done:       make(chan struct{}),
		authStep:   make(chan struct{}, 1),
		lastActive: time.Now(),
	}
}

// activityReader is the connection's socket as its reader reads it: every read
// that returns bytes marks the connection active for the idle sweeper.
type activityReader struct{ c *conn }

func (r activityReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	if n > 0 {
		r.c.active.Store(true)
	}
	return n, err
}

// answered ends a request's time in flight: it was answered (its response is
// about to be written) or needed no answer.
func (c *conn) answered() {
	c.inFlight.Add(-1)
	c.active.Store(true)
}

// idleFor is how long the connection has been idle as of now, as the idle
// sweeper sees it: since the last sweep that found it active since the sweep
// before, or with a request in flight. It never counts more than the time since
// the last byte read or the last answer. Called by the sweeper only.
func (c *conn) idleFor(now time.Time) time.Duration {
	if c.active.Swap(false) || c.inFlight.Load() > 0 {
		c.lastActive = now
	}
	return now.Sub(c.lastActive)
}

// close ends the connection; err nil means a clean end. It reports whether this
// call was the one that closed it.
func (c *conn) close(err error) bool {
	closed := false
	c.closeOnce.Do(func() {
		closed = true
		c.closeErr = err
		close(c.done)
		c.cancel()
		if err != nil {
			// Not a clean end: cut the socket under TLS first. A flush of held
			// TLS records to a client that does not read would otherwise keep
			// crypto/tls's close_notify waiting, up to the 5 s it allows.
			tlsSocketOf(c.nc).abort()
		}
		_ = c.nc.Close()
	})
	return closed
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// drain makes the reader stop; what was read is still handled and written.
func (c *conn) drain() {
	c.draining.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// fail closes the connection because of err and logs it: protocol violations at
// warn, I/O errors (a client going away) at debug.
func (c *conn) fail(err error) {
	if !c.close(err) {
		return
	}
	level := slog.LevelDebug
	for _, violation := range []error{ErrFrameSize, ErrFrameTooLarge, ErrTruncatedHeader, ErrUnknownAPIKey,
		ErrUnsupportedVersion, ErrMalformedRequest, ErrBadResponse, ErrBodyLength, ErrPanic, ErrTLSHandshake, ErrAuthentication,
		ErrBodyTimeout} {
		if errors.Is(err, violation) {
			level = slog.LevelWarn
			break
		}
	}
	c.srv.log.Log(context.Background(), level, "protocol: closing connection", "conn", c.info, "err", err)
}

// panicError logs a recovered panic with its stack and returns the error that
// closes the connection.
func (c *conn) panicError(where string, p any) error {
	c.srv.log.Error("protocol: panic serving connection", "conn", c.info, "in", where, "panic", p, "stack", string(debug.Stack()))
	return fmt.Errorf("%w: in %s: %v", ErrPanic, where, p)
}

// runReader reads and decodes frames into reqs until the connection ends.
func (c *conn) runReader() {
	defer c.srv.wg.Done()
	defer close(c.reqs)
	defer func() {
		if p := recover(); p != nil {
			c.fail(c.panicError("reader", p))
		}
	}()
	for _, h := range c.srv.hooks.open {
		h.OnConnOpen(c.info)
	}
	c.srv.log.Debug("protocol: connection accepted", "conn", c.info)
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.handshake(tc); err != nil {
			if c.draining.Load() {
				return // Shutdown cut the handshake short
			}
			c.fail(err)
			return
		}
	}
	var src io.Reader = c.nc
	if c.srv.maxIdle > 0 {
		src = activityReader{c}
	}
	br := bufio.NewReaderSize(src, readBufferSize)
	for {
		if c.rawTokens.Load() {
			if !c.readRawToken(br) {
				return
			}
			continue
		}
		frame, pooled, reserved, err := c.readFrame(br)
		received := time.Now()
		switch {
		case err == nil:
		case c.draining.Load() || c.isClosed() || errors.Is(err, errStopped):
			return
		case errors.Is(err, io.EOF):
			c.close(nil) // the client hung up between requests
			return
		default:
			c.fail(err)
			return
		}
		r, err := c.srv.reg.decodeRequest(frame)
		if err != nil {
			putFrame(pooled)
			c.srv.pool.release(reserved)
			c.fail(err)
			return
		}
		r.Received = received
		r.reserved = reserved
		r.frame = pooled
		r.queue = c.reqs
		// A SaslHandshake may make the next frame a raw token (v0), also
		// once authenticated (a re-authentication).
		r.preAuth = c.authenticating() || c.srv.SASL != nil && r.Key == saslHandshakeKey
		if r.ClientID != nil {
			c.info.clientID.Store(r.ClientID)
		}
		for _, h := range c.srv.hooks.request {
			h.OnRequest(c.info, r)
		}
		c.inFlight.Add(1)
		select {
		case c.reqs <- r:
		case <-c.done:
			c.srv.pool.release(reserved)
			return
		}
		if r.preAuth {
			// Before authentication one request at a time: the next frame's size
			// bound, framing and whether it may be served depend on this one's
			// outcome.
			select {
			case <-c.authStep:
			case <-c.done:
				return
			}
		}
	}
}

// readRawToken reads one raw SASL token (after SaslHandshake v0), queues it for
// the handler and waits until it was handled. It returns false when the reader
// must stop.
func (c *conn) readRawToken(br *bufio.Reader) bool {
	token, reserved, err := c.readToken(br)
	switch {
	case err == nil:
	case c.draining.Load() || c.isClosed() || errors.Is(err, errStopped):
		return false
	default:
		// A client hanging up mid-exchange is still a failed authentication.
		c.fail(fmt.Errorf("%w: reading a raw SASL token: %w", ErrAuthentication, err))
		return false
	}
	r := &Request{Key: saslTokenKey, Size: len(token) + 4, Received: time.Now(), saslToken: token, reserved: reserved, preAuth: true}
	c.inFlight.Add(1)
	select {
	case c.reqs <- r:
	case <-c.done:
		c.srv.pool.release(reserved)
		return false
	}
	select {
	case <-c.authStep:
		return true
	case <-c.done:
		return false
	}
}

// readToken reads one raw SASL token, reserving its size in the server's memory
// pool as readFrame does for a request.
func (c *conn) readToken(br *bufio.Reader) (token []byte, reserved int64, err error) {
	size, err := readSize(br, 0, c.srv.saslMaxReceive) // a token may be empty
	if err != nil {
		return nil, 0, err
	}
	reserved, ok := c.srv.pool.acquire(int64(size), c.done, c.srv.quit)
	if !ok {
		return nil, 0, errStopped
	}
	if c.watchBody(br, size) {
		defer c.bodyTimer.Stop()
	}
	if token, err = readFrameBody(br, size); err != nil {
		c.srv.pool.release(reserved)
		return nil, 0, err
	}
	return token, reserved, nil
}

// authenticating tells the reader whether the next frame belongs to an
// authentication or a re-authentication (after its SaslHandshake), as Kafka's
// authenticator reads them: one at a time, each once the one before was
// handled, and bounded by SASLConfig.MaxReceiveBytes.
func (c *conn) authenticating() bool {
	return c.srv.SASL != nil && (!c.authed.Load() || c.exchanging.Load())
}

// waitMuted waits out a throttle (KIP-219: the broker stops reading from a
// throttled client's connection). It returns false when the connection closed
// or the server stopped first.
func (c *conn) waitMuted() bool {
	wait := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
	case <-c.srv.quit:
	}
	return false
}

// mute makes the connection read and serve nothing for d from now (KIP-219).
func (c *conn) mute(d time.Duration) {
	c.mutedUntil.Store(time.Now().Add(d).UnixNano())
}

// chargeRequest charges r, answered with msg by this package where Kafka's API
// layer serves it, to the client's request quota (Server.RequestThrottle); a
// client over it is muted, and msg says for how long where it can.
func (c *conn) chargeRequest(r *Request, msg kmsg.Response, started time.Time) {
	if c.srv.RequestThrottle == nil {
		return
	}
	d := c.srv.RequestThrottle(c.info, r, time.Since(started))
	if d <= 0 {
		return
	}
	c.mute(d)
	if t, ok := msg.(kmsg.SetThrottleResponse); ok {
		t.SetThrottle(int32(min(d.Milliseconds(), math.MaxInt32)))
	}
}

// handshake completes a TLS handshake within the server's HandshakeTimeout and
// records the principal of the client's certificate; one that no mapping rule
// applies to fails authentication. With SASL on (SASL_SSL) the principal is
// the SASL login's and the mapping rules do not apply, as in Kafka.
func (c *conn) handshake(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrTLSHandshake, err)
	}
	c.info.tls.Store(true)
	if c.srv.SASL != nil {
		return nil
	}
	principal, err := c.srv.Principals.Principal(tc.ConnectionState())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	c.info.principal.Store(&principal)
	return nil
}

// readFrame reads one frame, first reserving its size in the server's memory
// pool; the reservation is returned with the frame and must be released once the
// request is handled (or dropped). It returns errStopped, reserving nothing, when
// the connection closed or the server stopped while it waited for room.
func (c *conn) readFrame(br *bufio.Reader) (frame []byte, pooled *[]byte, reserved int64, err error) {
	if !c.waitMuted() {
		return nil, nil, 0, errStopped
	}
	maxBytes := c.srv.maxRequestBytes
	if c.authenticating() {
		maxBytes = min(maxBytes, c.srv.saslMaxReceive)
	}
	size, err := readFrameSize(br, maxBytes)
	if err != nil {
		return nil, nil, 0, err
	}
	reserved, ok := c.srv.pool.acquire(int64(size), c.done, c.srv.quit)
	if !ok {
		return nil, nil, 0, errStopped
	}
	if c.watchBody(br, size) {
		defer c.bodyTimer.Stop()
	}
	frame, pooled, err = c.readFrameBody(br, size)
	if err != nil {
		c.srv.pool.release(reserved)
		return nil, nil, 0, err
	}
	return frame, pooled, reserved, nil
}

// watchBody bounds the time the size bytes of a body after its prefix may take
// to arrive (Server.BodyTimeout): it starts bodyTimer, which closes the
// connection when it fires, and the caller stops it once the body is read. The
// reservation the reader holds meanwhile is released as the reader ends, so a
// client that announces a frame and stalls holds pool room for BodyTimeout at
// most. A body already buffered needs no timer (false).
func (c *conn) watchBody(br *bufio.Reader, size int32) bool {
	if c.srv.bodyTimeout <= 0 || br.Buffered() >= int(size) {
		return false
	}
	if c.bodyTimer == nil {
		c.bodyTimer = time.AfterFunc(c.srv.bodyTimeout, func() {
			c.fail(fmt.Errorf("%w: a frame's body not read within %v", ErrBodyTimeout, c.srv.bodyTimeout))
		})
	} else {
		c.bodyTimer.Reset(c.srv.bodyTimeout)
	}
	return true
}

// readFrameBody reads a frame's body into a pooled buffer when its key is in
// Server.ReuseFrameKeys and its size is pooled (pooled is then that buffer), or
// into a new one.
func (c *conn) readFrameBody(br *bufio.Reader, size int32) (frame []byte, pooled *[]byte, err error) {
	if len(c.srv.reuseFrame) == 0 || frameClass(int(size)) < 0 {
		frame, err = readFrameBody(br, size)
		return frame, nil, err
	}
	// The key is the first two bytes; a frame this size has them.
	head, err := br.Peek(2)
	if err != nil {
		return nil, nil, truncatedFrame(err, len(head), int(size))
	}
	if key := int(binary.BigEndian.Uint16(head)); key >= len(c.srv.reuseFrame) || !c.srv.reuseFrame[key] {
		frame, err = readFrameBody(br, size)
		return frame, nil, err
	}
	return readPooledFrame(br, int(size))
}

// recycleFrame returns a finished request's pooled frame buffer, once.
func recycleFrame(r *Request) {
	putFrame(r.frame)
	r.frame = nil
}

// runHandler serves requests one at a time, in order, and queues the responses.
func (c *conn) runHandler() {
	defer c.srv.wg.Done()
	defer close(c.resps)
	for r := range c.reqs {
		c.waitMuted() // requests read ahead wait out a throttle too; a closed connection still handles them
		out, err := c.serve(r)
		c.srv.pool.release(r.reserved)
		if r.preAuth {
			c.exchanging.Store(c.auth.exchange != nil)
			c.authStep <- struct{}{} // never blocks: the reader takes each before reading on
		}
		switch {
		case err != nil:
			c.fail(err)
		case out == nil: // Response.None
			c.answered()
			recycleFrame(r)
		default:
			select {
			case c.resps <- out:
			case <-c.done:
				_ = c.release(out)
			}
		}
	}
}

// serve answers ApiVersions or calls the Handler, and checks its Response. It
// returns nil, nil for a None response.
func (c *conn) serve(r *Request) (out *outgoing, err error) {
	started := time.Now()
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, c.panicError("handler", p)
		}
	}()
	if r.Key == saslTokenKey {
		return c.serveSASLToken(r)
	}
	if r.Key == apiVersionsKey {
		preAuth := c.srv.SASL != nil && !c.auth.authenticated
		if c.srv.SASL != nil {
			if refusal, err := c.checkApiVersions(r); refusal != nil || err != nil {
				if refusal == nil {
					return nil, err
				}
				return &outgoing{req: r, msg: refusal, started: started, handled: time.Now(), closeAfter: err}, nil
			}
		}
		self := c.srv.self
		if preAuth {
			self = nil // Kafka checks a SASL connection only once it authenticated
		}
		msg, version := c.srv.reg.answerApiVersions(c.info, r, self)
		msg.SetVersion(version)
		if preAuth && msg.ErrorCode == 0 {
			c.auth.sawApiVersions = true
		}
		if !preAuth {
			c.chargeRequest(r, msg, started)
		}
		flexible := c.srv.reg.flexibleResponseHeader(r.Key, version) // never: response header v0
		return &outgoing{req: r, msg: msg, started: started, handled: time.Now(), flexible: flexible}, nil
	}
	if r.Key == saslHandshakeKey || r.Key == saslAuthenticateKey {
		msg, apiLayer, closeAfter := c.serveSASL(r)
		if msg == nil {
			return nil, closeAfter
		}
		msg.SetVersion(r.Version)
		if apiLayer {
			c.chargeRequest(r, msg, started)
		}
		return &outgoing{req: r, msg: msg, started: started, handled: time.Now(), closeAfter: closeAfter,
			flexible: c.srv.reg.flexibleResponseHeader(r.Key, r.Version)}, nil
	}
	if refusal, err := c.checkAuthenticated(r); err != nil {
		if refusal == nil {
			return nil, err
		}
		refusal.SetVersion(r.Version)
		return &outgoing{req: r, msg: refusal, started: started, handled: time.Now(), closeAfter: err,
			flexible: c.srv.reg.flexibleResponseHeader(r.Key, r.Version)}, nil
	}
	resp := c.srv.Handler.Handle(c.ctx, c.info, r)
	if resp.Throttle > 0 {
		c.mute(resp.Throttle)
	}
	out = &outgoing{req: r, started: started, handled: time.Now(), flexible: c.srv.reg.flexibleResponseHeader(r.Key, r.Version)}
	if resp.Wait != nil && resp.Msg == nil && resp.Body == nil && !resp.None {
		if resp.WaitOnWriter {
			out.wait, out.ready = resp.Wait, resp.Ready
			return out, nil
		}
		out.pending = make(chan struct{})
		c.srv.wg.Add(1)
		go c.finishDeferred(out, resp.Wait)
		return out, nil
	}
	return c.fill(out, resp)
}

// finishDeferred runs a Response.Wait on a goroutine of its own and completes
// out with its answer.
func (c *conn) finishDeferred(out *outgoing, wait func(context.Context) Response) {
	defer c.srv.wg.Done()
	defer close(out.pending)
	c.runWait(out, wait)
}

// runWait runs a Response.Wait and completes out with its answer.
func (c *conn) runWait(out *outgoing, wait func(context.Context) Response) {
	defer func() {
		if p := recover(); p != nil {
			out.waitErr = c.panicError("Response.Wait", p)
		}
	}()
	resp := wait(c.ctx)
	if resp.Wait != nil {
		out.waitErr = fmt.Errorf("%w: Response.Wait returned another Wait", ErrBadResponse)
		return
	}
	filled, err := c.fill(out, resp)
	out.none = out.none || (err == nil && filled == nil)
	out.waitErr = err
}

// fill checks a Response and puts it into out; it returns nil, nil for None
// (without Close: with it, out marked none and to close the connection).
func (c *conn) fill(out *outgoing, resp Response) (*outgoing, error) {
	r := out.req
	switch {
	case resp.Msg != nil && resp.Body == nil && !resp.None && resp.Close == nil:
		if resp.Msg.Key() != r.Key {
			return nil, fmt.Errorf("%w: %s response to a %s request", ErrBadResponse, kmsg.NameForKey(resp.Msg.Key()), kmsg.NameForKey(r.Key))
		}
		resp.Msg.SetVersion(r.Version)
		out.msg = resp.Msg
	case resp.Body != nil && resp.Msg == nil && !resp.None && resp.Close == nil:
		out.body = resp.Body
	case resp.None && resp.Msg == nil && resp.Body == nil:
		c.observe(out, 0, true, nil)
		if resp.Close != nil {
			out.none = true
			out.closeAfter = fmt.Errorf("%w: %w", ErrClosedByHandler, resp.Close)
			return out, nil
		}
		return nil, nil
	default:
		if resp.Body != nil {
			resp.Body.Release()
		}
		return nil, fmt.Errorf("%w: to %s: Msg set %t, Body set %t, None %t, Close set %t", ErrBadResponse,
			kmsg.NameForKey(r.Key), resp.Msg != nil, resp.Body != nil, resp.None, resp.Close != nil)
	}
	return out, nil
}

// runWriter writes responses in order, flushing when its queue is empty, then
// finishes the connection once the handler is done.
func (c *conn) runWriter() {
	defer c.srv.wg.Done()
	defer c.finish()
	bw := bufio.NewWriterSize(c.nc, writeBufferSize)
	c.body = bodyWriter{bw: bw, sock: sendfileSocket(c.nc)}
	if c.body.sock == nil {
		c.body.conn = c.nc
	}
	// Under TLS (NewTLSListener) the records of the responses written between
	// two flushes leave in few socket writes: begin before each response, and
	// every flush ends the batch.
	tsock := tlsSocketOf(c.nc)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return tsock.end()
	}
	for out := range c.resps {
		if out.pending != nil || out.wait != nil {
			// Send what is ready before waiting on a deferred response; one
			// whose wait is over already (Response.Ready) goes into the same
			// socket write.
			if !c.deferredDone(out) {
				if err := flush(); err != nil {
					c.fail(err)
				}
			}
			if wait := out.wait; wait != nil {
				out.wait = nil
				c.runWait(out, wait) // after a close too: its ctx is cancelled, so it returns soon
			} else {
				<-out.pending
			}
			if out.waitErr != nil {
				_ = c.release(out)
				c.fail(out.waitErr)
				continue
			}
		}
		c.answered()
		if out.none {
			recycleFrame(out.req)
			if out.closeAfter != nil {
				// Nothing of its own to write: what was answered before goes out first.
				if err := bw.Flush(); err != nil {
					c.fail(err)
				}
				c.fail(out.closeAfter)
			}
			continue
		}
		if c.isClosed() {
			_ = c.release(out)
			continue
		}
		tsock.begin()
		if out.raw {
			// The client waits for a raw token before it sends anything else.
			err := writeSASLToken(bw, out.token)
			if err == nil {
				err = flush()
			}
			if err != nil {
				c.fail(err)
			}
			continue
		}
		n, err := c.write(bw, out)
		if rerr := c.release(out); err == nil {
			err = rerr
		}
		if err == nil && (len(c.resps) == 0 || out.closeAfter != nil) {
			err = flush()
		}
		c.observe(out, n, false, err)
		recycleFrame(out.req)
		if err != nil {
			c.fail(err)
		} else if out.closeAfter != nil {
			c.fail(out.closeAfter)
		}
	}
}

// deferredDone reports whether a deferred response is had without waiting: a
// WaitOnWriter wait that reports Ready. A Ready that panics closes the
// connection, as a panicking Wait does.
func (c *conn) deferredDone(out *outgoing) (done bool) {
	if out.ready == nil {
		return false
	}
	defer func() {
		if p := recover(); p != nil {
			done = false
			c.fail(c.panicError("Response.Ready", p))
		}
	}()
	return out.ready()
}

// writeSASLToken writes a raw SASL token framed by its size.
func writeSASLToken(bw *bufio.Writer, token []byte) error {
	var size [4]byte
	putFrameSize(size[:], len(token))
	if _, err := bw.Write(size[:]); err != nil {
		return err
	}
	_, err := bw.Write(token)
	return err
}

// write frames one response into bw and returns the frame's size.
func (c *conn) write(bw *bufio.Writer, out *outgoing) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, c.panicError("writer", p)
		}
	}()
	buf := appendResponseHeader(c.encodeBuf[:0], out.req.CorrelationID, out.flexible)
	if out.msg != nil {
		buf = out.msg.AppendTo(buf)
		if cap(buf) <= maxKeptEncodeBuffer {
			c.encodeBuf = buf[:0]
		}
		if len(buf)-4 > math.MaxInt32 {
			return 0, fmt.Errorf("%w: %s response of %d bytes", ErrBadResponse, kmsg.NameForKey(out.req.Key), len(buf))
		}
		putFrameSize(buf, len(buf)-4)
		return bw.Write(buf)
	}
	headerLen := len(buf)
	bodyLen := out.body.Len()
	if bodyLen < 0 || bodyLen > math.MaxInt32-(headerLen-4) {
		return 0, fmt.Errorf("%w: %s body Len %d", ErrBadResponse, kmsg.NameForKey(out.req.Key), bodyLen)
	}
	putFrameSize(buf, headerLen-4+bodyLen)
	c.encodeBuf = buf[:0]
	if _, err := bw.Write(buf); err != nil {
		return 0, err
	}
	c.body.left = bodyLen
	if err := out.body.WriteBody(&c.body); err != nil {
		return 0, err
	}
	if c.body.left != 0 {
		return 0, fmt.Errorf("%w: %s body wrote %d of %d bytes", ErrBodyLength, kmsg.NameForKey(out.req.Key), bodyLen-c.body.left, bodyLen)
	}
	return headerLen + bodyLen, nil
}

// release releases out's Body, once. A WaitOnWriter wait not run yet (out is
// dropped: the connection closed) runs first, with the cancelled context, as a
// Wait on its own goroutine would have.
func (c *conn) release(out *outgoing) (err error) {
	if wait := out.wait; wait != nil {
		out.wait = nil
		c.runWait(out, wait)
	}
	b := out.body
	if b == nil {
		return nil
	}
	out.body = nil
	defer func() {
		if p := recover(); p != nil {
			err = c.panicError("Body.Release", p)
		}
	}()
	b.Release()
	return nil
}

// observe reports one handled request to the response hooks.
func (c *conn) observe(out *outgoing, n int, none bool, werr error) {
	if len(c.srv.hooks.response) == 0 {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.fail(c.panicError("ResponseHook", p))
		}
	}()
	e := ResponseEvent{
		QueueWait: out.started.Sub(out.req.Received),
		Handling:  out.handled.Sub(out.started),
		Total:     time.Since(out.req.Received),
		Bytes:     n,
		None:      none,
		Err:       werr,
	}
	for _, h := range c.srv.hooks.response {
		h.OnResponse(c.info, out.req, e)
	}
}

// finish runs last on every connection: it closes the socket, unregisters the
// connection and reports it closed.
func (c *conn) finish() {
	c.close(nil)
	tlsSocketOf(c.nc).release() // the reader has stopped, and the close_notify is sent
	c.srv.removeConn(c)
	err := c.closeErr
	for _, h := range c.srv.hooks.close {
		func() {
			defer func() {
				if p := recover(); p != nil {
					_ = c.panicError("ConnCloseHook", p)
				}
			}()
			h.OnConnClose(c.info, err)
		}()
	}
	c.srv.log.Debug("protocol: connection closed", "conn", c.info, "err", err)
}
