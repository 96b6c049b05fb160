package share

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// panickyStore is memStore whose Load or Save panics while armed. The manager
// loads with a share partition's mutex held and saves with it handed over
// (released during the write), so these are faults under the lock a request
// can cause.
type panickyStore struct {
	memStore
	loadPanics, savePanics atomic.Bool
}

func (s *panickyStore) Load(ctx context.Context, k Key, epoch int32) (Snapshot, bool, error) {
	if s.loadPanics.Load() {
		panic("share state load failed")
	}
	return s.memStore.Load(ctx, k, epoch)
}

func (s *panickyStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	if s.savePanics.Load() {
		panic("share state save failed")
	}
	return s.memStore.Save(ctx, k, snap)
}

// recovered runs f and returns what it panicked with, as the broker's
// connection recovers a handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderSharePartitionLockReleasesIt makes a ShareFetch panic in the
// store with its share partition locked (a load) or handed over (a save), and
// checks that the next fetch of the share partition is answered with a record:
// a panicking request must leave the share partition's mutex unlocked, and no
// save waiting for a write that never ends.
func TestPanicUnderSharePartitionLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	for _, tc := range []struct {
		name  string
		armed func(s *panickyStore) *atomic.Bool
	}{
		{"load", func(s *panickyStore) *atomic.Bool { return &s.loadPanics }},
		{"save", func(s *panickyStore) *atomic.Bool { return &s.savePanics }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &panickyStore{}
			m, _ := newGroupCommitManager(t, store, 2)

			armed := tc.armed(store)
			armed.Store(true)
			if p := recovered(func() { m.ShareFetch(context.Background(), openFetch("a")) }); p == nil {
				t.Fatal("the fetch did not panic")
			}
			armed.Store(false)

			answered := make(chan *kmsg.ShareFetchResponse, 1)
			go func() { answered <- m.ShareFetch(context.Background(), openFetch("b")) }()
			select {
			case resp := <-answered:
				if got := acquiredCount(resp); got != 1 {
					t.Errorf("the next fetch acquired %d records, want 1: %+v", got, resp)
				}
			case <-time.After(answerWithin):
				t.Fatalf("the share partition's next fetch was not answered in %v: the panic left it locked, or waiting for a write that never ends", answerWithin)
			}
		})
	}
}

// acquiredCount is how many offsets a ShareFetch response hands out, 0 when it
// or a partition failed.
func acquiredCount(resp *kmsg.ShareFetchResponse) int64 {
	if resp.ErrorCode != 0 {
		return 0
	}
	var n int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return 0
			}
			for _, r := range p.AcquiredRecords {
				n += r.LastOffset - r.FirstOffset + 1
			}
		}
	}
	return n
}
