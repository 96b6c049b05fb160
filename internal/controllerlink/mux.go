// Package controllerlink carries broker-to-controller requests (broker registration
// and heartbeats, ISR changes, producer-id blocks, forwarded admin requests) to the
// active controller over the Kafka protocol, as KRaft brokers do.
//
// It is a node's one path to the active controller (Transport): Client sends a
// request over the network, Local serves it in process while this node's
// controller is the active one and hands it to a Client otherwise. Callers build
// the same Kafka request either way and never ask which controller is active.
//
// The controller listener (--controller-addr) serves both the Raft transport and
// these requests. A link connection opens with one marker byte (0xFF: neither a
// Raft RPC type, which is small, nor the first byte of a Kafka frame size, which
// would be negative), then speaks ordinary Kafka framing:
//
//	+------+------------------------------+----------------------------
//	| 0xFF | int32 size | request header  | body ...   (Kafka framing)
//	+------+------------------------------+----------------------------
//
// A first byte of 0xFE opens a Raft connection named for one voter (voter.go),
// which the mux hands on only if it names this node's own voter key. A Kafka
// client's connection (`--bootstrap-controller`, KIP-919) opens with a frame
// size below 8 MiB: a zero byte, then one below 0x80. A Raft connection opens
// with its RPC type (0-4) and then a msgpack map or array header (0x80 and
// above), so the first two bytes tell them apart; the mux hands a client's
// connection, bytes intact, to the client listener (Clients). Any other
// connection is a Raft connection and is handed, bytes intact, to the Raft
// transport's stream layer.
//
// With TLS on, the listener given to NewMux is a TLS listener and both dialers
// (Client.DialTLS, the dialTLS of Mux.Raft) use TLS: the marker byte and the Raft
// RPCs travel inside it.
package controllerlink

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Marker opens every link connection.
const Marker byte = 0xFF

// Mux splits one listener into the Raft stream layer, the link listener and
// the client listener.
type Mux struct {
	ln      net.Listener
	raft    *chanListener
	link    *chanListener
	clients *chanListener
	done    chan struct{}
	once    sync.Once
	// self is this node's voter key; refused is told of each named Raft
	// connection that names another key (want), from remote.
	self    VoterKey
	refused func(want VoterKey, remote net.Addr)
}

// NewMux starts splitting ln's connections for the node whose voter key is
// self. refused, when set, is called for each Raft connection refused because
// it names another voter key; it must not block.
func NewMux(ln net.Listener, self VoterKey, refused func(want VoterKey, remote net.Addr)) *Mux {
	m := &Mux{ln: ln, raft: newChanListener(ln.Addr()), link: newChanListener(ln.Addr()), clients: newChanListener(ln.Addr()),
		done: make(chan struct{}), self: self, refused: refused}
	go m.run()
	return m
}

// Raft is the stream layer for raft.NewNetworkTransport; advertise is the address
// the other voters know this node by. local, when set, is the local address
// connections to the other members are made from. dialTLS, when set, gives the
// TLS configuration for dialling a voter (the listener given to NewMux is then
// a TLS listener too).
func (m *Mux) Raft(advertise, local net.Addr, dialTLS func(addr string) *tls.Config) raft.StreamLayer {
	return raftStream{chanListener: m.raft, advertise: advertise, local: local, dialTLS: dialTLS}
}

// Link is the listener for the link's protocol server.
func (m *Mux) Link() net.Listener { return m.link }

// Clients is the listener for Kafka clients that reach the controllers
// directly (KIP-919's `--bootstrap-controller`).
func (m *Mux) Clients() net.Listener { return m.clients }

// Close stops accepting; connections already handed out are their owners'.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.raft.close()
		m.link.close()
		m.clients.close()
	})
	return err
}

func (m *Mux) run() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.Close()
			return
		}
		go m.route(c)
	}
}

// route reads the first bytes (with a deadline, so a silent client cannot hold
// a goroutine) and hands the connection to Raft, the link or the clients.
func (m *Mux) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	switch first[0] {
	case Marker:
		c.SetReadDeadline(time.Time{})
		br.Discard(1)
		m.link.deliver(pc)
		return
	case VoterMarker:
		named, err := br.Peek(1 + voterNameLen)
		if err != nil {
			c.Close()
			return
		}
		if want := readVoterName(named[1:]); want != m.self {
			c.Close()
			if m.refused != nil {
				m.refused(want, c.RemoteAddr())
			}
			return
		}
		br.Discard(1 + voterNameLen)
	case 0:
		if second, err := br.Peek(2); err == nil && isKafkaFrame(second) {
			c.SetReadDeadline(time.Time{})
			m.clients.deliver(pc)
			return
		}
	}
	c.SetReadDeadline(time.Time{})
	m.raft.deliver(pc)
}

// isKafkaFrame tells a Kafka request's first two bytes (the high bytes of a
// frame size below 8 MiB) from a Raft connection's (an RPC type, then a
// msgpack map or array header, 0x80 or above).
func isKafkaFrame(b []byte) bool { return b[0] == 0 && b[1] < 0x80 }

// peekedConn replays bytes read ahead while routing.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by the Mux.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *chanListener) Close() error { l.close(); return nil }

func (l *chanListener) Addr() net.Addr { return l.addr }

// raftStream adapts the Raft side to raft.StreamLayer.
type raftStream struct {
	*chanListener
	advertise net.Addr
	local     net.Addr
	dialTLS   func(addr string) *tls.Config
}

func (s raftStream) Addr() net.Addr { return s.advertise }

// Dial connects to address, a plain address or one VoterAddr made: that
// connection opens with the voter's name.
func (s raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, k, named, err := splitVoterAddr(string(address))
	if err != nil {
		return nil, err
	}
	c, err := dial(context.Background(), addr, timeout, s.local, s.dialTLS)
	if err != nil || !named {
		return c, err
	}
	if err := writeVoterName(c, k); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dial connects to addr within timeout, from local when it is set, over TLS
// when dialTLS is set (the handshake included in the timeout).
func dial(ctx context.Context, addr string, timeout time.Duration, local net.Addr, dialTLS func(addr string) *tls.Config) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{LocalAddr: local}
	if dialTLS == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	td := tls.Dialer{NetDialer: &d, Config: dialTLS(addr)}
	return td.DialContext(ctx, "tcp", addr)
}

// errNoController: no active controller is known yet.
var errNoController = errors.New("controllerlink: no active controller known")

var errClosed = errors.New("controllerlink: client closed")
