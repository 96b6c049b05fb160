//go:build linux

package handlers

import (
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestDescribeLogDirsSpace: from v4 (KIP-827) Kafka answers the log dir's
// volume size and the bytes still usable on it; Strata answered -1
// (unknown) for both. A filesystem that cannot tell (the in-memory one)
// still answers -1.
func TestDescribeLogDirsSpace(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.Default, dir, 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h := New(Config{NodeID: 1}, fakeCluster{img: metadata.NewImage()}, m, nil, nil, logger)
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(4)
	d := serve(t, h, req).(*kmsg.DescribeLogDirsResponse).Dirs[0]
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if total := int64(st.Blocks) * st.Frsize; d.TotalBytes != total {
		t.Errorf("total bytes %d, want the volume's %d", d.TotalBytes, total)
	}
	if d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
		t.Errorf("usable bytes %d of %d", d.UsableBytes, d.TotalBytes)
	}

	mem := serve(t, newErrorsHandlers(t), req).(*kmsg.DescribeLogDirsResponse).Dirs[0]
	if mem.TotalBytes != -1 || mem.UsableBytes != -1 {
		t.Errorf("in memory: total %d usable %d, want -1 and -1", mem.TotalBytes, mem.UsableBytes)
	}
}
