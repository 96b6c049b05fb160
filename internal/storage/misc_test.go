package storage

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

func TestScanBatches(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, IndexIntervalBytes: 100})
	appendN(t, l, 20, 2, 300, 0, 0)
	marker := batchtest.Build(batchtest.Options{Attributes: 0x30, Idempotent: true, ProducerID: 7,
		Records: []batchtest.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
	if _, err := l.Append(marker, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5, 2, 300, 0, 0)

	var offsets []int64
	var control []byte
	err := l.ScanBatches(7, func(h batch.Header, body []byte) error {
		offsets = append(offsets, h.BaseOffset)
		if h.Control() {
			control = bytes.Clone(body)
		} else if body != nil {
			t.Errorf("body for a data batch at %d", h.BaseOffset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// From the batch holding 7 (base 6): 17 batches to 39, the marker at 40, 5 more.
	if offsets[0] != 6 || len(offsets) != 17+1+5 || offsets[len(offsets)-1] != 49 {
		t.Fatalf("scanned %v", offsets)
	}
	if h, err := batch.Validate(control); err != nil || h.BaseOffset != 40 || !h.Control() {
		t.Fatalf("control body: %+v %v", h, err)
	}
	stop := errors.New("stop")
	n := 0
	if err := l.ScanBatches(0, func(batch.Header, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("ScanBatches did not stop: %v after %d", err, n)
	}
}

func TestSideFileFraming(t *testing.T) {
	payload := []byte("checkpoint payload")
	framed := frameSide(payload)
	if got, err := unframeSide(framed); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("round trip: %q %v", got, err)
	}
	damage := []struct {
		name string
		f    func(b []byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"short", func(b []byte) []byte { return b[:sideHeaderSize-1] }},
		{"torn", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extra", func(b []byte) []byte { return append(b, 0) }},
		{"flipped payload", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"version", func(b []byte) []byte { b[9] = 2; return b }},
	}
	for _, d := range damage {
		if _, err := unframeSide(d.f(bytes.Clone(framed))); !errors.Is(err, ErrCorruptSideFile) {
			t.Errorf("%s: %v", d.name, err)
		}
	}

	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeSideFile(fsys, "/d", "x", payload); err != nil {
		t.Fatal(err)
	}
	// The write is durable on its own: tmp file, fsync, rename, directory fsync.
	if got, err := readSideFile(fsys.CrashClone(), "/d", "x"); err != nil && !isNotExist(err) || (err == nil && !bytes.Equal(got, payload)) {
		t.Fatalf("after crash: %q %v", got, err)
	}
	if _, err := readSideFile(fsys, "/d", "missing"); !isNotExist(err) {
		t.Fatalf("missing side file: %v", err)
	}
}

func TestCorruptCheckpointForcesFullScan(t *testing.T) {
	fsys, want := cleanLog(t, Config{SegmentBytes: 2048}, 40)
	appendRaw(t, fsys, testDir+"/"+recoveryCheckpointName, []byte{1})
	l := openLog(t, fsys, Config{SegmentBytes: 2048})
	if st := l.Stats(); int(st.RecoveredSegments) != l.NumSegments() {
		t.Fatalf("scanned %d of %d segments", st.RecoveredSegments, l.NumSegments())
	}
	sameBatches(t, readAll(t, l), want)
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{IndexIntervalBytes: 1 << 20})
	b := mkBatch(10, 100, 0)
	appendN(t, l, 50, 10, 100, 0, 0)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Append allocates %.1f times", allocs)
	}
	end := l.LogEndOffset()
	allocs = testing.AllocsPerRun(200, func() {
		c, err := l.Read(end-300, 4096, end-50)
		if err != nil || c.Size == 0 {
			t.Fatalf("Read: %v, %d bytes", err, c.Size)
		}
		c.Release()
	})
	if allocs != 0 {
		t.Errorf("Read allocates %.1f times", allocs)
	}
}

// TestConcurrentUse runs appenders, readers, retention and a durability waiter at
// once; with -race it checks the locking, and every read must see whole, valid,
// contiguous batches.
func TestConcurrentUse(t *testing.T) {
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 8192, IndexIntervalBytes: 256, RetentionBytes: 64 << 10, RetentionAge: -1})
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := f(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var appended atomic.Int64
	for range 2 {
		run(func() error {
			info, err := l.Append(mkBatch(3, 200, 0), 0)
			if err == nil && appended.Add(1)%10 == 0 {
				err = l.WaitDurable(ctxTimeout(t), info.LastOffset)
			}
			return err
		})
	}
	for range 2 {
		run(func() error {
			start := l.LogStartOffset()
			c, err := l.Read(start, 2000, l.LogEndOffset())
			if errors.Is(err, ErrOffsetOutOfRange) {
				return nil // retention moved the start meanwhile
			}
			if err != nil {
				return err
			}
			defer c.Release()
			b, err := c.Bytes()
			if err != nil {
				return err
			}
			it := batch.NewIter(b)
			next := c.FirstOffset
			for it.Next() {
				if h := it.Header(); h.BaseOffset != next {
					return errors.New("non-contiguous read")
				}
				next = it.Header().NextOffset()
			}
			if it.Err() != nil || next != c.NextOffset {
				return errors.New("bad chunk")
			}
			return nil
		})
	}
	run(func() error {
		_, err := l.EnforceRetention(l.DurableOffset())
		return err
	})
	wait.For(t, "appends", func() bool { return appended.Load() >= 150 || len(errc) > 0 })
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if l.Stats().SegmentsDeleted == 0 {
		t.Fatalf("retention never ran: %+v", l.Stats())
	}
}

// TestOnRollHook: every roll is reported once.
func TestOnRollHook(t *testing.T) {
	var rolls []time.Duration
	l := openLog(t, vfs.NewMem(), Config{SegmentBytes: 4096, OnRoll: func(d time.Duration) { rolls = append(rolls, d) }})
	appendN(t, l, 40, 4, 64, 0, 0)
	st := l.Stats()
	if st.Rolls < 2 || int64(len(rolls)) != st.Rolls {
		t.Fatalf("%d rolls reported, the log counts %d (want at least 2)", len(rolls), st.Rolls)
	}
}
