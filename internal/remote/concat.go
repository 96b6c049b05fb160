package remote

import (
	"context"
	"errors"
	"io"

	"github.com/strata-stream/strata/internal/vfs"
)

// Concat returns the sections laid end to end as one io.SectionReader: the body
// of a Put that makes one object of several pieces (the tier's segment object:
// the segment's bytes, then its block index). Every Store reads it as it reads
// any section; the file:// store also finds the pieces again and copies each its
// own best way, a section of an operating-system file by the kernel.
func Concat(parts ...*io.SectionReader) *io.SectionReader {
	c := &concat{parts: parts}
	for _, p := range parts {
		c.size += p.Size()
	}
	return io.NewSectionReader(c, 0, c.size)
}

// concat is an io.ReaderAt over sections laid end to end.
type concat struct {
	parts []*io.SectionReader
	size  int64
}

// ReadAt reads from the sections that hold [off, off+len(b)).
func (c *concat) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("remote: negative offset")
	}
	n := 0
	for _, p := range c.parts {
		if n == len(b) {
			break
		}
		size := p.Size()
		if off >= size {
			off -= size
			continue
		}
		want := int(min(int64(len(b)-n), size-off))
		k, err := p.ReadAt(b[n:n+want], off)
		n += k
		if k < want {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		off = 0
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// copyConcat copies a whole Concat body piece by piece through copyObject;
// handled is false, with nothing copied, when sr is not a Concat read from its
// start for all of its size.
func copyConcat(ctx context.Context, w vfs.File, sr *io.SectionReader, size int64) (n int64, handled bool, err error) {
	ra, base, length := sr.Outer()
	c, ok := ra.(*concat)
	if !ok || base != 0 || length != c.size || size != c.size {
		return 0, false, nil
	}
	if cur, err := sr.Seek(0, io.SeekCurrent); err != nil || cur != 0 {
		return 0, false, nil
	}
	for _, p := range c.parts {
		outer, off, plen := p.Outer()
		k, err := copyObject(ctx, w, io.NewSectionReader(outer, off, plen), plen)
		n += k
		if err != nil || k != plen {
			return n, true, err
		}
	}
	_, err = sr.Seek(n, io.SeekStart)
	return n, true, err
}
