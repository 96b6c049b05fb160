package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/certs"
)

// Defaults for the zero values of Server's limits.
const (
	DefaultMaxRequestBytes = 100 << 20 // Kafka's socket.request.max.bytes
	DefaultMaxInFlight     = 16
	// DefaultMaxQueuedRequestBytes bounds request memory across connections. Kafka's
	// queued.max.request.bytes is off by default; Strata's is on.
	DefaultMaxQueuedRequestBytes = 256 << 20
	DefaultMaxConnections        = 10000
	DefaultMaxConnectionsPerIP   = 1000
	DefaultHandshakeTimeout      = 10 * time.Second
	// DefaultBodyTimeout is a Kafka client's default request.timeout.ms: a
	// request whose body has not arrived by then was given up by its client.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultConnectionsMaxIdle is Kafka's connections.max.idle.ms.
	DefaultConnectionsMaxIdle = 10 * time.Minute
)

// Server accepts Kafka client connections and serves them with Handler. See the
// package documentation for the connection model.
type Server struct {
	Handler Handler
	// Versions is the version registry: ApiVersions is answered from it, and a
	// request whose key is not listed or whose version is outside its range closes
	// the connection. ApiVersions (key 18) itself must not be listed.
	Versions []VersionRange
	// MaxRequestBytes bounds a request frame (socket.request.max.bytes); a larger
	// frame closes the connection. Zero means DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// MaxInFlight is how many decoded requests a connection queues ahead of its
	// handler (and how many responses ahead of its writer) before the reader stops
	// reading. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// MaxQueuedRequestBytes bounds the bytes of request frames read and not yet
	// handled, summed over all connections (queued.max.request.bytes): a reader
	// waits for room before reading a frame's body, so the client is pushed back
	// through TCP. Zero means DefaultMaxQueuedRequestBytes; negative, no bound.
	// A bound below MaxRequestBytes is raised to it, so the largest frame fits.
	MaxQueuedRequestBytes int64
	// BodyTimeout bounds the time a frame's body may take to arrive once the
	// reader holds its reservation in the memory pool: a connection whose body
	// is late is closed, so a client that announces a frame and stalls cannot
	// keep the pool from other connections. Zero means DefaultBodyTimeout;
	// negative, no bound.
	BodyTimeout time.Duration
	// ConnectionsMaxIdle closes a connection idle this long: nothing read from
	// it and no request in flight (Kafka's connections.max.idle.ms). A request
	// being handled or waiting (a long-polling Fetch) keeps it open. Zero means
	// DefaultConnectionsMaxIdle; negative, never.
	ConnectionsMaxIdle time.Duration
	// MaxConnections and MaxConnectionsPerIP bound open connections in total and
	// per client IP (max.connections, max.connections.per.ip); a connection over
	// a limit is closed as soon as it is accepted. Zero means the default
	// (DefaultMaxConnections, DefaultMaxConnectionsPerIP); negative, no limit.
	MaxConnections      int
	MaxConnectionsPerIP int
	// ConnectionThrottle, when set, is asked about every accepted connection
	// with the client's address, before the connection limits count it. A
	// positive answer means the address is over its connection creation rate
	// (KIP-612's connection_creation_rate): the connection is neither served
	// nor counted; it is held open, unread, for that long and then closed, as
	// Kafka delays the close so that the client does not reconnect at once.
	ConnectionThrottle func(ip netip.Addr) time.Duration
	// AcceptThrottle, when set, is asked about every accepted connection before
	// anything else; a positive answer (a broker-wide connection creation rate
	// over its limit, Kafka's max.connection.creation.rate) makes the accept
	// loop wait that long before serving the connection and accepting more.
	AcceptThrottle func() time.Duration
	// RequestThrottle, when set, charges the requests this package answers
	// where Kafka's API layer serves them to the client's request quota
	// (request_percentage, KIP-124): ApiVersions, and SaslHandshake and
	// SaslAuthenticate outside an authentication. busy is the time the answer
	// took. A positive result throttles the client as Response.Throttle does:
	// the connection is muted that long, and the answer says so where it has
	// throttle_time_ms. Requests of an authentication or re-authentication are
	// not charged, as Kafka's authenticator serves them.
	RequestThrottle func(c *ConnInfo, r *Request, busy time.Duration) time.Duration
	// HandshakeTimeout bounds a TLS handshake on a connection accepted from a TLS
	// listener (tls.NewListener); the handshake is completed before the first
	// request is read, and the client certificate gives ConnInfo.Principal. Zero
	// means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Principals maps a client certificate to the connection's principal
	// (--ssl-principal-mapping-rules); nil: User:<subject CN>.
	Principals *certs.PrincipalMapper
	// SASL, when set, requires SASL authentication on every connection (see
	// sasl.go); nil serves every connection as it comes (principal from TLS, or
	// User:ANONYMOUS).
	SASL *SASLConfig
	// ClusterID and NodeID name the broker this listener serves. A client
	// that names another cluster or node in ApiVersions v5+ (KIP-1242: its
	// metadata sent it to the wrong address) is answered REBOOTSTRAP_REQUIRED.
	// As Kafka, a SASL connection is checked only once authenticated. An
	// empty ClusterID checks nothing, as Kafka's controller listener.
	ClusterID string
	NodeID    int32
	// Logger receives connection errors and panics; nil discards them.
	Logger *slog.Logger
	// Hooks observe connections and requests, for metrics.
	Hooks []Hook
	// ReuseFrameKeys lists API keys whose request frames are read into pooled
	// buffers, reused once the response is written (or, for a None response, once
	// Handle returns). Only list a key whose Handler, Response (Wait, Body) and
	// Hooks keep no slice of the request after that: the []byte fields of
	// Request.Msg alias the frame (its strings are copies).
	ReuseFrameKeys []int16

	initOnce         sync.Once
	initErr          error
	reg              *registry
	reuseFrame       []bool // indexed by API key: ReuseFrameKeys
	hooks            hookSet
	log              *slog.Logger
	maxRequestBytes  int32
	maxInFlight      int
	handshakeTimeout time.Duration
	bodyTimeout      time.Duration    // <= 0: none
	maxIdle          time.Duration    // <= 0: never
	sweepTicks       <-chan time.Time // tests: a sweep per value, at that time, instead of a ticker's
	saslMaxReceive   int32
	self             *brokerIdentity // nil without ClusterID
	pool             *memoryPool
	limiter          connLimiter
	refused          atomic.Uint64
	throttled        atomic.Uint64
	throttleLogged   atomic.Int64  // unix nanos of the last connection-throttle log line
	refusedLogged    atomic.Int64  // unix nanos of the last refusal warning
	quit             chan struct{} // closed by Close and Shutdown
	nextID           atomic.Uint64
	wg               sync.WaitGroup // every connection goroutine
	mu               struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		held      map[net.Conn]*time.Timer // throttled connections waiting to be closed
		stopSweep chan struct{}            // non-nil while the idle sweeper runs; closed to stop it
	}
}

// init applies defaults and builds the registry, once.
func (s *Server) init() error {
	s.initOnce.Do(func() {
		s.quit = make(chan struct{})
		s.mu.listeners = make(map[net.Listener]struct{})
		s.mu.conns = make(map[*conn]struct{})
		s.mu.held = make(map[net.Conn]*time.Timer)
		s.log = s.Logger
		if s.log == nil {
			s.log = slog.New(slog.DiscardHandler)
		}
		s.maxRequestBytes = s.MaxRequestBytes
		if s.maxRequestBytes <= 0 {
			s.maxRequestBytes = DefaultMaxRequestBytes
		}
		s.maxInFlight = s.MaxInFlight
		if s.maxInFlight <= 0 {
			s.maxInFlight = DefaultMaxInFlight
		}
		s.handshakeTimeout = orDefault(s.HandshakeTimeout, DefaultHandshakeTimeout)
		s.bodyTimeout = orDefault(s.BodyTimeout, DefaultBodyTimeout)
		s.maxIdle = orDefault(s.ConnectionsMaxIdle, DefaultConnectionsMaxIdle)
		if s.SASL != nil {
			s.saslMaxReceive = s.SASL.MaxReceiveBytes
			if s.saslMaxReceive <= 0 {
				s.saslMaxReceive = DefaultSASLMaxReceiveBytes
			}
		}
		queued := orDefault(s.MaxQueuedRequestBytes, DefaultMaxQueuedRequestBytes)
		if queued > 0 {
			queued = max(queued, int64(s.maxRequestBytes)) // one largest frame always fits
		}
		s.pool = newMemoryPool(queued)
		s.limiter.maxTotal = orDefault(s.MaxConnections, DefaultMaxConnections)
		s.limiter.maxPerIP = orDefault(s.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP)
		s.hooks = newHookSet(s.Hooks)
		if s.ClusterID != "" {
			s.self = &brokerIdentity{clusterID: s.ClusterID, nodeID: s.NodeID}
		}
		if s.Handler == nil {
			s.initErr = ErrNoHandler
			return
		}
		s.reg, s.initErr = newRegistry(s.Versions)
		for _, k := range s.ReuseFrameKeys {
			if k < 0 {
				continue
			}
			if int(k) >= len(s.reuseFrame) {
				s.reuseFrame = append(s.reuseFrame, make([]bool, int(k)+1-len(s.reuseFrame))...)
			}
			s.reuseFrame[k] = true
		}
	})
	return s.initErr
}

// orDefault maps a limit's zero value to its default.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Stats is a snapshot of the server's resource use.
type Stats struct {
	// QueuedRequestBytes is reserved for request frames being read or waiting to
	// be handled, at most MaxQueuedRequestBytes.
	QueuedRequestBytes int64
	// OpenConnections is the connections being served.
	OpenConnections int
	// RefusedConnections counts connections closed at accept because of
	// MaxConnections or MaxConnectionsPerIP.
	RefusedConnections uint64
	// ThrottledConnections counts connections held and closed unserved because
	// ConnectionThrottle said so; HeldConnections is those still held.
	ThrottledConnections uint64
	HeldConnections      int
}

// Stats returns the server's current resource use.
func (s *Server) Stats() Stats {
	_ = s.init()
	s.limiter.mu.Lock()
	open := s.limiter.mu.total
	s.limiter.mu.Unlock()
	s.mu.Lock()
	held := len(s.mu.held)
	s.mu.Unlock()
	return Stats{QueuedRequestBytes: s.pool.inUse(), OpenConnections: open, RefusedConnections: s.refused.Load(),
		ThrottledConnections: s.throttled.Load(), HeldConnections: held}
}

// Serve accepts connections on ln until Close or Shutdown, then returns
// ErrServerClosed. Temporary accept errors are retried with backoff (5ms doubling
// to 1s); any other accept error is returned. Serve closes ln when it returns. It
// may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	if err := s.init(); err != nil {
		return err
	}
	if !s.trackListener(ln) {
		return ErrServerClosed
	}
	defer s.untrackListener(ln)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing() {
				return ErrServerClosed
			}
			if !retryableAccept(err) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("protocol: accept failed, retrying", "addr", addrString(ln.Addr()), "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		if s.AcceptThrottle != nil {
			if d := s.AcceptThrottle(); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-s.quit:
					t.Stop()
					_ = nc.Close()
					return ErrServerClosed
				}
			}
		}
		s.startConn(nc)
	}
}

// retryableAccept reports whether an accept error is worth retrying: too many
// open files, a connection aborted before it was accepted, and the like.
func retryableAccept(err error) bool {
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return true
	}
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout()
}

// Close stops accepting, closes every connection at once (cancelling the contexts
// given to Handle) and waits for all connection goroutines to end.
func (s *Server) Close() error {
	for _, c := range s.stop() {
		c.close(ErrServerClosed)
	}
	s.wg.Wait()
	return nil
}

// Shutdown stops accepting and reading; requests already read are handled and
// their responses written, then each connection closes. If ctx ends first, the
// remaining connections are closed as by Close and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, c := range s.stop() {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		conns := make([]*conn, 0, len(s.mu.conns))
		for c := range s.mu.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.close(ErrServerClosed)
		}
		<-done
		return ctx.Err()
	}
}

// stop marks the server closed, closes its listeners and returns the open
// connections.
func (s *Server) stop() []*conn {
	_ = s.init() // Close before Serve, or with a bad registry, still works
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		close(s.quit)
	}
	for ln := range s.mu.listeners {
		_ = ln.Close()
	}
	clear(s.mu.listeners)
	for nc, t := range s.mu.held {
		t.Stop()
		_ = nc.Close()
	}
	clear(s.mu.held)
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	return conns
}

func (s *Server) closing() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

func (s *Server) trackListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.listeners[ln] = struct{}{}
	if s.maxIdle > 0 && s.mu.stopSweep == nil {
		s.mu.stopSweep = make(chan struct{})
		s.wg.Add(1)
		go s.sweepIdle(s.mu.stopSweep)
	}
	return true
}

// sweepIdle closes the connections idle for ConnectionsMaxIdle, looking every
// tenth of it, until the server stops or stop is closed (stopIdleSweepLocked):
// a connection is closed
// between one and 1.1 times the timeout after it went idle. Sweeping keeps the
// cost off the request path, which only sets a flag (conn.idleFor).
func (s *Server) sweepIdle(stop <-chan struct{}) {
	defer s.wg.Done()
	ticks := s.sweepTicks
	if ticks == nil {
		t := time.NewTicker(max(s.maxIdle/10, time.Millisecond))
		defer t.Stop()
		ticks = t.C
	}
	var idle []*conn
	for {
		select {
		case <-s.quit:
			return
		case <-stop:
			return
		case now := <-ticks:
			s.mu.Lock()
			for c := range s.mu.conns {
				if c.idleFor(now) >= s.maxIdle {
					idle = append(idle, c)
				}
			}
			s.mu.Unlock()
			for i, c := range idle {
				c.fail(fmt.Errorf("%w: nothing read and no request in flight for %v", ErrConnectionIdle, s.maxIdle))
				idle[i] = nil
			}
			idle = idle[:0]
		}
	}
}

func (s *Server) untrackListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.listeners, ln)
	s.stopIdleSweepLocked()
}

// stopIdleSweepLocked stops the idle sweeper once the server has neither a
// listener nor a connection left, so a Serve that returned without Close
// leaves no goroutine behind; the next Serve starts it again.
func (s *Server) stopIdleSweepLocked() {
	if s.mu.stopSweep != nil && len(s.mu.listeners) == 0 && len(s.mu.conns) == 0 {
		close(s.mu.stopSweep)
		s.mu.stopSweep = nil
	}
}

// startConn registers nc and starts its goroutines, unless the server is closed.
// Goroutines are added to wg only under mu while not closed, so Close's Wait never
// races with an Add from zero.
func (s *Server) startConn(nc net.Conn) {
	if s.ConnectionThrottle != nil {
		if addr, ok := remoteAddr(nc.RemoteAddr()); ok {
			if d := s.ConnectionThrottle(addr); d > 0 {
				s.hold(nc, d)
				return
			}
		}
	}
	ip := remoteIP(nc.RemoteAddr())
	if !s.limiter.admit(ip) {
		s.refused.Add(1)
		// At most one warning a second: a flood of refusals must not flood the log.
		if now := time.Now().UnixNano(); now-s.refusedLogged.Load() >= int64(time.Second) {
			s.refusedLogged.Store(now)
			s.log.Warn("protocol: connection refused: too many connections", "remote", addrString(nc.RemoteAddr()),
				"max_connections", s.limiter.maxTotal, "max_connections_per_ip", s.limiter.maxPerIP, "refused_total", s.refused.Load())
		}
		_ = nc.Close()
		return
	}
	c := newConn(s, nc)
	c.ip = ip
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.limiter.leave(ip)
		_ = nc.Close()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(3)
	s.mu.Unlock()
	go c.runReader()
	go c.runHandler()
	go c.runWriter()
}

// hold keeps a throttled connection open, unread, for d, then closes it.
func (s *Server) hold(nc net.Conn, d time.Duration) {
	s.throttled.Add(1)
	if now := time.Now().UnixNano(); now-s.throttleLogged.Load() >= int64(time.Second) {
		s.throttleLogged.Store(now)
		s.log.Info("protocol: connection over its address's connection creation rate, closing it after the throttle",
			"remote", addrString(nc.RemoteAddr()), "throttle", d, "throttled_total", s.throttled.Load())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		_ = nc.Close()
		return
	}
	s.mu.held[nc] = time.AfterFunc(d, func() {
		s.mu.Lock()
		_, ok := s.mu.held[nc]
		delete(s.mu.held, nc)
		s.mu.Unlock()
		if ok {
			_ = nc.Close()
		}
	})
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.stopIdleSweepLocked()
	s.mu.Unlock()
	s.limiter.leave(c.ip)
}
