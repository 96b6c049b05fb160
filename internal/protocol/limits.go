package protocol

import (
	"errors"
	"net"
	"net/netip"
	"sync"
)

// errStopped means a reader gave up waiting for pool room because its connection
// closed or the server stopped; the reader just ends.
var errStopped = errors.New("protocol: stopped while waiting for request memory")

// memoryPool bounds the bytes of request frames read and not yet handled, summed
// over every connection of a Server (Kafka's queued.max.request.bytes). A reader
// reserves a frame's declared size before reading its body and the reservation is
// released once Handle has returned, so a client announcing a large frame and
// trickling it in holds at most its share of the pool, and the broker grows by no
// more than the pool however many connections do so.
//
// Waiters are served first come, first served: a large frame waiting for room is
// not overtaken forever by small ones. The Server makes the pool at least
// MaxRequestBytes, so the largest frame can always proceed alone (a larger
// reservation would be cut to the pool's size).
type memoryPool struct {
	capacity int64 // <= 0: unbounded
	mu       struct {
		sync.Mutex
		used    int64
		waiters []*poolWaiter
	}
}

type poolWaiter struct {
	n     int64
	ready chan struct{} // closed when the reservation is granted
}

func newMemoryPool(capacity int64) *memoryPool {
	return &memoryPool{capacity: capacity}
}

// acquire reserves n bytes, waiting for room until done or quit is closed. It
// returns the bytes reserved (to be given back to release), or false when done
// or quit closed first.
func (p *memoryPool) acquire(n int64, done, quit <-chan struct{}) (int64, bool) {
	if p.capacity <= 0 {
		return 0, true
	}
	n = min(n, p.capacity)
	p.mu.Lock()
	if len(p.mu.waiters) == 0 && p.mu.used+n <= p.capacity {
		p.mu.used += n
		p.mu.Unlock()
		return n, true
	}
	w := &poolWaiter{n: n, ready: make(chan struct{})}
	p.mu.waiters = append(p.mu.waiters, w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return n, true
	case <-done:
	case <-quit:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-w.ready: // granted while we were giving up: hand it back
		p.mu.used -= n
		p.grantLocked()
		return 0, false
	default:
	}
	for i, x := range p.mu.waiters {
		if x == w {
			p.mu.waiters = append(p.mu.waiters[:i], p.mu.waiters[i+1:]...)
			break
		}
	}
	p.grantLocked() // the head may have changed
	return 0, false
}

// release gives back n bytes reserved by acquire.
func (p *memoryPool) release(n int64) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.used -= n
	p.grantLocked()
}

// grantLocked grants waiters in order while the head fits.
func (p *memoryPool) grantLocked() {
	for len(p.mu.waiters) > 0 {
		w := p.mu.waiters[0]
		if p.mu.used+w.n > p.capacity {
			return
		}
		p.mu.used += w.n
		close(w.ready)
		p.mu.waiters = p.mu.waiters[1:]
	}
}

// inUse returns the bytes currently reserved.
func (p *memoryPool) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.used
}

// connLimiter counts open connections in total and per client IP (Kafka's
// max.connections and max.connections.per.ip). A limit <= 0 is no limit.
type connLimiter struct {
	maxTotal, maxPerIP int
	mu                 struct {
		sync.Mutex
		total int
		perIP map[string]int
	}
}

// admit counts a new connection from ip, or reports false when a limit is
// reached (the connection must then be closed without being served).
func (l *connLimiter) admit(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxTotal > 0 && l.mu.total >= l.maxTotal {
		return false
	}
	if l.maxPerIP > 0 && l.mu.perIP[ip] >= l.maxPerIP {
		return false
	}
	if l.mu.perIP == nil {
		l.mu.perIP = make(map[string]int)
	}
	l.mu.total++
	l.mu.perIP[ip]++
	return true
}

// leave uncounts a connection admitted from ip.
func (l *connLimiter) leave(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.total--
	if l.mu.perIP[ip]--; l.mu.perIP[ip] <= 0 {
		delete(l.mu.perIP, ip)
	}
}

// remoteIP is the key connections are counted under: the IP of a TCP peer, or
// the whole address for other transports.
func remoteIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	s := addrString(a)
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// remoteAddr is the IP address of a TCP peer; false for other transports.
func remoteAddr(a net.Addr) (netip.Addr, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(tcp.IP)
	return addr.Unmap(), ok
}
