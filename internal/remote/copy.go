package remote

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/strata-stream/strata/internal/vfs"
)

// copyBufBytes is the piece size of a copy into a file:// object: a segment of
// 1 MiB goes in one read and one write rather than 32 of each.
const copyBufBytes = 1 << 20

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, copyBufBytes); return &b }}

// copyObject copies up to size bytes from r into w and returns how many it
// copied (fewer only when r ends first). The context is checked between pieces.
// A section of an operating-system file (io.SectionReader over a vfs.OSFile,
// what the tier uploads a segment through) is copied by the kernel when w is
// one too and the platform can (copySection); a Concat piece by piece, each
// the same way; anything else goes through a pooled buffer (a buffer of its
// own size below copyBufBytes).
func copyObject(ctx context.Context, w vfs.File, r io.Reader, size int64) (int64, error) {
	if sr, ok := r.(*io.SectionReader); ok {
		if n, handled, err := copyConcat(ctx, w, sr, size); handled {
			return n, err
		}
		if n, handled, err := copySection(ctx, w, sr, size); handled {
			return n, err
		}
	}
	var buf []byte
	if size < copyBufBytes {
		// A small object (a manifest, a block index) does not take a pooled
		// 1 MiB buffer: a pool emptied by a collection is refilled by the next
		// put, so each such copy could cost a new 1 MiB.
		buf = make([]byte, size)
	} else {
		bp := copyBufPool.Get().(*[]byte)
		defer copyBufPool.Put(bp)
		buf = *bp
	}
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-n)])
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
	return n, nil
}
