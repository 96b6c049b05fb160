package controllerlink

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponseBytes bounds a response frame from a controller.
const maxResponseBytes = 64 << 20

// Client sends requests to the active controller. It keeps one connection per
// controller and sends one request at a time on it (these requests are few).
type Client struct {
	// Leader returns the active controller's node id and link address, or ok=false.
	Leader func() (id int32, addr string, ok bool)
	// Versions is the highest version the link serves for each API key (its
	// server is the same build). A request is sent at its own version: a
	// client's forwarded request at the client's, so the answer keeps its
	// fields; one above this is refused.
	Versions map[int16]int16
	// Timeout bounds dialing and each round trip (default 10s).
	Timeout time.Duration
	// DialTLS, when set, gives the TLS configuration for a controller's address:
	// the link then runs over TLS (the marker byte inside it).
	DialTLS func(addr string) *tls.Config
	// LocalAddr, when set, is the local address connections are made from.
	LocalAddr net.Addr

	mu     sync.Mutex
	conns  map[string]*linkConn
	corr   int32
	closed bool
}

type linkConn struct {
	// busy holds one token while a request is on the connection; waiting for it
	// respects the caller's context, so a request stuck on a controller that
	// stopped answering cannot hold up one with a shorter deadline.
	busy chan struct{}
	nc   net.Conn
}

// Request sends req to the active controller and returns its response. It does
// not retry: callers decide what a NOT_CONTROLLER answer or an error means to them.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	_, addr, ok := c.Leader()
	if !ok {
		return nil, errNoController
	}
	return c.RequestTo(ctx, addr, req)
}

// RequestTo sends req to the link at addr, whichever controller that is (a
// broker-only node that has not joined knows no leader and asks every voter).
// A request whose ctx ends gives up at once, closing its connection.
func (c *Client) RequestTo(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	if v, ok := c.Versions[req.Key()]; !ok || req.GetVersion() > v {
		return nil, fmt.Errorf("controllerlink: the link does not serve %s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	for {
		lc, err := c.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		select {
		case lc.busy <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !c.current(addr, lc) {
			// The request before ours failed and dropped the connection: dial anew.
			<-lc.busy
			continue
		}
		resp, err := c.roundTrip(ctx, lc.nc, req)
		if err != nil {
			c.drop(addr, lc)
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
		}
		<-lc.busy
		return resp, err
	}
}

// current reports whether lc is still the connection to addr.
func (c *Client) current(addr string, lc *linkConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns[addr] == lc
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 10 * time.Second
}

// conn returns the connection to addr, dialing one if there is none. It dials
// without holding c.mu, so that a dial to an unreachable controller does not
// hold up requests to another; of two concurrent dials the first to finish wins.
func (c *Client) conn(ctx context.Context, addr string) (*linkConn, error) {
	c.mu.Lock()
	lc, closed := c.conns[addr], c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case lc != nil:
		return lc, nil
	}
	nc, err := dial(ctx, addr, c.timeout(), c.LocalAddr, c.DialTLS)
	if err != nil {
		return nil, fmt.Errorf("controllerlink: dialing %s: %w", addr, err)
	}
	if _, err := nc.Write([]byte{Marker}); err != nil {
		nc.Close()
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return nil, errClosed
	}
	if lc := c.conns[addr]; lc != nil {
		nc.Close()
		return lc, nil
	}
	if c.conns == nil {
		c.conns = map[string]*linkConn{}
	}
	lc = &linkConn{nc: nc, busy: make(chan struct{}, 1)}
	c.conns[addr] = lc
	return lc, nil
}

func (c *Client) drop(addr string, lc *linkConn) {
	lc.nc.Close()
	c.mu.Lock()
	if c.conns[addr] == lc {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
}

func (c *Client) roundTrip(ctx context.Context, nc net.Conn, req kmsg.Request) (kmsg.Response, error) {
	deadline := time.Now().Add(c.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	// A cancelled caller (another voter answered first) must not wait out
	// the deadline on a controller that does not answer: expiring the
	// deadline ends the read, and the caller drops the connection. The
	// deadline is cleared only once that can no longer happen.
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		nc.SetDeadline(time.Now())
		close(expired)
	})
	defer func() {
		if !stop() {
			<-expired
		}
		nc.SetDeadline(time.Time{})
	}()
	c.mu.Lock()
	c.corr++
	corr := c.corr
	c.mu.Unlock()

	buf := kbin.AppendInt32(nil, 0) // size, filled below
	buf = kbin.AppendInt16(buf, req.Key())
	buf = kbin.AppendInt16(buf, req.GetVersion())
	buf = kbin.AppendInt32(buf, corr)
	var clientID *string
	if ctx.Value(passedOnKey{}) != nil {
		clientID = &passedOnID
	}
	buf = kbin.AppendNullableString(buf, clientID)
	if req.IsFlexible() {
		buf = append(buf, 0) // no header tags
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := nc.Write(buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("controllerlink: response frame of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(nc, frame); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("controllerlink: correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, fmt.Errorf("controllerlink: truncated %s response header", kmsg.NameForKey(req.Key()))
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("controllerlink: decoding %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// Close closes every connection; later requests fail.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, lc := range c.conns {
		lc.nc.Close()
		delete(c.conns, addr)
	}
}
