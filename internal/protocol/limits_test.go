package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

func TestMemoryPool(t *testing.T) {
	never := make(chan struct{})
	p := newMemoryPool(10)
	if n, ok := p.acquire(6, never, never); !ok || n != 6 {
		t.Fatalf("acquire(6) = %d, %t", n, ok)
	}
	// 5 does not fit: it waits, and a later 1 that would fit waits behind it.
	got5, got1 := make(chan int64, 1), make(chan int64, 1)
	go func() { n, _ := p.acquire(5, never, never); got5 <- n }()
	wait.For(t, "the 5-byte waiter to queue", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.mu.waiters) == 1
	})
	go func() { n, _ := p.acquire(1, never, never); got1 <- n }()
	wait.For(t, "the 1-byte waiter to queue behind it", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.mu.waiters) == 2
	})
	p.release(6)
	if n := <-got5; n != 5 {
		t.Fatalf("granted %d, want 5", n)
	}
	if n := <-got1; n != 1 {
		t.Fatalf("granted %d, want 1", n)
	}
	if used := p.inUse(); used != 6 {
		t.Fatalf("in use %d, want 6", used)
	}
	// A reservation larger than the pool is cut to its size.
	p.release(6)
	if n, ok := p.acquire(100, never, never); !ok || n != 10 {
		t.Fatalf("acquire(100) = %d, %t, want 10", n, ok)
	}
	// A waiter that gives up leaves the queue and reserves nothing.
	stop := make(chan struct{})
	gaveUp := make(chan bool, 1)
	go func() { _, ok := p.acquire(3, never, stop); gaveUp <- ok }()
	wait.For(t, "the waiter to queue", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.mu.waiters) == 1
	})
	close(stop)
	if ok := <-gaveUp; ok {
		t.Fatal("acquire succeeded after stop")
	}
	p.release(10)
	if used := p.inUse(); used != 0 || len(p.mu.waiters) != 0 {
		t.Fatalf("in use %d with %d waiters, want 0 and 0", used, len(p.mu.waiters))
	}
	// An unbounded pool never waits and reserves nothing.
	if n, ok := newMemoryPool(-1).acquire(1<<40, never, never); !ok || n != 0 {
		t.Fatalf("unbounded acquire = %d, %t", n, ok)
	}
}

// countingListener counts every byte the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: nc, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestQueuedRequestBytesBoundAcrossConnections is the denial of service:
// many connections each announce a large frame and trickle its bytes in. The
// broker must grow by the memory pool, not by the bytes all of them sent; once
// they go away, the pool is free again for honest clients.
func TestQueuedRequestBytesBoundAcrossConnections(t *testing.T) {
	const (
		conns     = 40
		frameSize = 4 << 20 // announced; never completed
		sent      = 1 << 20 // what each connection trickles in
		pool      = 4 << 20
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	ts := serveOn(t, countingListener{Listener: ln, read: &read}, HandlerFunc(echoHandler), func(s *Server) {
		s.MaxRequestBytes = frameSize
		s.MaxQueuedRequestBytes = pool
	})
	var wg sync.WaitGroup
	var attackers []net.Conn
	for range conns {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		attackers = append(attackers, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prefix [4]byte
			binary.BigEndian.PutUint32(prefix[:], frameSize)
			if _, err := nc.Write(prefix[:]); err != nil {
				return
			}
			chunk := make([]byte, 64<<10)
			for left := sent; left > 0; left -= len(chunk) {
				if _, err := nc.Write(chunk); err != nil {
					return // closed by the test: the server pushed back
				}
			}
		}()
	}
	// One connection holds the whole pool and is read in full; the others wait
	// for room without being read beyond what the first buffered read took.
	wait.For(t, "the first frame to take the pool", func() bool { return ts.Stats().QueuedRequestBytes == pool })
	wait.For(t, "one connection's bytes to be read", func() bool { return read.Load() >= sent })
	bound := int64(sent + conns*(4+readBufferSize))
	window := time.NewTimer(100 * time.Millisecond) // room for an unbounded read-ahead to show
	for done := false; !done; {
		select {
		case <-window.C:
			done = true
		default:
			time.Sleep(5 * time.Millisecond)
		}
		if got := read.Load(); got > bound {
			t.Fatalf("the server read %d bytes from %d connections, want at most %d", got, conns, bound)
		}
		if got := ts.Stats().QueuedRequestBytes; got > pool {
			t.Fatalf("queued request bytes %d > pool %d", got, pool)
		}
	}
	for _, nc := range attackers {
		nc.Close()
	}
	wg.Wait()
	wait.For(t, "the pool to drain", func() bool {
		st := ts.Stats()
		return st.QueuedRequestBytes == 0 && st.OpenConnections == 0
	})
	c := dial(t, ts.addr)
	resp := c.roundTrip(metadataRequest("after"), 12, 1).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("metadata after the attack: %+v", resp.Topics)
	}
}

// dialFrom dials addr from the local IP address ip (any of 127.0.0.0/8).
func dialFrom(t *testing.T, addr, ip string) *rawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func TestConnectionLimits(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.MaxConnections = 3
		s.MaxConnectionsPerIP = 2
	})
	from := func(ip string) *rawClient { return dialFrom(t, ts.addr, ip) }
	serving := func(c *rawClient) {
		t.Helper()
		resp := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 1).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
		}
	}
	a1, a2 := from("127.0.0.1"), from("127.0.0.1")
	serving(a1)
	serving(a2)
	// A third connection from the same IP is over the per-IP limit.
	from("127.0.0.1").expectClosed()
	b1 := from("127.0.0.2")
	serving(b1)
	// A fourth connection from anywhere is over the total limit.
	from("127.0.0.3").expectClosed()
	if st := ts.Stats(); st.RefusedConnections != 2 || st.OpenConnections != 3 {
		t.Fatalf("stats %+v, want 2 refused and 3 open", st)
	}
	// Closing one makes room again.
	a1.nc.Close()
	wait.For(t, "the closed connection to be uncounted", func() bool { return ts.Stats().OpenConnections == 2 })
	serving(from("127.0.0.1"))
	serving(a2)
}

// TestThrottleMutesTheConnection: after a response with Response.Throttle the
// connection reads nothing for that long (KIP-219), then serves on; a None
// response (Produce with acks=0), with no throttle_time_ms to carry, mutes it
// just the same.
func TestThrottleMutesTheConnection(t *testing.T) {
	const throttle = 300 * time.Millisecond
	for _, first := range []struct {
		name    string
		req     kmsg.Request
		version int16
	}{
		{"answered", metadataRequest("a"), 12},
		{"acks=0", produceRequest(0), 9},
	} {
		t.Run(first.name, func(t *testing.T) {
			var mu sync.Mutex
			var handled []time.Time
			ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
				mu.Lock()
				handled = append(handled, time.Now())
				mu.Unlock()
				resp := echoHandler(ctx, c, r)
				if r.CorrelationID == 1 {
					resp.Throttle = throttle
				}
				return resp
			}))
			c := dial(t, ts.addr)
			c.write(append(frameOf(first.req, first.version, 1, nil), frameOf(metadataRequest("b"), 12, 2, nil)...))
			if _, ok := first.req.(*kmsg.MetadataRequest); ok {
				c.read(first.req, first.version, 1)
			}
			c.read(metadataRequest("b"), 12, 2)
			mu.Lock()
			defer mu.Unlock()
			if gap := handled[1].Sub(handled[0]); gap < throttle {
				t.Fatalf("second request handled %v after the throttled one, want at least %v", gap, throttle)
			}
		})
	}
}

// TestConnectionThrottleHoldsThenCloses: a connection ConnectionThrottle
// refuses (an address over its connection_creation_rate, KIP-612) is never
// served nor counted; it is held open for the throttle, then closed, while
// other addresses are served; Close closes a held connection at once.
func TestConnectionThrottleHoldsThenCloses(t *testing.T) {
	const throttle = 400 * time.Millisecond
	limited := netip.MustParseAddr("127.0.0.2")
	var asked atomic.Int64
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.ConnectionThrottle = func(ip netip.Addr) time.Duration {
			asked.Add(1)
			if ip == limited {
				return throttle
			}
			return 0
		}
	})
	from := func(ip string) *rawClient { return dialFrom(t, ts.addr, ip) }
	start := time.Now()
	held := from("127.0.0.2")
	held.send(kmsg.NewPtrApiVersionsRequest(), 0, 1)
	free := from("127.0.0.1")
	if resp := free.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions from an address within its rate: error %d", resp.ErrorCode)
	}
	if st := ts.Stats(); st.ThrottledConnections != 1 || st.OpenConnections != 1 {
		t.Fatalf("stats %+v, want 1 throttled and 1 open", st)
	}
	n, err := io.Copy(io.Discard, held.br)
	if n != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) { // a close with the request unread resets
		t.Fatalf("throttled connection: read %d bytes, %v; want a close without an answer", n, err)
	}
	if open := time.Since(start); open < throttle {
		t.Fatalf("throttled connection closed after %v, want it held for at least %v", open, throttle)
	}
	wait.For(t, "the held connection to be forgotten", func() bool { return ts.Stats().HeldConnections == 0 })
	if asked.Load() != 2 {
		t.Fatalf("ConnectionThrottle asked %d times, want once per connection (2)", asked.Load())
	}

	// A connection held for an hour is closed by Close, not left behind.
	long := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.ConnectionThrottle = func(netip.Addr) time.Duration { return time.Hour }
	})
	c := dial(t, long.addr)
	wait.For(t, "the connection to be held", func() bool { return long.Stats().HeldConnections == 1 })
	if err := long.Close(); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if st := long.Stats(); st.HeldConnections != 0 {
		t.Fatalf("after Close: %+v", st)
	}
}

// TestAcceptThrottleDelaysServing: with AcceptThrottle asking for a wait (a
// broker-wide connection creation rate over its limit), the accepted
// connection is served, but no sooner than the wait.
func TestAcceptThrottleDelaysServing(t *testing.T) {
	const wait = 400 * time.Millisecond
	var accepted atomic.Int64
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.AcceptThrottle = func() time.Duration {
			if accepted.Add(1) == 2 {
				return wait
			}
			return 0
		}
	})
	checkServing(t, ts.addr)
	start := time.Now()
	checkServing(t, ts.addr)
	if took := time.Since(start); took < wait {
		t.Fatalf("the connection over the rate was served after %v, want at least %v", took, wait)
	}
	checkServing(t, ts.addr)
	if accepted.Load() != 3 {
		t.Fatalf("AcceptThrottle asked %d times, want 3", accepted.Load())
	}
}

// TestStalledBodiesReleaseThePool is the review's stall: connections that
// announce the largest frame and never send its body hold the whole memory
// pool. A well-behaved client's request must still be answered once their
// bodies are late, and the stalled connections closed.
func TestStalledBodiesReleaseThePool(t *testing.T) {
	const frameSize = 1 << 20
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.MaxRequestBytes = frameSize
		s.MaxQueuedRequestBytes = 2 * frameSize
		s.BodyTimeout = 200 * time.Millisecond
	})
	var stalled []*rawClient
	for range 3 {
		c := dial(t, ts.addr)
		var prefix [4]byte
		binary.BigEndian.PutUint32(prefix[:], frameSize)
		c.write(prefix[:])
		stalled = append(stalled, c)
	}
	wait.For(t, "the stalled frames to take the pool", func() bool {
		return ts.Stats().QueuedRequestBytes == 2*frameSize
	})
	c := dial(t, ts.addr)
	if err := c.nc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	c.send(kmsg.NewPtrApiVersionsRequest(), 3, 1)
	if _, err := c.br.Peek(4); err != nil {
		t.Fatalf("a well-behaved request behind stalled bodies was not answered: %v", err)
	}
	c.read(kmsg.NewPtrApiVersionsRequest(), 3, 1)
	for _, s := range stalled {
		s.expectClosed()
		if err := ts.hooks.closeErr(t, s.addr()); !errors.Is(err, ErrBodyTimeout) {
			t.Errorf("stalled connection closed with %v, want ErrBodyTimeout", err)
		}
	}
}

// TestConnectionsMaxIdle: a connection with nothing read and no request in
// flight for ConnectionsMaxIdle is closed (connections.max.idle.ms); one that
// keeps sending requests is not, nor one whose long-polling request waits
// longer than that, and its idle time starts only once that request is answered.
func TestConnectionsMaxIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) { s.ConnectionsMaxIdle = idle })

	t.Run("idle", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.roundTrip(metadataRequest("a"), 12, 1)
		start := time.Now()
		if err := c.nc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
		if waited := time.Since(start); waited < idle {
			t.Errorf("closed after %v idle, want at least %v", waited, idle)
		}
		if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrConnectionIdle) {
			t.Errorf("closed with %v, want ErrConnectionIdle", err)
		}
	})
	t.Run("never a request", func(t *testing.T) {
		c := dial(t, ts.addr)
		if err := c.nc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
	})
	t.Run("busy", func(t *testing.T) {
		c := dial(t, ts.addr)
		tick := time.NewTicker(idle / 4)
		defer tick.Stop()
		for i := range int32(16) { // four times the idle timeout
			<-tick.C
			c.roundTrip(metadataRequest("a"), 12, i)
		}
	})
	t.Run("long poll", testIdleLongPoll)
}

// testIdleLongPoll: a request in flight keeps its connection open however long
// it waits, and the idle time starts once it is answered. The test drives the
// idle sweeper with times of its own (Server.sweepTicks).
func testIdleLongPoll(t *testing.T) {
	const idle = 200 * time.Millisecond
	ticks := make(chan time.Time)
	arrived, release := make(chan struct{}), make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if m, ok := r.Msg.(*kmsg.MetadataRequest); ok && len(m.Topics) == 1 && *m.Topics[0].Topic == "long-poll" {
			close(arrived)
			return Response{Wait: func(ctx context.Context) Response {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return echoHandler(ctx, c, r)
			}}
		}
		return echoHandler(ctx, c, r)
	}), func(s *Server) { s.ConnectionsMaxIdle, s.sweepTicks = idle, ticks })
	// sweep runs a sweep at at and returns once it is done: the sweeper takes
	// the second value only after the first sweep (a second one at the same
	// time finds nothing idle that the first did not).
	sweep := func(at time.Time) {
		for range 2 {
			select {
			case ticks <- at:
			case <-time.After(testTimeout):
				t.Fatal("the idle sweeper is not running")
			}
		}
	}

	c := dial(t, ts.addr)
	c.send(metadataRequest("long-poll"), 12, 1)
	select {
	case <-arrived:
	case <-time.After(testTimeout):
		t.Fatal("the long poll never reached the handler")
	}
	now := time.Now()
	sweep(now)               // takes the read as activity
	sweep(now.Add(4 * idle)) // nothing read since, but the request is in flight
	close(release)
	c.read(metadataRequest("long-poll"), 12, 1)
	sweep(now.Add(5 * idle)) // idle since the last sweep, but the answer counts
	c.roundTrip(metadataRequest("a"), 12, 2)
	sweep(now.Add(6 * idle))
	sweep(now.Add(7 * idle)) // nothing since the last sweep: idle for ConnectionsMaxIdle
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrConnectionIdle) {
		t.Errorf("closed with %v, want ErrConnectionIdle", err)
	}
}

// TestSlowBodiesWithinBodyTimeout: bodies that arrive in pieces within
// BodyTimeout are read, one frame after another, and a later one that stalls
// still closes the connection.
func TestSlowBodiesWithinBodyTimeout(t *testing.T) {
	const timeout = time.Second
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) { s.BodyTimeout = timeout })
	topics := make([]string, 2000)
	for i := range topics {
		topics[i] = fmt.Sprintf("topic-with-a-long-name-%05d", i)
	}
	frame := frameOf(metadataRequest(topics...), 12, 0, nil)
	if len(frame) <= 2*readBufferSize {
		t.Fatalf("a %d-byte frame fits the read buffer", len(frame))
	}
	c := dial(t, ts.addr)
	for i := range int32(2) {
		binary.BigEndian.PutUint32(frame[8:], uint32(i)) // the correlation id
		c.write(frame[:len(frame)/2])
		time.Sleep(timeout / 3) // a pause well within the timeout
		c.write(frame[len(frame)/2:])
		if resp := c.read(metadataRequest(), 12, i).(*kmsg.MetadataResponse); len(resp.Topics) != len(topics) {
			t.Fatalf("frame %d answered with %d topics", i, len(resp.Topics))
		}
	}
	c.write(frame[:len(frame)/2])
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrBodyTimeout) {
		t.Errorf("closed with %v, want ErrBodyTimeout", err)
	}
}

// TestRequestThrottleChargesAPILayerRequests: Kafka's API layer serves
// ApiVersions, and SaslHandshake and SaslAuthenticate outside an
// authentication, and charges them to the request quota as any client
// request (KafkaApis' sendResponseMaybeThrottle); its authenticator serves an
// authentication's and a re-authentication's requests, uncharged.
func TestRequestThrottleChargesAPILayerRequests(t *testing.T) {
	// charge is one call of RequestThrottle, which throttle(d) records, answering d.
	type charge struct {
		key       int16
		principal string
		at        time.Time
	}
	var mu sync.Mutex
	var charges []charge
	throttle := func(d time.Duration) func(*Server) {
		return func(s *Server) {
			s.RequestThrottle = func(c *ConnInfo, r *Request, busy time.Duration) time.Duration {
				mu.Lock()
				defer mu.Unlock()
				charges = append(charges, charge{r.Key, c.Principal(), time.Now()})
				return d
			}
		}
	}
	charged := func() []charge {
		mu.Lock()
		defer mu.Unlock()
		defer func() { charges = nil }()
		return charges
	}

	t.Run("without SASL", func(t *testing.T) {
		const d = 300 * time.Millisecond
		var handled atomic.Int64
		ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
			handled.Store(time.Now().UnixNano())
			return echoHandler(ctx, c, r)
		}), throttle(d))
		c := dial(t, ts.addr)
		c.write(append(frameOf(apiVersionsV3(), 3, 1, nil), frameOf(metadataRequest("b"), 12, 2, nil)...))
		if resp := c.read(apiVersionsV3(), 3, 1).(*kmsg.ApiVersionsResponse); resp.ThrottleMillis != int32(d.Milliseconds()) {
			t.Fatalf("ApiVersions throttle_time_ms %d, want %d", resp.ThrottleMillis, d.Milliseconds())
		}
		c.read(metadataRequest("b"), 12, 2)
		got := charged()
		if len(got) != 1 || got[0].key != apiVersionsKey {
			t.Fatalf("charged %+v, want the ApiVersions", got)
		}
		if gap := time.Unix(0, handled.Load()).Sub(got[0].at); gap < d {
			t.Fatalf("the next request was handled %v after the throttled ApiVersions, want at least %v", gap, d)
		}
		// On a listener without SASL the API layer refuses the SASL keys.
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		c.roundTrip(hs, 1, 3)
		c.roundTrip(kmsg.NewPtrSASLAuthenticateRequest(), 1, 4)
		if got := charged(); len(got) != 2 || got[0].key != saslHandshakeKey || got[1].key != saslAuthenticateKey {
			t.Fatalf("charged %+v, want SaslHandshake and SaslAuthenticate", got)
		}
	})
	t.Run("SASL", func(t *testing.T) {
		ts, _ := startSASLServer(t, time.Hour, throttle(0))
		c := dial(t, ts.addr)
		c.roundTrip(apiVersionsV3(), 3, 1)
		_, corr := c.saslLogin(alicePlain, 2)
		if got := charged(); len(got) != 0 {
			t.Fatalf("the authentication's requests were charged: %+v", got)
		}
		c.roundTrip(apiVersionsV3(), 3, corr)
		auth := kmsg.NewPtrSASLAuthenticateRequest() // ILLEGAL_SASL_STATE from the API layer
		c.roundTrip(auth, 1, corr+1)
		_, corr = c.saslLogin(alicePlain, corr+2) // a re-authentication
		hs := kmsg.NewPtrSASLHandshakeRequest()   // too soon for another: the API layer refuses it
		hs.Mechanism = "PLAIN"
		c.roundTrip(hs, 1, corr)
		got := charged()
		var keys []int16
		for _, ch := range got {
			if ch.principal != "User:alice" {
				t.Errorf("key %d charged to %q, want User:alice", ch.key, ch.principal)
			}
			keys = append(keys, ch.key)
		}
		if want := []int16{apiVersionsKey, saslAuthenticateKey, saslHandshakeKey}; !slices.Equal(keys, want) {
			t.Fatalf("charged keys %v, want %v", keys, want)
		}
	})
}
