package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// Throughput is bytes moved in a time, with the rate (MB = 10^6 bytes).
type Throughput struct {
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	MBPerSec float64 `json:"mb_per_second"`
}

// NewThroughput is bytes in elapsed; its rate is 0 when elapsed is not positive.
func NewThroughput(bytes int64, elapsed time.Duration) Throughput {
	t := Throughput{Bytes: bytes, Seconds: elapsed.Seconds()}
	if elapsed > 0 {
		t.MBPerSec = float64(bytes) / 1e6 / elapsed.Seconds()
	}
	return t
}

// BytesPerSec is the rate in bytes per second.
func (t Throughput) BytesPerSec() float64 { return t.MBPerSec * 1e6 }

// MoveResult is what `strata bench move` measured: one partition of Bytes
// moved whole from broker From to To unthrottled, then back under a
// replication throttle, against the raw disk figure, and a paced acks=all
// producer's latency during the throttled move against the same producer
// with nothing moving.
type MoveResult struct {
	Topic string `json:"topic"`
	From  int32  `json:"from"`
	To    int32  `json:"to"`
	// Disk is a sequential write of Bytes and one fsync in DiskDir.
	DiskDir string     `json:"disk_dir"`
	Disk    Throughput `json:"disk"`
	// Unthrottled is the move From -> To, from the request to the moment the
	// controller lists it no longer.
	Unthrottled Throughput `json:"unthrottled_move"`
	// Throttled is the move back, To -> From, with Throttle bytes/s as both
	// brokers' leader and follower replication throttle.
	Throttle  int64      `json:"throttle_bytes_per_second"`
	Throttled Throughput `json:"throttled_move"`
	// The ratios: the unthrottled move's rate over the disk's, the throttled
	// move's over the throttle, the producer's p99 during the throttled move
	// over its p99 with nothing moving.
	UnthrottledOfDisk   float64 `json:"unthrottled_of_disk"`
	ThrottledOfLimit    float64 `json:"throttled_of_throttle"`
	P99MovingOfIdle     float64 `json:"p99_moving_of_idle"`
	LatencyTopic        string  `json:"latency_topic"`
	LatencyRate         int     `json:"latency_rate"` // records/s
	LatencyRecordSize   int     `json:"latency_record_size"`
	LatencyIdle         Latency `json:"latency_idle"`
	LatencyMoving       Latency `json:"latency_moving"`
	LatencyIdleFailed   int64   `json:"latency_idle_failed"`
	LatencyMovingFailed int64   `json:"latency_moving_failed"`
	// With a timeline, each run's latency per window of the run (the idle
	// run starts as the move completes).
	TimelineIdle   []Window `json:"timeline_idle,omitempty"`
	TimelineMoving []Window `json:"timeline_moving,omitempty"`
}

// Finish computes the ratios from the figures; a ratio whose divisor is 0 is 0.
func (r *MoveResult) Finish() {
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	r.UnthrottledOfDisk = ratio(r.Unthrottled.MBPerSec, r.Disk.MBPerSec)
	r.ThrottledOfLimit = ratio(r.Throttled.BytesPerSec(), float64(r.Throttle))
	r.P99MovingOfIdle = ratio(r.LatencyMoving.P99, r.LatencyIdle.P99)
}

// DefaultThrottle is the throttle of a run that names none: half the
// unthrottled move's rate, so that the throttle, not the machine, bounds the
// second move.
func DefaultThrottle(unthrottled Throughput) int64 {
	return max(int64(unthrottled.BytesPerSec()/2), 1)
}

// WriteTable prints r for people.
func (r MoveResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
	}
	rate := func(t Throughput) string {
		return fmt.Sprintf("%.2f MB/s (%d bytes in %.2f s)", t.MBPerSec, t.Bytes, t.Seconds)
	}
	row("partition", "%s-0, broker %d -> %d, then back", r.Topic, r.From, r.To)
	row("raw disk", "%s, sequential write + fsync in %s", rate(r.Disk), r.DiskDir)
	row("unthrottled move", "%s, %.2fx the raw disk", rate(r.Unthrottled), r.UnthrottledOfDisk)
	row("throttled move", "%s, %.2fx the throttle of %.2f MB/s", rate(r.Throttled), r.ThrottledOfLimit, float64(r.Throttle)/1e6)
	row("producer", "%s, %d records/s of %d B, acks=all, no linger", r.LatencyTopic, r.LatencyRate, r.LatencyRecordSize)
	lat := func(name string, l Latency, failed int64) {
		row(name, "p50 %.3f / p99 %.3f / max %.3f ms (%d records, %d failed)", l.P50, l.P99, l.Max, l.Count, failed)
	}
	lat("  idle", r.LatencyIdle, r.LatencyIdleFailed)
	lat("  during the throttled move", r.LatencyMoving, r.LatencyMovingFailed)
	row("  p99 moving / idle", "%.2fx", r.P99MovingOfIdle)
	timeline := func(name string, ws []Window) {
		for _, w := range ws {
			at := w.Start.Sub(ws[0].Start).Seconds()
			row(fmt.Sprintf("  %s +%.1fs", name, at), "p99 %.3f / max %.3f ms (%d records)", w.P99, w.Max, w.Count)
		}
	}
	timeline("idle", r.TimelineIdle)
	timeline("moving", r.TimelineMoving)
	return tw.Flush()
}

// diskChunk is the size of each write of DiskWrite.
const diskChunk = 1 << 20

// DiskWrite measures the raw disk figure a move is compared with: size bytes
// written sequentially to a new file in dir, in 1 MiB writes of incompressible
// bytes, then one fsync; the file is removed afterwards.
func DiskWrite(fs vfs.FS, dir string, size int64) (Throughput, error) {
	buf := make([]byte, diskChunk)
	rng := rand.New(rand.NewPCG(uint64(size), 0xd15c))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	path := filepath.Join(dir, fmt.Sprintf("strata-bench-move-disk-%d", rand.Uint64()))
	f, err := fs.Create(path)
	if err != nil {
		return Throughput{}, err
	}
	defer fs.Remove(path)
	start := time.Now()
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			f.Close()
			return Throughput{}, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return Throughput{}, err
	}
	elapsed := time.Since(start)
	if err := f.Close(); err != nil {
		return Throughput{}, err
	}
	return NewThroughput(size, elapsed), nil
}
