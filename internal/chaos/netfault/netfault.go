// Package netfault is a fault-injecting TCP network for tests: TCP proxies that
// nodes and clients talk through, and one Net that cuts the links between named
// endpoints so that traffic really stops.
//
// # Links and sources
//
// A proxy forwards to one destination endpoint (a node). A link is a (from, to)
// pair of endpoint names; a connection belongs to the link from whoever opened
// it to the proxy's destination. Many endpoints share a proxy, and each
// connection's source is told in one of two ways: by the address it comes from
// (Net.Link: endpoints that dial from addresses of their own, such as nodes
// each binding its outgoing connections to its own loopback address), or by
// the client id of its first Kafka request (Net.Kafka: a broker's advertised
// address, used by clients and by other brokers' follower fetchers, all from
// one address).
//
// A Kafka proxy can tell sources by address too (Net.KafkaByAddr): the
// client id is out of sight when the connections use TLS, so the nodes then
// make their own Kafka connections from addresses of their own, as they do
// their Link connections.
//
// Each proxy counts, by source, the connections it accepted and those that
// waited on a cut (Proxy.Sources, Proxy.Stalled), so a test can check which
// links a fault really cut.
//
// # What a cut does
//
// Isolate(node) cuts every link to and from node (optionally keeping some, such
// as the node's links with clients). CutKafka(a, b) cuts only the Kafka
// connections between two endpoints, both ways (a follower's fetches from its
// leader and back), leaving the connections of their Link proxies (Raft, the
// controller link) up. On a cut link nothing is forwarded in
// either direction: bytes already read by the proxy are held, the proxy stops
// reading, TCP windows fill and senders block, as when a switch drops every
// packet. A connection opened across a cut is accepted (the dial succeeds) but
// never reaches its destination until the cut heals. Heal restores every link;
// connections stalled by the cut then either resume, delivering what was held
// late (a short partition TCP survives), or are reset (a long one whose
// connections timed out), as the caller chooses. Down(node), beside
// Isolate(node), is a node that lost its power: its own ends of its connections
// are reset and its new connections refused, so that the dead process stops
// at once rather than after its I/O timeouts, while the other ends stay open and
// silent until the heal, as a powered-off host's peers see it. A connection whose
// destination cannot be dialled (the node is down) is reset at once, the
// nearest an accepted connection gets to "connection refused": clients see
// ECONNRESET, not an orderly end of stream they might take for a protocol
// mismatch; for the same reason a connection one end resets is reset at the
// other (a process killed with bytes unread resets its connections).
//
// # Concurrency
//
// Every method of Net and Proxy is safe for concurrent use. Each connection
// runs two copying goroutines; Proxy.Close stops them all and waits for them.
package netfault

import (
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"syscall"
	"time"
)

// Upstream returns the address a proxy forwards to; it is asked on every new
// connection, so a destination may start listening after its proxy.
type Upstream func() (string, error)

// Net holds which links are cut.
type Net struct {
	mu struct {
		sync.Mutex
		// isolated maps each isolated endpoint to the endpoints it still reaches.
		isolated map[string]map[string]bool
		// kafkaCuts holds the pairs of endpoints whose Kafka connections are
		// cut (CutKafka), in both orders.
		kafkaCuts map[[2]string]bool
		// changed is closed and replaced whenever the cut changes.
		changed chan struct{}
		// resets counts heals that closed stalled connections.
		resets uint64
		// down holds the endpoints that lost their power (Down).
		down map[string]bool
		// proxies are the proxies started on the Net, for Down.
		proxies []*Proxy
	}
}

// New returns a Net with every link up.
func New() *Net {
	n := &Net{}
	n.mu.isolated = map[string]map[string]bool{}
	n.mu.kafkaCuts = map[[2]string]bool{}
	n.mu.down = map[string]bool{}
	n.mu.changed = make(chan struct{})
	return n
}

// Down marks node as powered off until the next Heal: every connection end that
// is node's (the connections it opened, and the proxies' connections to it) is
// reset now, and connections it opens are reset at once; the ends of its peers
// stay open, and silent while the caller isolates node. The node's process
// then sees its I/O fail at once, as nobody will hear it again anyway.
func (n *Net) Down(node string) {
	n.mu.Lock()
	n.mu.down[node] = true
	proxies := n.mu.proxies
	n.changedLocked()
	n.mu.Unlock()
	for _, p := range proxies {
		p.resetEnds(node)
	}
}

// isDown reports whether node is down (Down, not yet healed).
func (n *Net) isDown(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.down[node]
}

// waitUp returns once node is no longer down, or done is closed.
func (n *Net) waitUp(node string, done <-chan struct{}) {
	n.mu.Lock()
	for n.mu.down[node] {
		changed := n.mu.changed
		n.mu.Unlock()
		select {
		case <-done:
			return
		case <-changed:
		}
		n.mu.Lock()
	}
	n.mu.Unlock()
}

// Isolate cuts every link to and from node, except those with the endpoints
// in keep (say, "client": the node is cut off from its peers but clients still
// reach it).
func (n *Net) Isolate(node string, keep ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	n.mu.isolated[node] = kept
	n.changedLocked()
}

// CutKafka cuts the Kafka connections from a to b and from b to a (those
// through b's and a's Kafka proxies whose source is the other), and nothing
// else: Link proxies' connections between them stay up.
func (n *Net) CutKafka(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.kafkaCuts[[2]string{a, b}] = true
	n.mu.kafkaCuts[[2]string{b, a}] = true
	n.changedLocked()
}

// Heal restores every link. With reset, connections stalled by the cut are
// closed; without, they resume.
func (n *Net) Heal(reset bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.mu.isolated)
	clear(n.mu.kafkaCuts)
	clear(n.mu.down)
	if reset {
		n.mu.resets++
	}
	n.changedLocked()
}

func (n *Net) changedLocked() {
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
}

// cutLocked reports whether the link from -> to is cut, for a connection of
// a Kafka proxy if kafka. An endpoint always reaches itself.
func (n *Net) cutLocked(from, to string, kafka bool) bool {
	if from == to {
		return false
	}
	if kafka && n.mu.kafkaCuts[[2]string{from, to}] {
		return true
	}
	for _, pair := range [][2]string{{from, to}, {to, from}} {
		if kept, ok := n.mu.isolated[pair[0]]; ok && !kept[pair[1]] {
			return true
		}
	}
	return false
}

// pass waits until the link from -> to is up (for a Kafka proxy's connection
// if kafka), calling stalled first if it is cut. It returns false if the
// connection must be closed instead: it stalled across a heal with reset, or
// done was closed.
func (n *Net) pass(from, to string, kafka bool, done <-chan struct{}, stalled func()) bool {
	n.mu.Lock()
	if !n.cutLocked(from, to, kafka) {
		n.mu.Unlock()
		return true
	}
	resets := n.mu.resets
	stalled()
	for {
		changed := n.mu.changed
		n.mu.Unlock()
		select {
		case <-done:
			return false
		case <-changed:
		}
		n.mu.Lock()
		if n.mu.resets != resets {
			n.mu.Unlock()
			return false
		}
		if !n.cutLocked(from, to, kafka) {
			n.mu.Unlock()
			return true
		}
	}
}

// Proxy forwards connections accepted on its address to an Upstream.
type Proxy struct {
	net      *Net
	ln       net.Listener
	to       string
	from     func(remote net.Addr) string // source by the connection's address, when who is nil
	who      func(clientID string) string // Kafka source from the first request's client id
	kafka    bool                         // a Kafka proxy: CutKafka applies
	upstream Upstream
	done     chan struct{}
	wg       sync.WaitGroup

	mu struct {
		sync.Mutex
		conns   map[net.Conn]string // each with the endpoint whose end it is ("" until known)
		sources map[string]int      // connections accepted, by source
		stalled map[string]int      // connections that waited on a cut, by source
		closed  bool
	}
}

// Link starts a proxy on listen (host:port; port 0 picks one) for connections
// to to: each comes from from(the address it was opened from).
func (n *Net) Link(listen, to string, from func(remote net.Addr) string, upstream Upstream) (*Proxy, error) {
	return n.start(listen, to, upstream, func(p *Proxy) { p.from = from })
}

// Kafka starts a proxy on listen for Kafka connections to to. Each
// connection's source is who(client id of its first request); a connection
// whose first bytes are not a Kafka request header comes from "".
func (n *Net) Kafka(listen, to string, who func(clientID string) string, upstream Upstream) (*Proxy, error) {
	return n.start(listen, to, upstream, func(p *Proxy) { p.who, p.kafka = who, true })
}

// KafkaByAddr starts a proxy on listen for Kafka connections to to whose
// bytes it does not read (TLS): each comes from from(the address it was
// opened from), as for Link, and CutKafka applies to it, as for Kafka.
func (n *Net) KafkaByAddr(listen, to string, from func(remote net.Addr) string, upstream Upstream) (*Proxy, error) {
	return n.start(listen, to, upstream, func(p *Proxy) { p.from, p.kafka = from, true })
}

func (n *Net) start(listen, to string, upstream Upstream, set func(*Proxy)) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{net: n, ln: ln, to: to, upstream: upstream, done: make(chan struct{})}
	p.mu.conns = map[net.Conn]string{}
	p.mu.sources = map[string]int{}
	p.mu.stalled = map[string]int{}
	set(p)
	n.mu.Lock()
	n.mu.proxies = append(n.mu.proxies, p)
	n.mu.Unlock()
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Sources counts the connections accepted so far by their source endpoint, so
// a test can check that connections are told apart as it expects.
func (p *Proxy) Sources() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.mu.sources)
}

// Stalled counts the connections that have waited on a cut link so far
// (each once, however often it waited), by their source endpoint.
func (p *Proxy) Stalled() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.mu.stalled)
}

// Close stops accepting, closes every connection and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	close(p.done)
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c, endpoint's end of a connection ("" until known), for
// Close and Down; false if the proxy is closed already or endpoint is down
// (the caller closes c, and untracks it if it was registered).
func (p *Proxy) track(c net.Conn, endpoint string) bool {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return false
	}
	p.mu.conns[c] = endpoint
	p.mu.Unlock()
	// Looked at after registering c, and not under p.mu (pass takes p.mu
	// under n.mu): a Down meanwhile either resets c or is seen here.
	return endpoint == "" || !p.net.isDown(endpoint)
}

// resetEnds resets the connection ends that are node's.
func (p *Proxy) resetEnds(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, endpoint := range p.mu.conns {
		if endpoint == node {
			abort(c)
		}
	}
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select { // a transient accept error (out of files): back off
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !p.track(c, "") {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// sniffTimeout bounds the wait for a Kafka connection's first request.
const sniffTimeout = 30 * time.Second

// dialTimeout bounds a dial to the destination.
const dialTimeout = 5 * time.Second

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	var from string
	var first []byte
	if p.who == nil {
		from = p.from(c.RemoteAddr())
	} else {
		c.SetReadDeadline(time.Now().Add(sniffTimeout))
		var clientID string
		var err error
		first, clientID, err = readFirstRequest(c)
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		from = p.who(clientID)
	}
	if !p.track(c, from) {
		abort(c) // opened by a node that is down
		return
	}
	p.mu.Lock()
	p.mu.sources[from]++
	p.mu.Unlock()
	var once sync.Once
	stalled := func() {
		once.Do(func() {
			p.mu.Lock()
			p.mu.stalled[from]++
			p.mu.Unlock()
		})
	}
	if !p.net.pass(from, p.to, p.kafka, p.done, stalled) {
		abort(c)
		return
	}
	addr, err := p.upstream()
	if err != nil {
		abort(c)
		return
	}
	up, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		abort(c) // the destination is down: as close to "connection refused" as an accepted connection gets
		return
	}
	defer p.untrack(up)
	if !p.track(up, p.to) {
		abort(up)
		abort(c)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	end := func(aborted bool) {
		defer wg.Done()
		// An end reset by Down: the other end (a peer's) stays open until
		// the node is up again, as a powered-off host's peers see nothing,
		// and is reset then.
		for _, node := range []string{from, p.to} {
			if p.net.isDown(node) {
				aborted = true
				p.net.waitUp(node, p.done)
			}
		}
		if aborted {
			// The client side first: closing up wakes the other pipe, which would
			// close c in order.
			abort(c)
			abort(up)
		} else {
			up.Close()
			c.Close()
		}
	}
	go func() { end(!p.pipe(up, c, from, first, stalled)) }()
	go func() { end(!p.pipe(c, up, from, nil, stalled)) }()
	wg.Wait()
}

// abort closes c with a reset, as a connection that timed out or was refused
// ends: a client reading from it sees ECONNRESET, not an orderly end of stream.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// pipe copies src to dst, first sending pre, holding bytes while the link is
// cut (calling stalled when it starts to). It returns false when the connection
// must be reset: it stalled across a heal with reset, src was reset, or the
// proxy closed.
func (p *Proxy) pipe(dst, src net.Conn, from string, pre []byte, stalled func()) bool {
	if len(pre) > 0 {
		if !p.net.pass(from, p.to, p.kafka, p.done, stalled) {
			return false
		}
		if _, err := dst.Write(pre); err != nil {
			return true
		}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.net.pass(from, p.to, p.kafka, p.done, stalled) {
				return false
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return true
			}
		}
		if err != nil {
			// A reset (the destination's process died with bytes unread) is
			// passed on as a reset: turned into an orderly end of stream, a
			// client would take it for a protocol or TLS mismatch.
			return !errors.Is(err, syscall.ECONNRESET)
		}
	}
}

// maxFirstRequest bounds the first Kafka request a proxy reads whole to find
// its client id (ApiVersions or Metadata: tiny).
const maxFirstRequest = 1 << 20

// readFirstRequest reads one size-prefixed Kafka request from r and returns
// its bytes, size included, and the client id of its header (request header
// v1/v2: api key, api version, correlation id, nullable client id). A request
// too short to hold a header has client id "".
func readFirstRequest(r io.Reader) ([]byte, string, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, "", err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFirstRequest {
		return nil, "", errors.New("netfault: first request too large")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, "", err
	}
	const idAt = 4 + 2 + 2 + 4 // size, key, version, correlation id
	if len(frame) < idAt+2 {
		return frame, "", nil
	}
	l := int16(binary.BigEndian.Uint16(frame[idAt:]))
	if l < 0 || len(frame) < idAt+2+int(l) {
		return frame, "", nil
	}
	return frame, string(frame[idAt+2 : idAt+2+int(l)]), nil
}
