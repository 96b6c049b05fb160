package netfault

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is an upstream that echoes every byte and counts connections and bytes.
type echo struct {
	ln       net.Listener
	accepted atomic.Int64
	received atomic.Int64
	ended    atomic.Int64 // connections that ended (closed or reset by the other side)
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			go func() {
				defer e.ended.Add(1)
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						c.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return e
}

func (e *echo) upstream() (string, error) { return e.ln.Addr().String(), nil }

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads the echo within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	return expect(c, msg, timeout)
}

func expect(c net.Conn, msg string, timeout time.Duration) error {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return errors.New("echo " + string(got) + ", want " + msg)
	}
	return nil
}

// silent requires that nothing arrives on c for a while: a cut link must hold
// every byte. (Absence can only be shown over a window; this is a read
// deadline, not a sleep.)
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	n, err := c.Read(make([]byte, 16))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("across a cut link: read %d bytes, %v; want a timeout", n, err)
	}
}

// fixed is a Link source for a proxy every connection to which comes from one
// endpoint.
func fixed(from string) func(net.Addr) string { return func(net.Addr) string { return from } }

func startLink(t *testing.T, n *Net, from, to string, e *echo) *Proxy {
	t.Helper()
	p, err := n.Link("127.0.0.1:0", to, fixed(from), e.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestForwardsBothWays(t *testing.T) {
	e := startEcho(t)
	p := startLink(t, New(), "a", "b", e)
	c := dial(t, p)
	for _, msg := range []string{"hello", "again"} {
		if err := roundTrip(c, msg, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIsolateHoldsTrafficAndHealResumesIt(t *testing.T) {
	e := startEcho(t)
	n := New()
	p := startLink(t, n, "a", "b", e)
	c := dial(t, p)
	if err := roundTrip(c, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, isolated := range []string{"a", "b"} { // either end cuts the link
		n.Isolate(isolated)
		before := e.received.Load()
		if _, err := c.Write([]byte("during")); err != nil {
			t.Fatal(err)
		}
		silent(t, c)
		if got := e.received.Load(); got != before {
			t.Fatalf("isolating %s: the destination received %d bytes across the cut", isolated, got-before)
		}
		n.Heal(false)
		if err := expect(c, "during", 5*time.Second); err != nil {
			t.Fatalf("after healing %s: %v", isolated, err)
		}
	}
}

func TestHealWithResetClosesStalledConnections(t *testing.T) {
	e := startEcho(t)
	n := New()
	p := startLink(t, n, "a", "b", e)
	stalled, idle := dial(t, p), dial(t, p)
	for _, c := range []net.Conn{stalled, idle} {
		if err := roundTrip(c, "x", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	n.Isolate("b")
	stalled.Write([]byte("lost"))
	silent(t, stalled)
	n.Heal(true)
	stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := stalled.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection stalled by the cut: read %d bytes, %v; want it reset", n, err)
	}
	// A connection that sent nothing during the cut never stalled: it lives on.
	if err := roundTrip(idle, "y", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(dial(t, p), "new", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionOpenedAcrossACutWaits(t *testing.T) {
	e := startEcho(t)
	n := New()
	p := startLink(t, n, "a", "b", e)
	n.Isolate("a")
	c := dial(t, p)
	c.Write([]byte("early"))
	silent(t, c)
	if got := e.accepted.Load(); got != 0 {
		t.Fatalf("the destination accepted %d connections across the cut", got)
	}
	n.Heal(false)
	if err := expect(c, "early", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestIsolatingAnotherNodeLeavesTheLinkUp(t *testing.T) {
	e := startEcho(t)
	n := New()
	p := startLink(t, n, "a", "b", e)
	n.Isolate("c")
	if err := roundTrip(dial(t, p), "through", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// kafkaRequest frames a request header with the given client id (null if nil)
// and a body.
func kafkaRequest(clientID *string, body string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 18) // ApiVersions
	b = binary.BigEndian.AppendUint16(b, 3)
	b = binary.BigEndian.AppendUint32(b, 1)
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func TestReadFirstRequest(t *testing.T) {
	id := "strata-replica-2"
	empty := ""
	for _, tc := range []struct {
		name string
		in   []byte
		want string
		err  bool
	}{
		{"client id", kafkaRequest(&id, "body"), id, false},
		{"empty client id", kafkaRequest(&empty, ""), "", false},
		{"null client id", kafkaRequest(nil, "x"), "", false},
		{"header cut short", []byte{0, 0, 0, 3, 0, 18, 0}, "", false},
		{"client id longer than the frame", []byte{0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 1, 0, 50}, "", false},
		{"frame too large", []byte{0x7f, 0, 0, 0}, "", true},
		{"truncated", []byte{0, 0, 0, 9, 1}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame, got, err := readFirstRequest(bytes.NewReader(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if got != tc.want || !bytes.Equal(frame, tc.in) {
				t.Fatalf("got %q and %d bytes, want %q and %d bytes", got, len(frame), tc.want, len(tc.in))
			}
		})
	}
}

// TestKafkaProxyTellsSourcesApart: a broker's Kafka proxy serves clients and
// other brokers' fetchers; isolating one broker cuts its fetcher's connection
// and leaves the client's.
func TestKafkaProxyTellsSourcesApart(t *testing.T) {
	e := startEcho(t)
	n := New()
	who := func(clientID string) string {
		if clientID == "strata-replica-2" {
			return "2"
		}
		return "client"
	}
	p, err := n.Kafka("127.0.0.1:0", "1", who, e.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	replicaID, appID := "strata-replica-2", "app"
	replica, app := dial(t, p), dial(t, p)
	for c, id := range map[net.Conn]*string{replica: &replicaID, app: &appID} {
		req := kafkaRequest(id, "")
		if err := roundTrip(c, string(req), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	n.Isolate("2")
	replica.Write([]byte("fetch"))
	silent(t, replica)
	if err := roundTrip(app, "produce", 5*time.Second); err != nil {
		t.Fatalf("a client of an unisolated broker: %v", err)
	}
	n.Heal(false)
	if err := expect(replica, "fetch", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := p.Sources(); got["2"] != 1 || got["client"] != 1 || len(got) != 2 {
		t.Fatalf("sources %v, want one connection each from 2 and client", got)
	}
}

// TestCutKafkaCutsOnlyDataLinks: CutKafka(2, 1) stalls node 2's fetches from
// node 1 (through 1's Kafka proxy) and node 1's from node 2, and nothing else:
// a client of node 1, node 3's fetches from node 1 and node 2's Raft link to
// node 1 (a Link proxy) all flow. Heal resumes the held fetch.
func TestCutKafkaCutsOnlyDataLinks(t *testing.T) {
	e := startEcho(t)
	n := New()
	who := func(clientID string) string {
		if id, ok := strings.CutPrefix(clientID, "strata-replica-"); ok {
			return id
		}
		return "client"
	}
	kafka := func(to string) *Proxy {
		p, err := n.Kafka("127.0.0.1:0", to, who, e.upstream)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	k1, k2 := kafka("1"), kafka("2")
	open := func(p *Proxy, clientID string) net.Conn {
		c := dial(t, p)
		if err := roundTrip(c, string(kafkaRequest(&clientID, "")), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return c
	}
	fetch21, fetch12 := open(k1, "strata-replica-2"), open(k2, "strata-replica-1")
	fetch31, app := open(k1, "strata-replica-3"), open(k1, "app")
	raft21 := dial(t, startLink(t, n, "2", "1", e))

	n.CutKafka("2", "1")
	for _, c := range []net.Conn{fetch21, fetch12} {
		c.Write([]byte("fetch"))
		silent(t, c)
	}
	for name, c := range map[string]net.Conn{"node 3's fetch": fetch31, "a client": app, "node 2's Raft link": raft21} {
		if err := roundTrip(c, "up", 5*time.Second); err != nil {
			t.Fatalf("%s across a data cut between 1 and 2: %v", name, err)
		}
	}
	n.Heal(false)
	for _, c := range []net.Conn{fetch21, fetch12} {
		if err := expect(c, "fetch", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := k1.Stalled(); got["2"] != 1 || len(got) != 1 {
		t.Fatalf("node 1's Kafka proxy stalled %v, want one connection from 2", got)
	}
}

// TestKafkaByAddrTellsTLSSourcesApart: a Kafka proxy that tells sources by
// address forwards bytes it cannot read as a Kafka request (a TLS
// ClientHello), and CutKafka stalls node 2's connection from 127.0.0.12 but
// not a client's nor node 2's Link connection.
func TestKafkaByAddrTellsTLSSourcesApart(t *testing.T) {
	const node2 = "127.0.0.12"
	if ln, err := net.Listen("tcp", node2+":0"); err != nil {
		t.Skipf("%s is not usable here: %v", node2, err)
	} else {
		ln.Close()
	}
	e := startEcho(t)
	n := New()
	from := func(remote net.Addr) string {
		if remote.(*net.TCPAddr).IP.String() == node2 {
			return "2"
		}
		return "client"
	}
	k1, err := n.KafkaByAddr("127.0.0.1:0", "1", from, e.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k1.Close() })
	l1 := startLink(t, n, "2", "1", e)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(node2)}}
	fetch, err := d.Dial("tcp", k1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fetch.Close() })
	app, raft := dial(t, k1), dial(t, l1)
	hello := string([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}) // a TLS record header: no Kafka size a proxy would accept
	for _, c := range []net.Conn{fetch, app, raft} {
		if err := roundTrip(c, hello, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	n.CutKafka("2", "1")
	fetch.Write([]byte("fetch"))
	silent(t, fetch)
	for name, c := range map[string]net.Conn{"a client": app, "node 2's Link connection": raft} {
		if err := roundTrip(c, "up", 5*time.Second); err != nil {
			t.Fatalf("%s across a data cut between 1 and 2: %v", name, err)
		}
	}
	n.Heal(false)
	if err := expect(fetch, "fetch", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := k1.Sources(); got["2"] != 1 || got["client"] != 1 || len(got) != 2 {
		t.Fatalf("sources %v, want one connection each from 2 and client", got)
	}
}

// TestIsolateKeepingClients: a node cut off from its peers but not from its
// clients.
func TestIsolateKeepingClients(t *testing.T) {
	e := startEcho(t)
	n := New()
	fromPeer, fromClient := startLink(t, n, "a", "b", e), startLink(t, n, "client", "b", e)
	peer, client := dial(t, fromPeer), dial(t, fromClient)
	n.Isolate("b", "client")
	if err := roundTrip(client, "still", 5*time.Second); err != nil {
		t.Fatalf("a kept link: %v", err)
	}
	peer.Write([]byte("cut"))
	silent(t, peer)
	n.Heal(false)
	if err := expect(peer, "cut", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestUnreachableDestinationResets: a connection to a node that is down ends
// with a reset, as a refused connection would, not with an orderly EOF.
func TestUnreachableDestinationResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	p, err := New().Link("127.0.0.1:0", "b", fixed("a"), func() (string, error) { return down, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err == nil { // the reset may beat the end of the dial
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection through a proxy whose destination is down: %v, want ECONNRESET", err)
	}
}

// reset requires that c is reset (within a generous bound).
func reset(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read %d bytes, %v; want it reset", what, n, err)
	}
}

// TestDownResetsOnlyTheDeadEnd: a powered-off node's own ends of its
// connections are reset at once (its process stops without waiting for I/O
// timeouts) and its new connections refused, while its peer's ends stay open
// and silent until the heal resets them.
func TestDownResetsOnlyTheDeadEnd(t *testing.T) {
	// powerOff has a connect to b through a proxy, then cuts dead's power.
	powerOff := func(t *testing.T, dead string) (*echo, *Net, *Proxy, net.Conn) {
		e := startEcho(t)
		n := New()
		p := startLink(t, n, "a", "b", e)
		c := dial(t, p)
		if err := roundTrip(c, "x", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		n.Isolate(dead)
		n.Down(dead)
		return e, n, p, c
	}
	t.Run("the dialling node", func(t *testing.T) {
		e, n, p, c := powerOff(t, "a")
		reset(t, c, "the dead node's end")
		if c, err := net.Dial("tcp", p.Addr()); err == nil { // the reset may beat the end of the dial
			defer c.Close()
			reset(t, c, "a connection the dead node opens")
		} else if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a connection the dead node opens: %v, want ECONNRESET", err)
		}
		time.Sleep(300 * time.Millisecond) // absence over a window, as silent
		if got := e.ended.Load(); got != 0 {
			t.Fatalf("the peer saw %d connections end while the node was down", got)
		}
		n.Heal(true)
		wait.For(t, "the peer's end closed at the heal", func() bool { return e.ended.Load() == 1 })
	})
	t.Run("the node dialled", func(t *testing.T) {
		e, n, _, c := powerOff(t, "b")
		wait.For(t, "the dead node's end closed", func() bool { return e.ended.Load() == 1 })
		c.Write([]byte("lost"))
		silent(t, c)
		n.Heal(true)
		reset(t, c, "the peer's end after the heal")
	})
}

func TestCloseEndsStalledConnections(t *testing.T) {
	e := startEcho(t)
	n := New()
	p, err := n.Link("127.0.0.1:0", "b", fixed("a"), e.upstream)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	n.Isolate("a")
	c.Write([]byte("held"))
	silent(t, c)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 4)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v; want the connection closed", err)
	}
}

// TestLinkTellsSourcesByAddress: one proxy for node "1", dialled from two
// loopback addresses (as nodes binding their outgoing connections to their
// own address do); isolating the node behind one address stalls only its
// connection, and the counts say so.
func TestLinkTellsSourcesByAddress(t *testing.T) {
	src2, src3 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 12)}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 13)}
	if ln, err := net.Listen("tcp", "127.0.0.12:0"); err != nil {
		t.Skipf("this host cannot use 127.0.0.12 as a source address: %v", err)
	} else {
		ln.Close()
	}
	e := startEcho(t)
	n := New()
	by := func(a net.Addr) string {
		switch a.(*net.TCPAddr).IP.String() {
		case "127.0.0.12":
			return "2"
		case "127.0.0.13":
			return "3"
		}
		return "client"
	}
	p, err := n.Link("127.0.0.1:0", "1", by, e.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	from := func(local net.Addr) net.Conn {
		d := net.Dialer{LocalAddr: local}
		c, err := d.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c2, c3, client := from(src2), from(src3), dial(t, p)
	for _, c := range []net.Conn{c2, c3, client} {
		if err := roundTrip(c, "hi", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	n.Isolate("2")
	c2.Write([]byte("cut"))
	silent(t, c2)
	for _, c := range []net.Conn{c3, client} {
		if err := roundTrip(c, "up", 5*time.Second); err != nil {
			t.Fatalf("a link that does not touch node 2: %v", err)
		}
	}
	n.Heal(false)
	if err := expect(c2, "cut", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := p.Sources(); got["2"] != 1 || got["3"] != 1 || got["client"] != 1 || len(got) != 3 {
		t.Fatalf("sources %v, want one connection each from 2, 3 and client", got)
	}
	if got := p.Stalled(); got["2"] != 1 || len(got) != 1 {
		t.Fatalf("stalled %v, want only node 2's connection", got)
	}
}

// TestResetPassesOn: a destination that resets a connection (a process killed
// with a request unread) resets the client's too; an orderly end of stream
// there would look to a Kafka client like a TLS mismatch, which it does not
// retry.
func TestResetPassesOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Read(make([]byte, 1)) // part of the request, the rest unread
		abort(c)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	p, err := New().Link("127.0.0.1:0", "b", fixed("a"), func() (string, error) { return ln.Addr().String(), nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := dial(t, p)
	if _, err := c.Write([]byte("a request")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err = c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection its destination reset: %v, want ECONNRESET", err)
	}
}
