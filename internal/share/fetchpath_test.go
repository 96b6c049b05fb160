package share

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/wait"
)

// acceptLast accepts the records of sm's last response with ShareAcknowledge.
func (sm *shareMember) acceptLast(t *testing.T, m *Manager) {
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &sm.group, &sm.name, sm.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = gcTopicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range sm.pending[1] {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, []int8{int8(Accept)}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.ShareAcknowledge(context.Background(), req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%s: acknowledgement: %+v", sm.name, resp)
	}
	sm.epoch++
	sm.pending[1] = nil
}

func mustFetch(t *testing.T, ctx context.Context, m *Manager, sm *shareMember) int {
	t.Helper()
	n, err := sm.fetch(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sharePart returns the group's share partition of the test topic.
func sharePart(m *Manager, group string) *sharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.shares[Key{Group: group, TopicID: gcTopicID, Partition: 0}]
}

func waiters(sp *sharePartition) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.waiters)
}

// TestAckWakesOneWaiter: with the in-flight window full and eight members
// long-polling, an acceptance that frees room for ten records wakes one member
// asking for ten, not all eight (each would take the share partition's lock in
// turn for one of them to acquire).
func TestAckWakesOneWaiter(t *testing.T) {
	m, rp := newTestManager(t, &memStore{})
	m.cfg.Defaults.MaxInFlight = 10
	appendRecords(t, rp, 100)
	holder := &shareMember{group: "g", name: "holder", maxRecords: 10}
	if n := mustFetch(t, context.Background(), m, holder); n != 10 {
		t.Fatalf("the holder acquired %d records, want 10", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sm := &shareMember{group: "g", name: fmt.Sprintf("w%d", i), maxRecords: 10, maxWait: 60_000}
			n, err := sm.fetch(ctx, m)
			if err != nil {
				t.Error(err)
			}
			got <- n
		}()
	}
	sp := sharePart(m, "g")
	wait.For(t, "eight fetches waiting", func() bool { return waiters(sp) == 8 })
	holder.acceptLast(t, m)
	sp.mu.Lock()
	woken := sp.woken
	sp.mu.Unlock()
	if woken != 1 {
		t.Errorf("%d fetches woken for ten records, want 1", woken)
	}
	select {
	case n := <-got:
		if n != 10 {
			t.Fatalf("the woken member acquired %d records, want 10", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no waiting member acquired the freed records")
	}
	if n := waiters(sp); n != 7 {
		t.Errorf("%d fetches still waiting, want 7", n)
	}
	cancel()
	wg.Wait()
}

// TestHeldFetchAnswersEarly: a fetch that finds the window full while its member
// holds records in it is answered after heldWait, not MaxWait (the member's
// acknowledgements may wait behind it in the client); a member holding nothing
// waits as asked.
func TestHeldFetchAnswersEarly(t *testing.T) {
	m, rp := newTestManager(t, &memStore{})
	m.cfg.Defaults.MaxInFlight = 10
	appendRecords(t, rp, 100)
	holder := &shareMember{group: "g", name: "holder", maxRecords: 10, maxWait: 60_000}
	if n := mustFetch(t, context.Background(), m, holder); n != 10 {
		t.Fatalf("the holder acquired %d records, want 10", n)
	}
	start := time.Now()
	if n := mustFetch(t, context.Background(), m, holder); n != 0 {
		t.Fatalf("the holder acquired %d more records in a full window", n)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the holder's fetch took %v, want about %v", d, heldWait)
	}
	if h := m.counts.held.Load(); h != 1 {
		t.Fatalf("held fetches: %d, want 1", h)
	}
	other := &shareMember{group: "g", name: "other", maxRecords: 10, maxWait: 300}
	start = time.Now()
	if n := mustFetch(t, context.Background(), m, other); n != 0 {
		t.Fatalf("another member acquired %d records in a full window", n)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a member holding nothing was answered after %v, before its MaxWait", d)
	}
	if e := m.counts.expired.Load(); e != 1 {
		t.Fatalf("expired fetches: %d, want 1", e)
	}
}

// TestFetchesShareOneRead: members acquiring one after another take their
// records from one read of the log, and each response holds exactly the batches
// of the records it acquired.
func TestFetchesShareOneRead(t *testing.T) {
	m, rp := newTestManager(t, &memStore{})
	appendRecords(t, rp, 400)
	for i := range 4 {
		sm := &shareMember{group: "g", name: fmt.Sprintf("m%d", i), maxRecords: 100}
		if n := mustFetch(t, context.Background(), m, sm); n != 100 {
			t.Fatalf("%s acquired %d records, want 100", sm.name, n)
		}
		p := sm.last.Topics[0].Partitions[0]
		if len(p.AcquiredRecords) != 1 {
			t.Fatalf("%s: acquired %+v, want one range", sm.name, p.AcquiredRecords)
		}
		a := p.AcquiredRecords[0]
		want := a.FirstOffset
		for rest := p.Records; len(rest) > 0; {
			n, err := batch.FrameSize(rest)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.ParseHeader(rest[:n])
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset != want {
				t.Fatalf("%s: batch at %d, want %d (acquired %d-%d)", sm.name, h.BaseOffset, want, a.FirstOffset, a.LastOffset)
			}
			want = h.LastOffset() + 1
			rest = rest[n:]
		}
		if want != a.LastOffset+1 {
			t.Fatalf("%s: batches end at %d, want %d", sm.name, want, a.LastOffset+1)
		}
	}
	if r := m.counts.reads.Load(); r != 1 {
		t.Fatalf("%d reads of the log for four acquisitions of 100 of its 400 records, want 1", r)
	}
}

// TestCachedAcquisitionHonoursMaxBytes: a ShareFetch's MaxBytes bounds the
// records of its answer (KIP-74: only a first batch larger than the limit
// passes it), as for a fetch that reads the log itself. A member asking for at
// most 1000 bytes, whose records come from the read cache another member's
// larger read filled, must not get tens of KiB.
func TestCachedAcquisitionHonoursMaxBytes(t *testing.T) {
	m, rp := newTestManager(t, &memStore{})
	appendBatches(t, rp, 400, 1, 100) // one-record batches of ~170 bytes
	// A takes one record; its read fills the cache with up to 64 KiB.
	a := openFetch("A")
	a.MaxRecords, a.MaxBytes = 1, 1<<20
	if resp := m.ShareFetch(context.Background(), a); len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("A: %+v", resp.Topics[0].Partitions[0])
	}
	b := openFetch("B")
	b.MaxRecords, b.MaxBytes = 100, 1000
	p := m.ShareFetch(context.Background(), b).Topics[0].Partitions[0]
	n := int64(0)
	for _, r := range p.AcquiredRecords {
		n += r.LastOffset - r.FirstOffset + 1
	}
	if len(p.Records) > 1000 || n == 0 {
		t.Errorf("B asked for at most 1000 bytes and got %d bytes of records (%d offsets acquired)", len(p.Records), n)
	}
	// A limit below one batch still gets that batch, so the member goes on.
	c := openFetch("C")
	c.MaxRecords, c.MaxBytes = 100, 10
	p = m.ShareFetch(context.Background(), c).Topics[0].Partitions[0]
	if len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].FirstOffset != p.AcquiredRecords[0].LastOffset {
		t.Errorf("C, asking for at most 10 bytes, acquired %+v, want one one-record batch", p.AcquiredRecords)
	}
	// D takes all but about ten records of the cache; E, wanting more records
	// than are left but no more bytes, is served from it without a read.
	sp := sharePart(m, "g")
	d := openFetch("D")
	d.MaxRecords, d.MaxBytes = int32(sp.cache.end()-sp.p.FetchOffset()-10), 1<<20
	m.ShareFetch(context.Background(), d)
	e := openFetch("E")
	e.MaxRecords, e.MaxBytes = 100, 1000
	if p := m.ShareFetch(context.Background(), e).Topics[0].Partitions[0]; len(p.AcquiredRecords) == 0 || len(p.Records) > 1000 {
		t.Errorf("E: %d bytes of records, acquired %+v", len(p.Records), p.AcquiredRecords)
	}
	if r := m.counts.reads.Load(); r != 1 {
		t.Errorf("%d reads of the log, want 1: the others are served from A's read", r)
	}
}

// TestCachedAcquisitionMaxBytesSkipsMarkers: a transaction marker is never sent,
// so it does not count against MaxBytes, and a marker first does not leave a
// fetch that allows less than two batches with nothing to acquire.
func TestCachedAcquisitionMaxBytesSkipsMarkers(t *testing.T) {
	m := NewManager(Config{Defaults: testGroupConfig()}, &memStore{}, nil, nil)
	t.Cleanup(m.Close)
	p := NewPartition(0)
	sp := &sharePartition{p: p}
	sp.cache = readCache{p: p, data: make([]byte, 500), spans: []span{
		{lo: 0, hi: 80, first: 0, last: 0, control: true},
		{lo: 80, hi: 280, first: 1, last: 1},
		{lo: 280, hi: 360, first: 2, last: 2, control: true},
		{lo: 360, hi: 500, first: 3, last: 3},
	}}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	a := m.acquireCachedLocked(sp, p, "m", time.Now(), testGroupConfig(), 0, 10, 100, false)
	if len(a.acquired) != 1 || a.acquired[0].First != 1 || a.acquired[0].Last != 1 || len(a.data) != 200 {
		t.Fatalf("acquired %+v in %d bytes, want offset 1 alone (its 200-byte batch)", a.acquired, len(a.data))
	}
	a = m.acquireCachedLocked(sp, p, "m", time.Now(), testGroupConfig(), p.FetchOffset(), 10, 140, false)
	if len(a.acquired) != 1 || a.acquired[0].First != 3 || len(a.data) != 140 {
		t.Fatalf("acquired %+v in %d bytes, want offset 3 (the marker at 2 archived)", a.acquired, len(a.data))
	}
}
