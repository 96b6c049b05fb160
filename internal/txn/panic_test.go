package txn

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// recovered runs f and returns what it panicked with, as the broker's
// connection recovers a handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderCoordinatorLockReleasesIt makes an EndTxn panic with the
// coordinator's mutex held, in Config.Overlap (the feature gate a
// transaction-version-2 end asks while it starts its completion, under the
// lock), and checks that later requests are still answered: a panicking
// request must not leave the coordinator locked for every transactional id.
// The id of the panicked request stays held by it (CONCURRENT_TRANSACTIONS)
// until its partition is loaded again.
func TestPanicUnderCoordinatorLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		id   string
		want *kerr.Error
	}{
		{name: "the same id", id: "tx", want: kerr.ConcurrentTransactions},
		{name: "another id", id: "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			overlap := func() bool {
				if armed.Load() {
					panic("feature gate failed")
				}
				return true
			}
			store := &memStore{}
			// Not closed in a t.Cleanup: on a coordinator left locked, Close
			// would hang the test binary instead of failing the test.
			c := New(Config{Partitions: 1, MaxTimeout: time.Minute, AbortInterval: time.Hour, Overlap: overlap}, store, &memMarkers{},
				func(context.Context) (int64, error) { return 1, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err := c.LoadPartitionAt(ctx, 0, 0, store.replay(0)); err != nil {
				t.Fatal(err)
			}
			pid, epoch, ec := c.InitProducerID(ctx, "tx", 10000, -1, -1)
			if ec != 0 {
				t.Fatalf("InitProducerID: %v", kerr.ErrorForCode(ec))
			}
			if ec := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("a", 0)}); ec != 0 {
				t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(ec))
			}

			armed.Store(true)
			if p := recovered(func() { c.EndTxn(ctx, "tx", pid, epoch, true, true) }); p == nil {
				t.Fatal("EndTxn did not panic")
			}
			armed.Store(false)

			answered := make(chan int16, 1)
			go func() {
				_, _, ec := c.InitProducerID(ctx, tc.id, 10000, -1, -1)
				answered <- ec
			}()
			select {
			case ec := <-answered:
				if ec != code(tc.want) {
					t.Errorf("InitProducerID(%q) after the panic: %v, want %v", tc.id, kerr.ErrorForCode(ec), tc.want)
				}
			case <-time.After(answerWithin):
				t.Fatalf("InitProducerID(%q) was not answered in %v: the panic left the coordinator locked", tc.id, answerWithin)
			}
			c.Close()
		})
	}
}
