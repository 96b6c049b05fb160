package storage

import (
	"fmt"
	"io"
	"sync"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// scanner walks the batches of a segment file from pos up to end through a read
// window. In header mode it reads only each batch's header (the read path); in full
// mode it reads and validates whole batches, CRC included (recovery, rebuilds,
// compaction), as stored batches: compaction may have thinned them
// (batch.ValidateStored).
type scanner struct {
	f    vfs.File
	pos  int64 // position of the next batch
	end  int64 // nothing at or beyond end is read
	full bool

	buf    []byte // window storage
	win    []byte // buf[:n]: bytes of the file from winPos
	winPos int64

	h    batch.Header
	b    []byte // the current batch (full mode) or its header
	bpos int64  // position of the current batch
	err  error

	pooled *[]byte // the window came from headerBufPool
}

// headerBufPool holds read windows for header scans on the read path.
var headerBufPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// headerScanner returns a header-mode scanner using a pooled window; call done.
func headerScanner(f vfs.File, pos, end int64) scanner {
	bp := headerBufPool.Get().(*[]byte)
	return scanner{f: f, pos: pos, end: end, buf: *bp, pooled: bp}
}

// fullScanner returns a full-mode scanner with a window of bufSize bytes.
func fullScanner(f vfs.File, pos, end int64, bufSize int) scanner {
	return scanner{f: f, pos: pos, end: end, full: true, buf: make([]byte, bufSize)}
}

// done returns a pooled window.
func (s *scanner) done() {
	if s.pooled != nil {
		headerBufPool.Put(s.pooled)
		s.pooled = nil
	}
	s.buf, s.win = nil, nil
}

// window returns n file bytes at pos, reading if the window does not hold them.
func (s *scanner) window(pos int64, n int) ([]byte, error) {
	if pos >= s.winPos && pos+int64(n) <= s.winPos+int64(len(s.win)) {
		off := pos - s.winPos
		return s.win[off : off+int64(n)], nil
	}
	if n > cap(s.buf) {
		s.buf = make([]byte, n)
	}
	want := int(min(int64(cap(s.buf)), s.end-pos))
	want = max(want, n)
	got, err := s.f.ReadAt(s.buf[:want], pos)
	s.win, s.winPos = s.buf[:got], pos
	if got < n {
		if err == nil || err == io.EOF {
			return nil, errTornTail
		}
		return nil, err
	}
	return s.win[:n], nil
}

// next advances to the next batch; false at end or on error (see err).
func (s *scanner) next() bool {
	if s.err != nil || s.pos >= s.end {
		return false
	}
	if s.end-s.pos < batch.HeaderSize {
		s.err = errTornTail
		return false
	}
	hdr, err := s.window(s.pos, batch.HeaderSize)
	if err != nil {
		s.err = err
		return false
	}
	size, err := batch.FrameSize(hdr)
	if err != nil {
		s.err = err
		return false
	}
	if s.pos+int64(size) > s.end {
		s.err = errTornTail
		return false
	}
	if s.full {
		b, err := s.window(s.pos, size)
		if err != nil {
			s.err = err
			return false
		}
		if s.h, err = batch.ValidateStored(b); err != nil {
			s.err = err
			return false
		}
		s.b = b
	} else {
		s.h, _ = batch.ParseHeader(hdr)
		if s.h.Magic != 2 || s.h.LastOffsetDelta < 0 {
			s.err = batch.ErrBadMagic
			return false
		}
		s.b = hdr
	}
	s.bpos = s.pos
	s.pos += int64(size)
	return true
}

// corrupt wraps a scan failure inside bytes that should be whole batches.
func corrupt(name string, pos int64, err error) error {
	return fmt.Errorf("%w: %s at %d: %w", ErrCorruptSegment, name, pos, err)
}
