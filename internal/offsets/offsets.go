// Package offsets keeps consumer-group state in the internal topic
// __consumer_offsets, on the same replica layer as every other topic: it is the
// group coordinator's OffsetStore (appends with acks=all semantics) and it hands
// the topic's partitions to the coordinator as this broker gains and loses their
// leadership (the coordinator of a group is the leader of partition
// PartitionFor(group) of __consumer_offsets, as in Kafka). The transaction
// coordinator uses the same machinery on __transaction_state (NewForTopic).
//
// Calling protocol:
//  1. New(replicas, logger); give the Store to group.New as its OffsetStore.
//  2. SetCoordinator(coordinator), then pass LeadershipChanged to the replica
//     manager (replica.Options.OnLeadership).
//  3. On becoming leader of partition p the Store waits until the high-water mark
//     covers what the log held at that moment (everything the previous leader may
//     have acknowledged), replays the partition into the coordinator, and from then
//     on the coordinator answers for its groups. On losing leadership it unloads p.
package offsets

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/replica"
)

// Coordinator is what the Store drives.
type Coordinator interface {
	LoadPartition(ctx context.Context, p int32, records iter.Seq2[group.Record, error]) error
	UnloadPartition(p int32)
}

// Store is the group coordinator's view of __consumer_offsets.
type Store struct {
	topic    string
	replicas *replica.Manager
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	coord   Coordinator
	loading map[int32]context.CancelFunc // partitions being loaded, by partition
}

// New returns a Store on replicas.
func New(replicas *replica.Manager, logger *slog.Logger) *Store {
	return NewForTopic(group.OffsetsTopic, replicas, logger)
}

// NewForTopic returns a Store for another coordinator's internal topic, whose
// records are key/value pairs as well (__transaction_state).
func NewForTopic(topic string, replicas *replica.Manager, logger *slog.Logger) *Store {
	return &Store{topic: topic, replicas: replicas, log: logger, now: time.Now, loading: map[int32]context.CancelFunc{}}
}

// SetCoordinator sets the coordinator partitions are loaded into.
func (s *Store) SetCoordinator(c Coordinator) {
	s.mu.Lock()
	s.coord = c
	s.mu.Unlock()
}

// Append implements group.OffsetStore: the records become one batch appended to
// partition p as leader, and Append returns once the high-water mark covers it.
func (s *Store) Append(ctx context.Context, partition int32, records []group.Record) error {
	p, err := s.replicas.Partition(s.topic, partition)
	if err != nil || !p.IsLeader() {
		return fmt.Errorf("%w: %s-%d is not led here", group.ErrNotCoordinator, s.topic, partition)
	}
	recs := make([]batch.Record, len(records))
	for i, r := range records {
		recs[i] = batch.Record{Key: r.Key, Value: r.Value}
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: s.now().UnixMilli()}, recs)
	if err != nil {
		return err
	}
	res, err := p.Append(b, -1)
	switch {
	case errors.Is(err, replica.ErrRecordTooLarge):
		return fmt.Errorf("%w: %v", group.ErrRecordTooLarge, err)
	case errors.Is(err, replica.ErrNotLeader):
		return fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	case err != nil:
		return err
	}
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	err = p.WaitHighWatermark(ctx, res.LastOffset+1, timeout)
	if errors.Is(err, replica.ErrNotLeader) {
		return fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	}
	return err
}

// LeadershipChanged is replica.Options.OnLeadership: it loads or unloads
// the partitions of the store's topic in the coordinator and ignores other topics.
func (s *Store) LeadershipChanged(p *replica.Partition, leader bool) {
	if p.Topic != s.topic {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.loading[p.Index]; ok {
		cancel()
		delete(s.loading, p.Index)
	}
	if s.coord == nil {
		return
	}
	if !leader {
		s.coord.UnloadPartition(p.Index)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.loading[p.Index] = cancel
	go s.load(ctx, p)
}

// load waits for the partition's HWM to cover its log end as it was when this
// broker became leader, then replays the partition into the coordinator.
func (s *Store) load(ctx context.Context, p *replica.Partition) {
	defer func() {
		s.mu.Lock()
		if s.loading[p.Index] != nil && ctx.Err() == nil {
			delete(s.loading, p.Index)
		}
		s.mu.Unlock()
	}()
	s.mu.Lock()
	coord := s.coord
	s.mu.Unlock()
	end := p.LogEndOffset()
	for {
		err := p.WaitHighWatermark(ctx, end, time.Minute)
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, replica.ErrNotLeader) {
			return
		}
		s.log.Warn("waiting to load group partition", "partition", p.Index, "err", err)
	}
	// The coordinator refuses a partition it still holds from an earlier
	// leadership that was not unloaded in between; make sure it starts clean.
	coord.UnloadPartition(p.Index)
	if err := coord.LoadPartition(ctx, p.Index, records(p)); err != nil && ctx.Err() == nil {
		s.log.Error("loading group partition", "partition", p.Index, "err", err)
	}
}

// records replays a partition from its log start up to its high-water mark.
func records(p *replica.Partition) iter.Seq2[group.Record, error] {
	return func(yield func(group.Record, error) bool) {
		offset := p.LogStartOffset()
		for offset < p.HighWatermark() {
			res, err := p.Read(offset, 1<<20, replica.ReadUncommitted)
			if err != nil {
				yield(group.Record{}, err)
				return
			}
			if res.Chunk.Size == 0 {
				return
			}
			data, err := res.Chunk.Bytes()
			next := res.Chunk.NextOffset
			res.Chunk.Release()
			if err != nil {
				yield(group.Record{}, err)
				return
			}
			stop := false
			for it := batch.NewIter(data); it.Next() && !stop; {
				h := it.Header()
				if h.Control() {
					continue
				}
				err := batch.Records(it.Batch(), func(_ batch.Header, r batch.Record) error {
					rec := group.Record{Key: append([]byte(nil), r.Key...)}
					if r.Value != nil {
						rec.Value = append([]byte{}, r.Value...)
					}
					if !yield(rec, nil) {
						stop = true
						return errStop
					}
					return nil
				})
				if err != nil && !errors.Is(err, errStop) {
					yield(group.Record{}, err)
					return
				}
			}
			if stop {
				return
			}
			offset = next
		}
	}
}

var errStop = errors.New("stop")
