package replica

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

// panickySegments is a file system whose segment (.log) files panic on writes
// while armed: a fault of the disk layer a follower's append reaches with the
// partition's append lock held.
type panickySegments struct {
	vfs.FS
	armed *atomic.Bool
}

func (s panickySegments) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return panickyWrites{f, s.armed}, nil
}

type panickyWrites struct {
	vfs.File
	armed *atomic.Bool
}

func (f panickyWrites) WriteAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
		panic("segment write failed")
	}
	return f.File.WriteAt(p, off)
}

// recovered runs f and returns what it panicked with, as the broker recovers
// a handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderAppendLockReleasesIt makes a follower's append panic in the
// segment write, with the partition's append lock held, and checks that the
// next append to the partition is done: a panicking append must not leave
// the partition locked.
func TestPanicUnderAppendLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	var armed atomic.Bool
	p := openPartition(t, panickySegments{vfs.NewMem(), &armed}, 2, &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	records := batchtest.Build(batchtest.Options{Records: batchtest.Values(4, 16)})

	armed.Store(true)
	if r := recovered(func() { _ = p.appendFromLeader(0, p.LogEndOffset(), records, 0) }); r == nil {
		t.Fatal("the append did not panic")
	}
	armed.Store(false)

	appended := make(chan error, 1)
	go func() { appended <- p.appendFromLeader(0, p.LogEndOffset(), records, 0) }()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("appending after the panic: %v", err)
		}
		if leo := p.LogEndOffset(); leo != 4 {
			t.Errorf("log end offset %d after the append, want 4", leo)
		}
	case <-time.After(answerWithin):
		// The partition stays locked: closing it would hang too.
		t.Fatalf("the partition's next append was not done in %v: the panic left it locked", answerWithin)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
}
