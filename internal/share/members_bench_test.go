package share

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/wait"
)

// memStore keeps each key's latest snapshot in memory; saves do not wait.
type memStore struct {
	mu    sync.Mutex
	snaps map[Key]Snapshot
	saves atomic.Int64 // Save calls
}

func (s *memStore) Initialize(_ context.Context, k Key, stateEpoch int32, start int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snaps == nil {
		s.snaps = make(map[Key]Snapshot)
	}
	if _, ok := s.snaps[k]; !ok {
		s.snaps[k] = Snapshot{StateEpoch: stateEpoch, Start: start}
	}
	return nil
}

func (s *memStore) Load(_ context.Context, k Key, _ int32) (Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snaps[k]
	return snap, ok, nil
}

func (s *memStore) Save(_ context.Context, k Key, snap Snapshot) error {
	s.saves.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snaps == nil {
		s.snaps = make(map[Key]Snapshot)
	}
	s.snaps[k] = snap
	return nil
}

// appendBatches appends n batches of perBatch records of size bytes each and
// waits for the high watermark.
func appendBatches(t testing.TB, rp *replica.Partition, n, perBatch, size int) {
	t.Helper()
	recs := make([]batchtest.Record, perBatch)
	for i := range recs {
		recs[i].Value = make([]byte, size)
	}
	want := rp.HighWatermark() + int64(n*perBatch)
	for range n {
		if _, err := rp.Append(batchtest.Build(batchtest.Options{Records: recs}), 1); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the high watermark", func() bool { return rp.HighWatermark() >= want })
}

// shareMember fetches like franz-go's share consumer: each ShareFetch carries
// the acceptances of the records two responses back (the client sends the next
// fetch as soon as the application takes a poll's records, and the application
// accepts them only at its next poll), asks for maxRecords records (500 when 0)
// and waits up to maxWait ms (500 when 0).
type shareMember struct {
	group, name         string
	maxRecords, maxWait int32
	epoch               int32
	pending             [2][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	last                *kmsg.ShareFetchResponse // the last response
}

func (sm *shareMember) fetch(ctx context.Context, m *Manager) (int, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID = 1, &sm.group, &sm.name
	req.ShareSessionEpoch = sm.epoch
	req.MaxWaitMillis, req.MaxRecords, req.MaxBytes = cmp.Or(sm.maxWait, 500), cmp.Or(sm.maxRecords, 500), 50<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = gcTopicID
	rpart := kmsg.NewShareFetchRequestTopicPartition()
	if sm.epoch > 0 {
		for _, a := range sm.pending[0] {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, []int8{int8(Accept)}
			rpart.AcknowledgementBatches = append(rpart.AcknowledgementBatches, ab)
		}
	}
	if sm.epoch == 0 || len(rpart.AcknowledgementBatches) > 0 {
		rt.Partitions = append(rt.Partitions, rpart)
		req.Topics = append(req.Topics, rt)
	}
	resp := m.ShareFetch(ctx, req)
	sm.last = resp
	if ctx.Err() != nil {
		return 0, nil
	}
	if resp.ErrorCode != 0 {
		return 0, fmt.Errorf("%s: share fetch error %d", sm.name, resp.ErrorCode)
	}
	sm.epoch++
	sm.pending[0], sm.pending[1] = sm.pending[1], nil
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				return 0, fmt.Errorf("%s: partition error %d, acknowledgement error %d", sm.name, p.ErrorCode, p.AcknowledgeErrorCode)
			}
			sm.pending[1] = append(sm.pending[1], p.AcquiredRecords...)
			for _, a := range p.AcquiredRecords {
				n += int(a.LastOffset - a.FirstOffset + 1)
			}
		}
	}
	return n, nil
}

// consumeShared has members members of a new group read the partition's total
// records, fetching as shareMember does, until every record was acquired once.
func consumeShared(ctx context.Context, m *Manager, group string, members int, total int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acquired atomic.Int64
	errs := make(chan error, members)
	for i := range members {
		go func() {
			sm := &shareMember{group: group, name: fmt.Sprintf("m%d", i)}
			for ctx.Err() == nil {
				n, err := sm.fetch(ctx, m)
				if err != nil {
					errs <- err
					return
				}
				if acquired.Add(int64(n)) >= total {
					cancel()
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range members {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	if first == nil && acquired.Load() != total {
		return fmt.Errorf("acquired %d records, want %d (each once)", acquired.Load(), total)
	}
	return first
}

// BenchmarkShareMembers: 1, 4 and 16 members share one partition of 20,000 1 KiB
// records (batches of 100), fetching and accepting as franz-go does, with the
// share group defaults (2,000 records in flight). One op is one new group
// reading the whole partition. Besides time and allocations, it reports counts
// a busy machine does not change much: records per fetch, log reads and bytes
// read per record, wake-ups of long-polling fetches per fetch (and those that
// found nothing), fetches that waited their whole MaxWait, fetches answered
// after heldWait, allocations per fetch, and state saves per record (with a
// store that answers at once, so fewer saves share a write than at a real
// share coordinator).
func BenchmarkShareMembers(b *testing.B) {
	const batches, perBatch, size = 200, 100, 1024
	store := &memStore{}
	m, rp := newTestManager(b, store)
	appendBatches(b, rp, batches, perBatch, size)
	total := int64(batches * perBatch)
	for _, members := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			b.ReportAllocs()
			m.counts = fetchCounts{}
			store.saves.Store(0)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			i := 0
			for b.Loop() {
				i++
				if err := consumeShared(context.Background(), m, fmt.Sprintf("g%d-%d", members, i), members, total); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			c := &m.counts
			fetches := float64(c.fetches.Load())
			records := float64(c.acquired.Load())
			b.ReportMetric(records/fetches, "records/fetch")
			b.ReportMetric(float64(c.reads.Load())/fetches, "reads/fetch")
			b.ReportMetric(float64(c.readBytes.Load())/records, "read-B/record")
			b.ReportMetric(float64(c.wakeups.Load())/fetches, "wakeups/fetch")
			b.ReportMetric(float64(c.idle.Load())/fetches, "idle-wakeups/fetch")
			b.ReportMetric(float64(c.expired.Load())/fetches, "expired/fetch")
			b.ReportMetric(float64(c.held.Load())/fetches, "held/fetch")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/fetches, "allocs/fetch")
			b.ReportMetric(fetches/float64(i), "fetches/op")
			b.ReportMetric(float64(store.saves.Load())/records, "saves/record")
		})
	}
}
