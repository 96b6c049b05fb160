package quota

import (
	"net/netip"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// Connection creation rates (KIP-612): connection_creation_rate on an IP
// entity bounds the connections a broker accepts per second from one client
// address, with the same windowed rate as the byte rates:
//
//  1. Every accepted connection from an address with a quota (its own, else
//     the default IP entity's) adds 1 to that address's sensor: one per
//     address, also under the default quota.
//  2. Over the quota, the connection is not admitted and is taken back out of
//     the rate (it was never served); the answer is how long the broker keeps
//     it open, unread, before closing it: (rate - quota) / quota x the measured
//     window, at most one Window (Kafka bounds it by quota.window.size.seconds).
//  3. Sensors of addresses that sent nothing for Samples x Window are dropped,
//     so a flood from many addresses does not grow the Manager for good.

// RecordConnection records a connection accepted from ip and returns 0 when it
// is admitted, or how long to hold it before closing it when ip is over its
// connection_creation_rate in img.
func (m *Manager) RecordConnection(img *metadata.Image, ip netip.Addr) time.Duration {
	quota, ok := img.ConnectionCreationRate(ip)
	if !ok {
		return 0
	}
	ip = ip.Unmap()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepConnectionsLocked(now)
	r := m.mu.conns[ip]
	if r == nil {
		r = &rate{}
		m.mu.conns[ip] = r
	}
	r.add(now, 1)
	perSecond, window := r.measure(now)
	if perSecond <= quota {
		return 0
	}
	r.add(now, -1) // refused: not a connection made
	throttle := time.Duration((perSecond - quota) / quota * float64(window))
	return min(throttle, Window)
}

// sweepConnectionsLocked drops, at most once per Samples x Window, the
// connection sensors whose newest sample has left the measured span.
func (m *Manager) sweepConnectionsLocked(now time.Time) {
	const span = Samples * Window
	if now.Sub(m.mu.connsSwept) < span {
		return
	}
	m.mu.connsSwept = now
	for ip, r := range m.mu.conns {
		if now.Sub(r.samples[r.cur].last) >= span {
			delete(m.mu.conns, ip)
		}
	}
}

// ConnectionRateLimit is a broker-wide connection creation rate (Kafka's
// max.connection.creation.rate): every accepted connection counts, over the
// same windows, and over the limit the accept loop waits (quota excess / quota
// x the window, at most one Window) before serving the connection, so that
// accepting slows down to the limit. Safe for concurrent use.
type ConnectionRateLimit struct {
	limit float64
	now   func() time.Time
	mu    struct {
		sync.Mutex
		r rate
	}
}

// NewConnectionRateLimit returns a limit of limit connections a second; now nil
// means time.Now.
func NewConnectionRateLimit(limit float64, now func() time.Time) *ConnectionRateLimit {
	if now == nil {
		now = time.Now
	}
	return &ConnectionRateLimit{limit: limit, now: now}
}

// Record counts an accepted connection and returns how long to wait before
// serving it (0 within the limit).
func (l *ConnectionRateLimit) Record() time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.r.add(now, 1)
	perSecond, window := l.mu.r.measure(now)
	if perSecond <= l.limit {
		return 0
	}
	return min(time.Duration((perSecond-l.limit)/l.limit*float64(window)), Window)
}
