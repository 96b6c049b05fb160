package share

import (
	"testing"
	"time"
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
