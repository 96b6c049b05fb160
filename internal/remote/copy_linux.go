package remote

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/strata-stream/strata/internal/vfs"
)

// copyRangePiece bounds one copy_file_range call, so that a cancelled context
// stops a large copy soon.
const copyRangePiece = 8 << 20

// copySection copies up to size bytes of sr, from its current position, into w
// with copy_file_range(2): the kernel moves the bytes between the two files'
// page caches without a trip through user memory. handled is false, with
// nothing copied, when either side is not an operating-system file or the
// filesystems cannot (the caller then copies through a buffer).
func copySection(ctx context.Context, w vfs.File, sr *io.SectionReader, size int64) (n int64, handled bool, err error) {
	ra, base, length := sr.Outer()
	src, dst := osFileOf(ra), osFileOf(w)
	if src == nil || dst == nil {
		return 0, false, nil
	}
	cur, err := sr.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false, nil
	}
	size = min(size, length-cur)
	srcConn, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	dstConn, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	for n < size {
		if err := ctx.Err(); err != nil {
			return n, true, err
		}
		var k int
		var cerr error
		ctrlErr := srcConn.Control(func(sfd uintptr) {
			ctrlErr := dstConn.Control(func(dfd uintptr) {
				off := base + cur + n
				k, cerr = unix.CopyFileRange(int(sfd), &off, int(dfd), nil, int(min(size-n, copyRangePiece)), 0)
			})
			if cerr == nil {
				cerr = ctrlErr
			}
		})
		if cerr == nil {
			cerr = ctrlErr
		}
		switch {
		case cerr != nil && n == 0 && unsupportedCopy(cerr):
			return 0, false, nil
		case errors.Is(cerr, unix.EINTR):
			continue
		case cerr != nil:
			return n, true, cerr
		case k == 0: // the source ended early
			_, err := sr.Seek(cur+n, io.SeekStart)
			return n, true, err
		}
		n += int64(k)
	}
	_, err = sr.Seek(cur+n, io.SeekStart)
	return n, true, err
}

// osFileOf returns the operating-system file behind x, or nil.
func osFileOf(x any) *os.File {
	switch f := x.(type) {
	case *os.File:
		return f
	case vfs.OSFile:
		return f.OSFile()
	}
	return nil
}

// unsupportedCopy reports whether copy_file_range refused the pair of files
// (different filesystems on old kernels, a filesystem without support, a
// kernel without the call) rather than failing an I/O.
func unsupportedCopy(err error) bool {
	return errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.EPERM)
}
