package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestPageCacheKeepsOnlyTheTail: on the operating system's file system, the
// pages of what a log made durable leave the page cache but its newest
// CacheTailBytes, and every byte still reads back. With batches of about 1 MB
// the kernel caches the file in large folios, which a drop leaves when they
// straddle its edge (maxFolioBytes).
func TestPageCacheKeepsOnlyTheTail(t *testing.T) {
	const tail = 1 << 20
	for _, tc := range []struct {
		name    string
		records int // per batch, of 1000 bytes each
		size    int64
	}{
		{"16 KiB batches", 16, 8 << 20},
		{"1 MB batches", 1000, 32 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(vfs.Default, dir, Config{CacheTailBytes: tail, IndexMaxBytes: testIndexBytes})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			size := appendDurableBatches(t, l, tc.size, tc.records)
			path := filepath.Join(dir, segmentName(0, logSuffix))
			dropped := (size - tail - minCacheDrop) / pageSize
			var cached int
			ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
				cached = 0
				for _, in := range residentPages(t, path, size)[:dropped] {
					if in {
						cached++
					}
				}
				return cached == 0
			})
			if !ok {
				t.Fatalf("%d of the %d pages of durable bytes before the tail stayed in the page cache", cached, dropped)
			}
			if resident := residentPages(t, path, size); !resident[len(resident)-1] {
				t.Fatalf("the newest page left the page cache too")
			}
			n := 0
			for range readAll(t, l) {
				n++
			}
			if want := l.LogEndOffset() / int64(tc.records); int64(n) != want {
				t.Fatalf("read back %d batches, want %d", n, want)
			}
		})
	}
}

// residentPages reports, per page of the first size bytes of the file, whether
// it is in the page cache (mincore(2) of a mapping, which reads nothing).
func residentPages(t *testing.T, path string, size int64) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (size+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}
