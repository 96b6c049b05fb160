package share

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/wait"
)

// TestLag: KIP-1226's lag as Kafka 4.4 answers it (interop/cmd/sharecompare):
// the offsets from the start to the high watermark whose delivery is not complete,
// negative when the start was altered past the high watermark.
func TestLag(t *testing.T) {
	for _, tc := range []struct {
		name string
		sum  Summary
		hwm  int64
		lag  int64
	}{
		{"nothing in flight", Summary{Start: 10, LeaderEpoch: 2}, 15, 5},
		{"done records past the start are not lag", Summary{Start: 10, Done: 4}, 20, 6},
		{"high watermark below the start", Summary{Start: 500}, 10, -490},
	} {
		if got := tc.sum.Lag(tc.hwm); got != tc.lag {
			t.Errorf("%s: lag %d, want %d", tc.name, got, tc.lag)
		}
	}
}

// TestCountDeliveryComplete: the offsets at or past the start that are
// acknowledged or archived (KIP-1226's DeliveryCompleteCount).
func TestCountDeliveryComplete(t *testing.T) {
	batches := []StateBatch{
		{First: 8, Last: 11, State: Acknowledged},
		{First: 12, Last: 14, State: Acknowledged},
		{First: 15, Last: 15, State: Archived},
		{First: 16, Last: 16, State: Archiving},
		{First: 17, Last: 18, State: Available, DeliveryCount: 1},
	}
	if got := CountDeliveryComplete(10, batches); got != 6 {
		t.Errorf("CountDeliveryComplete = %d, want 6 (10-15)", got)
	}
	p := Restore(Snapshot{Start: 10, Batches: batches})
	if got := p.Snapshot().DeliveryComplete; got != 0 {
		t.Errorf("a restored partition's snapshot: %d complete, want 0 (the start moved past the done offsets)", got)
	}
}

func TestDecodeKey(t *testing.T) {
	k := Key{Group: "g-1", TopicID: [16]byte{1, 2, 3, 15: 9}, Partition: 70000}
	got, ok := decodeKey(encodeKey(k))
	if !ok || got != k {
		t.Fatalf("decodeKey(encodeKey(%+v)) = %+v, %v", k, got, ok)
	}
	for _, b := range [][]byte{nil, {0, 1, 0, 0}, encodeKey(k)[:10], append(encodeKey(k), 0)} {
		if _, ok := decodeKey(b); ok {
			t.Errorf("decodeKey(%x) accepted", b)
		}
	}
}

// TestUnloadGroupIfIdle: a group's share partitions are dropped once no other
// member of the group has a live share session on the node (one used within the
// lock duration), and not before; other groups' stay.
func TestUnloadGroupIfIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewManager(Config{Now: func() time.Time { return now }}, nil, nil, nil)
	defer m.Close()
	loaded := func(k Key) *sharePartition {
		sp := &sharePartition{key: k, p: NewPartition(5)}
		m.mu.shares[k] = sp
		return sp
	}
	a, b := loaded(Key{Group: "a", Partition: 0}), loaded(Key{Group: "b", Partition: 0})
	m.mu.sessions[sessionKey{"a", "m1"}] = &session{used: now.Add(-29 * time.Second)}
	m.mu.sessions[sessionKey{"a", "m2"}] = &session{used: now}
	m.unloadGroupIfIdle("a", "m2")
	if a.p == nil {
		t.Fatal("unloaded while another member's session is live")
	}
	now = now.Add(2 * time.Second) // m1's session is now unused for longer than the 30s lock
	m.unloadGroupIfIdle("a", "m2")
	if a.p != nil || b.p == nil {
		t.Fatalf("after the last live session: group a loaded=%v, group b loaded=%v", a.p != nil, b.p != nil)
	}
}

// TestIdleUnloadKeepsLongPollLock: a member's share fetch long-polls and
// acquires a record only when it arrives, well after the request started (its
// session's last use). Its acquisition lock runs from the acquisition, so it is
// still held one lock duration after the session was last used. Another member
// opening a session then must not get the record (Kafka keeps the lock until it
// expires), and the holder's acceptance must succeed.
func TestIdleUnloadKeepsLongPollLock(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	cfg := testGroupConfig() // one-minute locks
	parts, rp := newTestParts(t, 1)
	m := NewManager(Config{Defaults: cfg, Now: clock.Now}, &memStore{}, parts, nil)
	t.Cleanup(m.Close)

	// A opens its session and long-polls on an empty partition.
	got := make(chan int64, 1)
	go func() {
		req := openFetch("A")
		req.MaxWaitMillis = 20_000
		resp := m.ShareFetch(context.Background(), req)
		p := resp.Topics[0].Partitions[0]
		if len(p.AcquiredRecords) != 1 {
			got <- -1
			return
		}
		got <- p.AcquiredRecords[0].FirstOffset
	}()
	wait.For(t, "A's fetch waiting", func() bool {
		sp := sharePart(m, "g")
		return sp != nil && waiters(sp) == 1
	})
	clock.advance(50 * time.Second) // A's long poll goes on
	appendRecords(t, rp, 1)
	var off int64
	select {
	case off = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("A's fetch never acquired the new record")
	}
	if off != 0 {
		t.Fatalf("A acquired offset %d, want 0", off)
	}
	// 20s later A's lock (taken at +50s for a minute) has 40s to run; A's
	// session was last used 70s ago.
	clock.advance(20 * time.Second)
	req := openFetch("B")
	req.MaxWaitMillis = 0
	resp := m.ShareFetch(context.Background(), req)
	if p := resp.Topics[0].Partitions[0]; len(p.AcquiredRecords) > 0 {
		t.Errorf("B acquired %+v while A still holds offset 0 under a live lock (delivered to two members at once)", p.AcquiredRecords)
	}
	if code := accept(m, "A", 0); code != 0 {
		t.Errorf("A's acceptance of offset 0 within its lock: code %d (%v), want 0", code, kerr.ErrorForCode(code))
	}
}
