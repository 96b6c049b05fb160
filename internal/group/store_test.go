package group

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// memStore is an in-memory OffsetStore: one record log per partition, each
// record with its log offset. Tests make it fail or block appends.
type memStore struct {
	mu      sync.Mutex
	logs    map[int32][]Record
	ends    map[int32]int64 // each log's next offset
	fail    error           // returned by appends while set
	once    bool            // fail is cleared once returned (failOnce)
	block   chan struct{}   // appends wait for it to close while set
	epochs  map[int32]int32 // the leader epoch each partition is led at (0 unless set): appends of another are refused
	jitter  bool            // appends pause up to 200µs before and after writing, as replication would
	appends int
	waiting int // appends waiting for block to close
}

func newMemStore() *memStore {
	return &memStore{logs: make(map[int32][]Record), ends: make(map[int32]int64)}
}

func (s *memStore) Append(ctx context.Context, p, epoch int32, recs []Record) (int64, error) {
	s.mu.Lock()
	block, jitter := s.block, s.jitter
	s.mu.Unlock()
	if jitter {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
	if block != nil {
		s.mu.Lock()
		s.waiting++
		s.mu.Unlock()
		select {
		case <-block:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	if led := s.epochs[p]; epoch != led {
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: a write of leader epoch %d, led at %d", ErrNotCoordinator, epoch, led)
	}
	if err := s.fail; err != nil {
		if s.once {
			s.fail, s.once = nil, false
		}
		s.mu.Unlock()
		return 0, err
	}
	s.appends++
	first := s.ends[p]
	for _, r := range recs {
		r.Key, r.Value, r.Offset = slices.Clone(r.Key), cloneNil(r.Value), s.ends[p]
		s.logs[p] = append(s.logs[p], r)
		s.ends[p]++
	}
	s.mu.Unlock()
	if jitter { // the acknowledgement arrives later than the write
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
	return first, nil
}

func cloneNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// failOnce makes the next append fail with err, and only that one.
func (s *memStore) failOnce(err error) {
	s.mu.Lock()
	s.fail, s.once = err, true
	s.mu.Unlock()
}

// setBlock makes appends wait until unblock.
func (s *memStore) setBlock() {
	s.mu.Lock()
	if s.block == nil {
		s.block = make(chan struct{})
	}
	s.mu.Unlock()
}

// blocked returns how many appends wait for unblock.
func (s *memStore) blocked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *memStore) unblock() {
	s.mu.Lock()
	if s.block != nil {
		close(s.block)
		s.block = nil
	}
	s.mu.Unlock()
}

// log returns a copy of partition p's records.
func (s *memStore) log(p int32) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs[p])
}

// records replays partition p as LoadPartition wants it.
func (s *memStore) records(p int32) iter.Seq2[Record, error] {
	recs := s.log(p)
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// loadAll loads every partition of c from s.
func loadAll(ctx context.Context, c *Coordinator, s *memStore) error {
	for p := range c.cfg.OffsetsTopicPartitions {
		if err := c.LoadPartitionAt(ctx, p, 0, s.records(p)); err != nil {
			return err
		}
	}
	return nil
}
