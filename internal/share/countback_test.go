package share

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// failingStore is memStore whose saves fail while fail is set (the share
// coordinator lost power: the write times out and was not made durable), or,
// with landed set too, fail after the write was made durable (the node saving
// lost power: the write reached the coordinator, its answer was lost).
type failingStore struct {
	memStore
	fail, landed atomic.Bool
}

func (s *failingStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	if !s.fail.Load() {
		return s.memStore.Save(ctx, k, snap)
	}
	if s.landed.Load() {
		if err := s.memStore.Save(ctx, k, snap); err != nil {
			return err
		}
		return context.Canceled
	}
	return errors.New("share coordinator unavailable")
}

// fakeClock is a Config.Now a test moves by hand (lock expiry).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// deliver opens member's share session and returns the delivery count of the one
// record it acquired, or 0 when it acquired none.
func deliver(t *testing.T, m *Manager, member string) int16 {
	t.Helper()
	req := openFetch(member)
	req.MaxWaitMillis = 0
	resp := m.ShareFetch(context.Background(), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%s: share fetch: %+v", member, resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("%s: share fetch: partition code %d", member, p.ErrorCode)
	}
	if len(p.AcquiredRecords) == 0 {
		return 0
	}
	if a := p.AcquiredRecords[0]; len(p.AcquiredRecords) != 1 || a.FirstOffset != 0 || a.LastOffset != 0 {
		t.Fatalf("%s: want offset 0 alone, got %+v", member, p.AcquiredRecords)
	}
	return p.AcquiredRecords[0].DeliveryCount
}

// TestDeliveryCountNeverGoesBack: a record is delivered several times, its lock
// expiring in between, then the state is reloaded: after a failed save (the
// in-memory state is dropped) or by a new leader (a failover). The next delivery
// must have a higher count than every earlier one, and a record delivered the
// limit times is never delivered again. When acquisitions were not saved, the
// reload went back to the state saved before the first delivery (the scripted
// share chaos run: counts 3, 2, 2 then 2, 1, 1) and the record went out a fourth
// time with a limit of 3.
func TestDeliveryCountNeverGoesBack(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int16
		deliveries int16 // before the reload
		failover   bool  // a new leader loads; else a save fails
		want       int16 // the count of the delivery after the reload; 0: none
	}{
		{name: "failed save below the limit", limit: 5, deliveries: 2, want: 3},
		{name: "failed save at the limit", limit: 3, deliveries: 3, want: 0},
		{name: "failover below the limit", limit: 5, deliveries: 2, failover: true, want: 3},
		{name: "failover at the limit", limit: 3, deliveries: 3, failover: true, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingStore{}
			clock := &fakeClock{now: time.Unix(1_000_000, 0)}
			cfg := testGroupConfig()
			cfg.DeliveryLimit = tc.limit
			parts, rp := newTestParts(t, 1)
			m := NewManager(Config{Defaults: cfg, Now: clock.Now}, store, parts, nil)
			t.Cleanup(m.Close)
			appendRecords(t, rp, 1)

			for i := range tc.deliveries {
				if i > 0 {
					// The last lock expires; the last member's session stays
					// live (an idle group's next session reloads the state).
					clock.advance(cfg.LockDuration)
				}
				if got := deliver(t, m, fmt.Sprintf("m%d", i)); got != i+1 {
					t.Fatalf("delivery %d: count %d", i+1, got)
				}
			}
			if tc.failover {
				parts2, rp2 := newTestParts(t, 2)
				appendRecords(t, rp2, 1)
				m = NewManager(Config{Defaults: cfg, Now: clock.Now}, store, parts2, nil)
				t.Cleanup(m.Close)
			} else {
				// The last member's release fails to save: the state is
				// dropped and reloaded.
				store.fail.Store(true)
				if code := acknowledgeAs(m, fmt.Sprintf("m%d", tc.deliveries-1), 0, Release); code != kerr.UnknownServerError.Code {
					t.Fatalf("a release whose save failed: code %d, want UNKNOWN_SERVER_ERROR", code)
				}
				store.fail.Store(false)
			}
			if got := deliver(t, m, "after"); got != tc.want {
				t.Fatalf("after %d deliveries and a reload (limit %d): delivered at count %d, want %d (0: not at all)",
					tc.deliveries, tc.limit, got, tc.want)
			}
		})
	}
}
