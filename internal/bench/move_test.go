package bench

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

func TestNewThroughput(t *testing.T) {
	for _, tc := range []struct {
		bytes   int64
		elapsed time.Duration
		mbps    float64
	}{
		{1_000_000, time.Second, 1},
		{250_000_000, 2 * time.Second, 125},
		{1 << 20, 500 * time.Millisecond, 2.097152},
		{1000, 0, 0},
		{1000, -time.Second, 0},
	} {
		got := NewThroughput(tc.bytes, tc.elapsed)
		if math.Abs(got.MBPerSec-tc.mbps) > 1e-9 || got.Bytes != tc.bytes || got.Seconds != tc.elapsed.Seconds() {
			t.Errorf("NewThroughput(%d, %v) = %+v, want %g MB/s", tc.bytes, tc.elapsed, got, tc.mbps)
		}
		if math.Abs(got.BytesPerSec()-tc.mbps*1e6) > 1e-3 {
			t.Errorf("%+v: %g bytes/s", got, got.BytesPerSec())
		}
	}
}

func TestMoveResultFinish(t *testing.T) {
	r := MoveResult{
		Disk:          NewThroughput(400_000_000, time.Second),
		Unthrottled:   NewThroughput(100_000_000, time.Second),
		Throttle:      10_000_000,
		Throttled:     NewThroughput(100_000_000, 9*time.Second+90*time.Millisecond),
		LatencyIdle:   Latency{P99: 4},
		LatencyMoving: Latency{P99: 6},
	}
	r.Finish()
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	near("unthrottled of disk", r.UnthrottledOfDisk, 0.25)
	near("throttled of throttle", r.ThrottledOfLimit, 100.0/90.9)
	near("p99 moving of idle", r.P99MovingOfIdle, 1.5)

	var zero MoveResult // nothing measured: no ratio, no division by zero
	zero.Finish()
	if zero.UnthrottledOfDisk != 0 || zero.ThrottledOfLimit != 0 || zero.P99MovingOfIdle != 0 {
		t.Errorf("ratios of nothing: %+v", zero)
	}
}

func TestDefaultThrottle(t *testing.T) {
	if got := DefaultThrottle(NewThroughput(300_000_000, 2*time.Second)); got != 75_000_000 {
		t.Errorf("half of 150 MB/s = %d bytes/s", got)
	}
	if got := DefaultThrottle(Throughput{}); got != 1 {
		t.Errorf("a move of nothing gets throttle %d, want 1 (0 would stop it)", got)
	}
}

func TestMoveResultTable(t *testing.T) {
	r := MoveResult{Topic: "mv", From: 1, To: 2, DiskDir: "/d", Disk: NewThroughput(2e6, time.Second),
		Unthrottled: NewThroughput(1e6, time.Second), Throttle: 500_000, Throttled: NewThroughput(1e6, 2*time.Second),
		LatencyTopic: "mv-latency", LatencyRate: 100, LatencyRecordSize: 1024,
		LatencyIdle: Latency{P99: 2, Count: 10}, LatencyMoving: Latency{P99: 3, Count: 10}}
	r.Finish()
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mv-0, broker 1 -> 2", "2.00 MB/s", "0.50x the raw disk", "1.00x the throttle of 0.50 MB/s", "1.50x"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestDiskWrite(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	size := int64(3<<20 + 123) // not a whole number of chunks
	got, err := DiskWrite(fs, "/d", size)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes != size || got.Seconds <= 0 || got.MBPerSec <= 0 {
		t.Fatalf("DiskWrite = %+v", got)
	}
	if names, err := fs.List("/d"); err != nil || len(names) != 0 {
		t.Fatalf("left behind %v (%v)", names, err)
	}

	// A full disk is an error, and the file is still removed.
	full := vfs.NewErrorFS(fs, vfs.NewDiskFull(1<<20))
	if _, err := DiskWrite(full, "/d", size); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("DiskWrite on a full disk: %v", err)
	}
	if names, err := fs.List("/d"); err != nil || len(names) != 0 {
		t.Fatalf("left behind %v (%v)", names, err)
	}
}
