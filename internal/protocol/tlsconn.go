package protocol

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
)

// What lies under crypto/tls on a TLS connection.
//
// crypto/tls hands every TLS record (at most 16 KiB of plaintext) to the
// connection beneath it with a Write of its own, and reads records through a
// buffer about one or two records long: over a plain socket a 1 MiB Fetch
// response is some 65 write(2) calls, a 1 MiB Produce request some 34 read(2)
// calls. NewTLSListener puts a tlsSocket between each tls.Conn and its socket:
//
//   - Writes. While the connection writer writes responses (between begin and
//     end) the records are appended to a pooled buffer, written to the socket
//     once it holds tlsWriteBatch bytes and when the writer flushes (end).
//     Outside (the handshake, alerts, a close_notify) they go straight through.
//     A failed or short socket write is sticky: the TLS stream is broken, so
//     every later write fails too.
//   - Reads. A read that fills crypto/tls's buffer, when that buffer is
//     already a large record's (readAheadFrom), means more is likely waiting:
//     the next reads go through a pooled read-ahead buffer (tlsReadAhead bytes
//     a call), until a read no longer fills it and what it read is used up. An
//     idle connection holds no buffer, nor does a handshake (crypto/tls reads
//     it in small pieces), so a storm of new connections takes none.
//
// The records themselves, their order and their encryption are crypto/tls's;
// the ciphertext is copied once more, into the write buffer: a memory copy
// where there was a system call per record. A connection closed for an error
// or by Server.Close is cut at the socket first (abort), so a flush stalled on
// a client that does not read cannot hold crypto/tls's close_notify.
const (
	// tlsWriteBatch is how much the write buffer holds before it is written.
	tlsWriteBatch = 256 << 10
	// tlsReadAhead is the read-ahead buffer, and the chunk a file range is
	// read in for a connection without sendfile(2) (bodyWriter.copyFile).
	tlsReadAhead = 256 << 10
	// readAheadFrom is the least crypto/tls must ask for, and get, for the
	// read-ahead buffer to be taken.
	readAheadFrom = 8 << 10
	// bigBufferCap fits tlsWriteBatch plus one more record of the largest kind
	// (16 KiB of plaintext and up to 2 KiB of overhead, RFC 8446 5.2).
	bigBufferCap = tlsWriteBatch + 18<<10
)

var bigBuffers = sync.Pool{New: func() any { b := make([]byte, 0, bigBufferCap); return &b }}

func getBigBuffer() *[]byte { return bigBuffers.Get().(*[]byte) }

func putBigBuffer(b *[]byte) {
	*b = (*b)[:0]
	bigBuffers.Put(b)
}

// NewTLSListener is tls.NewListener with a tlsSocket under every connection it
// accepts, for Server.Serve: the connection writer then coalesces each
// response's TLS records into few socket writes, and large requests are read a
// tlsReadAhead at a time.
func NewTLSListener(ln net.Listener, config *tls.Config) net.Listener {
	return &tlsListener{Listener: ln, config: config}
}

type tlsListener struct {
	net.Listener
	config *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&tlsSocket{Conn: nc}, l.config), nil
}

// TLSDialer returns a dial function for Strata's own Kafka clients
// (kgo.Dialer): TCP through d (its LocalAddr, if any), then the TLS handshake
// as config's client, d.Timeout bounding both as tls.Dialer's does. The tls.Conn reads through a tlsSocket,
// so a large response (a Fetch) is read tlsReadAhead at a time rather than a
// record or two per read(2); its writes go straight through. A config without
// a ServerName checks the dialled host, as kgo.DialTLSConfig does.
func TLSDialer(config *tls.Config, d net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	timeout := d.Timeout
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		cfg := config
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("protocol: dial %q: %w", addr, err)
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(&tlsSocket{Conn: nc}, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

// tlsSocket is the net.Conn under a tls.Conn from NewTLSListener or TLSDialer. Close,
// deadlines and addresses are the socket's own: a Close does not wait for a
// write in progress, which then fails.
type tlsSocket struct {
	net.Conn

	// Read side: crypto/tls reads from one goroutine at a time (the
	// handshake, then the connection reader), so these need no lock.
	rbuf       *[]byte // the read-ahead buffer; nil while reads go straight through
	rpos, rend int     // unread bytes are (*rbuf)[rpos:rend]
	rmore      bool    // the last read filled rbuf: keep it for the next
	rerr       error   // an error that came with the last read's bytes

	// Write side: crypto/tls writes under its own lock, but from the writer,
	// the reader (alerts) and a closing goroutine alike.
	mu struct {
		sync.Mutex
		batching bool
		wbuf     *[]byte // pooled; nil when nothing is held
		err      error   // sticky: a failed socket write, or released
	}
}

// tlsSocketOf returns the tlsSocket under nc, or nil.
func tlsSocketOf(nc net.Conn) *tlsSocket {
	if tc, ok := nc.(*tls.Conn); ok {
		if s, ok := tc.NetConn().(*tlsSocket); ok {
			return s
		}
	}
	return nil
}

func (s *tlsSocket) Read(p []byte) (int, error) {
	if s.rbuf == nil {
		n, err := s.Conn.Read(p)
		if err == nil && n == len(p) && n >= readAheadFrom && n < tlsReadAhead {
			s.rbuf, s.rpos, s.rend = getBigBuffer(), 0, 0
		}
		return n, err
	}
	if s.rpos == s.rend {
		buf := (*s.rbuf)[:tlsReadAhead]
		n, err := s.Conn.Read(buf)
		s.rpos, s.rend, s.rmore, s.rerr = 0, n, n == len(buf), err
	}
	n := copy(p, (*s.rbuf)[s.rpos:s.rend])
	s.rpos += n
	if s.rpos < s.rend {
		return n, nil
	}
	err := s.rerr
	if !s.rmore || err != nil {
		s.releaseRead()
	}
	return n, err
}

func (s *tlsSocket) releaseRead() {
	if s.rbuf != nil {
		putBigBuffer(s.rbuf)
		s.rbuf, s.rpos, s.rend, s.rmore, s.rerr = nil, 0, 0, false, nil
	}
}

func (s *tlsSocket) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		return 0, s.mu.err
	}
	if !s.mu.batching {
		return s.writeLocked(p)
	}
	if s.mu.wbuf == nil {
		s.mu.wbuf = getBigBuffer()
	}
	if len(*s.mu.wbuf)+len(p) > cap(*s.mu.wbuf) {
		// Never with crypto/tls's records; keeps the buffer its pooled size.
		if err := s.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > cap(*s.mu.wbuf) {
			return s.writeLocked(p)
		}
	}
	*s.mu.wbuf = append(*s.mu.wbuf, p...)
	if len(*s.mu.wbuf) >= tlsWriteBatch {
		if err := s.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeLocked writes p to the socket; a failure is sticky. A write that
// returns short without an error (a net.Conn that breaks io.Writer's rule) is
// io.ErrShortWrite: the rest of p would be lost and the TLS stream broken.
func (s *tlsSocket) writeLocked(p []byte) (int, error) {
	n, err := s.Conn.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.mu.err = err
	}
	return n, err
}

func (s *tlsSocket) flushLocked() error {
	if s.mu.wbuf == nil || len(*s.mu.wbuf) == 0 {
		return nil
	}
	_, err := s.writeLocked(*s.mu.wbuf)
	*s.mu.wbuf = (*s.mu.wbuf)[:0]
	return err
}

// begin holds the TLS records written from now on until end. Nil-safe: a
// connection without a tlsSocket writes through.
func (s *tlsSocket) begin() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.mu.batching = true
	s.mu.Unlock()
}

// end writes what begin held and lets later records through again.
func (s *tlsSocket) end() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.batching = false
	err := s.flushLocked()
	if s.mu.wbuf != nil {
		putBigBuffer(s.mu.wbuf)
		s.mu.wbuf = nil
	}
	if err == nil {
		err = s.mu.err
	}
	return err
}

// abort closes the socket at once, ending a write in progress; what is held
// is dropped. Nil-safe.
func (s *tlsSocket) abort() {
	if s != nil {
		_ = s.Conn.Close()
	}
}

// release returns the buffers to their pool once the connection is closed and
// its reader has stopped; later writes fail.
func (s *tlsSocket) release() {
	if s == nil {
		return
	}
	s.releaseRead()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.wbuf != nil {
		putBigBuffer(s.mu.wbuf)
		s.mu.wbuf = nil
	}
	s.mu.batching = false
	if s.mu.err == nil {
		s.mu.err = net.ErrClosed
	}
}
