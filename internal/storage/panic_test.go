package storage

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// scribblingSegments is a file system whose segment (.log) files, while
// armed, write what they are given and then overwrite the batch length in the
// caller's buffer with a negative one: a file layer that breaks io.WriterAt's
// contract (never modify p). The append reads that buffer again, with the
// segment's mutex held, to index the batches it wrote, and panics there.
type scribblingSegments struct {
	vfs.FS
	armed *atomic.Bool
}

func (s scribblingSegments) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, logSuffix) {
		return f, err
	}
	return scribblingWrites{f, s.armed}, nil
}

type scribblingWrites struct {
	vfs.File
	armed *atomic.Bool
}

func (f scribblingWrites) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if f.armed.Load() {
		length := int32(-1000)
		binary.BigEndian.PutUint32(p[8:], uint32(length)) // the first batch's length field
	}
	return n, err
}

// recovered runs f and returns what it panicked with, as the broker recovers
// a handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderSegmentLockReleasesIt makes an append panic while it indexes
// its batches, with the active segment's mutex held, and checks that the next
// append to the log and a read of it are done: a panicking append must not
// leave the log's segment locked (every later append and every read of the
// segment would wait forever).
func TestPanicUnderSegmentLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	var armed atomic.Bool
	l, err := Open(scribblingSegments{vfs.NewMem(), &armed}, testDir, Config{IndexMaxBytes: testIndexBytes})
	if err != nil {
		t.Fatal(err)
	}
	first := mkBatch(4, 16, 1000)
	if _, err := l.Append(first, 0); err != nil {
		t.Fatal(err)
	}

	armed.Store(true)
	if r := recovered(func() { _, _ = l.Append(mkBatch(4, 16, 2000), 0) }); r == nil {
		t.Fatal("the append did not panic")
	}
	armed.Store(false)

	second := mkBatch(4, 16, 3000)
	type answer struct {
		read []byte
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		if _, err := l.Append(second, 0); err != nil {
			answered <- answer{err: err}
			return
		}
		c, err := l.Read(0, 1<<20, l.LogEndOffset())
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer c.Release()
		b, err := c.Bytes()
		answered <- answer{b, err}
	}()
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("appending and reading after the panic: %v", a.err)
		}
		if want := append(bytes.Clone(first), second...); !bytes.Equal(a.read, want) {
			t.Errorf("read %d bytes after the panic, want the %d bytes of the two batches appended", len(a.read), len(want))
		}
	case <-time.After(answerWithin):
		// The segment stays locked: closing the log would hang too.
		t.Fatalf("the next append and read were not done in %v: the panic left the segment locked", answerWithin)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// panickingReads is a file system whose segment (.log) files panic on a read
// while armed.
type panickingReads struct {
	vfs.FS
	armed *atomic.Bool
}

func (p panickingReads) Create(name string) (vfs.File, error) {
	f, err := p.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, logSuffix) {
		return f, err
	}
	return panickingReadAt{f, p.armed}, nil
}

type panickingReadAt struct {
	vfs.File
	armed *atomic.Bool
}

func (f panickingReadAt) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
		panic("a read of the segment file panicked")
	}
	return f.File.ReadAt(p, off)
}

// TestPanicInReadReleasesSegment: a read that panics in the segment it reads
// gives back its reference to the segment, so that the segment's file is
// closed once the log lets it go (a leaked reference kept it open for the
// process's life).
func TestPanicInReadReleasesSegment(t *testing.T) {
	var armed atomic.Bool
	l, err := Open(panickingReads{vfs.NewMem(), &armed}, testDir, Config{IndexMaxBytes: testIndexBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkBatch(4, 16, 1000), 0); err != nil {
		t.Fatal(err)
	}
	seg := l.segmentFor(0)
	refs := seg.refs.Load()

	armed.Store(true)
	if r := recovered(func() { _, _ = l.Read(0, 1<<20, l.LogEndOffset()) }); r == nil {
		t.Fatal("the read did not panic")
	}
	armed.Store(false)
	if got := seg.refs.Load(); got != refs {
		t.Fatalf("the segment holds %d references after a read panicked in it, want %d as before", got, refs)
	}

	c, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil || c.Size == 0 {
		t.Fatalf("a read after the panic: %d bytes, %v", c.Size, err)
	}
	c.Release()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
