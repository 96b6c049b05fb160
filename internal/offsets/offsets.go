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
//  4. Close, after the replica manager stops announcing leadership changes and
//     before the coordinator closes: it cancels the loads under way and waits for
//     their goroutines, which the Store owns.
//
// Store.mu is only taken in a function that releases it with defer, so a
// coordinator that panics under it (UnloadPartition, called from a leadership
// change) does not leave every later leadership change waiting for it.
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
	"github.com/strata-stream/strata/internal/storage"
)

// Coordinator is what the Store drives. LoadPartitionAt replays partition p
// as this broker leads it at leaderEpoch; the coordinator's writes for p then
// carry that epoch (Append), which fences them off once p is loaded again.
type Coordinator interface {
	LoadPartitionAt(ctx context.Context, p, leaderEpoch int32, records iter.Seq2[group.Record, error]) error
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
	loading map[int32]*loadJob // each partition's last load, until it returns
	closed  bool               // Close ran: no more loads start

	loaders sync.WaitGroup // one goroutine per load; Close waits for them
}

// New returns a Store on replicas.
func New(replicas *replica.Manager, logger *slog.Logger) *Store {
	return NewForTopic(group.OffsetsTopic, replicas, logger)
}

// NewForTopic returns a Store for another coordinator's internal topic, whose
// records are key/value pairs as well (__transaction_state).
func NewForTopic(topic string, replicas *replica.Manager, logger *slog.Logger) *Store {
	return &Store{topic: topic, replicas: replicas, log: logger, now: time.Now, loading: map[int32]*loadJob{}}
}

// loadJob is one load of a partition into the coordinator.
type loadJob struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the load has returned
}

// SetCoordinator sets the coordinator partitions are loaded into.
func (s *Store) SetCoordinator(c Coordinator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.coord = c
}

// coordinator is the coordinator partitions are loaded into.
func (s *Store) coordinator() Coordinator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coord
}

// Append implements group.OffsetStore: the records become one batch appended to
// partition p as leader, and Append returns the batch's base offset once the
// high-water mark covers it. leaderEpoch is the leader epoch the caller
// loaded the partition at (LoadPartitionAt): under any other the append is
// refused with group.ErrNotCoordinator, so that a write begun before a reload
// cannot land after the reload read the log (replica.AppendOpts.AtLeaderEpoch).
func (s *Store) Append(ctx context.Context, partition, leaderEpoch int32, records []group.Record) (int64, error) {
	return s.append(ctx, partition, leaderEpoch, records, batch.BuildOptions{})
}

// AppendUnacked appends records like Append but returns once they are in the
// leader's log, without waiting for them to be committed: they are committed
// with, or before, whatever is appended after them. They do not start an fsync
// of their own: the next one of the partition covers them, at the latest
// unackedFlushWithin after the append (storage.AppendHints.FlushWithin).
func (s *Store) AppendUnacked(ctx context.Context, partition, leaderEpoch int32, records []group.Record) error {
	_, _, err := s.appendLocal(partition, records, batch.BuildOptions{}, atEpoch(leaderEpoch, replica.AppendOpts{FlushWithin: unackedFlushWithin}))
	return err
}

// atEpoch is opts for a write of a coordinator that loaded the partition at
// leaderEpoch (replica.AppendOpts.AtLeaderEpoch).
func atEpoch(leaderEpoch int32, opts replica.AppendOpts) replica.AppendOpts {
	opts.AtLeaderEpoch, opts.LeaderEpoch = true, leaderEpoch
	return opts
}

// unackedFlushWithin bounds how long AppendUnacked's records wait for an fsync
// of the partition that others' appends start.
const unackedFlushWithin = 100 * time.Millisecond

func (s *Store) append(ctx context.Context, partition, leaderEpoch int32, records []group.Record, opts batch.BuildOptions) (int64, error) {
	guard, verified := replica.VerificationGuardFrom(ctx)
	p, res, err := s.appendLocal(partition, records, opts, atEpoch(leaderEpoch, replica.AppendOpts{Verify: verified, Guard: guard}))
	if err != nil {
		return 0, err
	}
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	err = p.WaitCommitted(ctx, res, timeout)
	if lostPartition(err) {
		return 0, fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	}
	return res.BaseOffset, err
}

// appendLocal appends records to the leader's log as one batch at ao's leader
// epoch; a transactional batch that was verified (a TxnOffsetCommit of an
// older client, see replica.WithVerificationGuard) is appended with its guard
// (ao.Verify, ao.Guard); ao.FlushWithin applies to the others.
func (s *Store) appendLocal(partition int32, records []group.Record, opts batch.BuildOptions, ao replica.AppendOpts) (*replica.Partition, replica.AppendResult, error) {
	var res replica.AppendResult
	p, err := s.replicas.Partition(s.topic, partition)
	if err != nil || !p.IsLeader() {
		return nil, res, fmt.Errorf("%w: %s-%d is not led here", group.ErrNotCoordinator, s.topic, partition)
	}
	recs := make([]batch.Record, len(records))
	for i, r := range records {
		recs[i] = batch.Record{Key: r.Key, Value: r.Value}
	}
	opts.FirstTimestamp = s.now().UnixMilli()
	b, err := batch.Build(opts, recs)
	if err != nil {
		return nil, res, err
	}
	if opts.Transactional {
		res, err = p.AppendAsCoordinator(b, ao)
	} else {
		ao.Verify, ao.Coordinator = false, true
		res, err = p.AppendWith(b, -1, ao)
	}
	switch {
	case errors.Is(err, replica.ErrRecordTooLarge):
		return nil, res, fmt.Errorf("%w: %v", group.ErrRecordTooLarge, err)
	case lostPartition(err):
		return nil, res, fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	case errors.Is(err, replica.ErrInvalidProducerEpoch):
		return nil, res, fmt.Errorf("%w: %v", group.ErrInvalidProducerEpoch, err)
	case err != nil:
		return nil, res, err
	}
	return p, res, nil
}

// lostPartition reports whether err means the partition can no longer be
// written here: not the leader, or its log failed (KAFKA_STORAGE_ERROR). Kafka
// 4.4's coordinator answers both NOT_COORDINATOR.
func lostPartition(err error) bool {
	return errors.Is(err, replica.ErrNotLeader) || errors.Is(err, storage.ErrLogFailed) || errors.Is(err, storage.ErrCorruptSegment)
}

// AppendTxn implements group.TxnOffsetStore: the records become one
// transactional batch of producer pid (a coordinator's write: no sequence
// number), appended as leader at leaderEpoch (as Append); it returns the
// batch's base offset once the high-water mark covers it.
// A batch of an epoch older than the producer's on the partition (a fenced
// zombie's) is refused with group.ErrInvalidProducerEpoch.
func (s *Store) AppendTxn(ctx context.Context, partition, leaderEpoch int32, pid int64, epoch int16, records []group.Record) (int64, error) {
	return s.append(ctx, partition, leaderEpoch, records, batch.BuildOptions{
		Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, Transactional: true,
	})
}

// LeadershipChanged is replica.Options.OnLeadership: it loads or unloads
// the partitions of the store's topic in the coordinator and ignores other topics.
func (s *Store) LeadershipChanged(p *replica.Partition, leader bool) {
	if p.Topic != s.topic {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.loading[p.Index]
	if prev != nil {
		prev.cancel()
	}
	if s.coord == nil || s.closed {
		return
	}
	if !leader {
		s.coord.UnloadPartition(p.Index)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	job := &loadJob{cancel: cancel, done: make(chan struct{})}
	s.loading[p.Index] = job
	s.loaders.Go(func() {
		defer s.loaded(p.Index, job)
		if prev != nil {
			// A cancelled load past its wait still unloads and loads the
			// partition in the coordinator: run after it, or it would
			// unload this one's partition midway and leave it unloaded
			// (NOT_COORDINATOR until the next leadership change).
			<-prev.done
		}
		s.load(ctx, p)
	})
}

// Close cancels the loads under way and waits for them to return. Leadership
// changes after Close load nothing.
func (s *Store) Close() {
	s.stopLoads()
	s.loaders.Wait()
}

// stopLoads cancels the loads under way and makes leadership changes load
// nothing more.
func (s *Store) stopLoads() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, job := range s.loading {
		job.cancel()
	}
}

// loadBackoff and maxLoadBackoff pace a load's retries of a wait for the
// high-water mark that failed.
const (
	loadBackoff    = 50 * time.Millisecond
	maxLoadBackoff = time.Second
)

// load waits for the partition's HWM to cover its log end as it was when this
// broker became leader, then replays the partition into the coordinator.
func (s *Store) load(ctx context.Context, p *replica.Partition) {
	coord := s.coordinator()
	end := p.LogEndOffset()
	for backoff := loadBackoff; ; backoff = min(2*backoff, maxLoadBackoff) {
		err := p.WaitHighWatermark(ctx, end, time.Minute)
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, replica.ErrNotLeader) {
			return
		}
		s.log.Warn("waiting to load group partition", "partition", p.Index, "err", err)
		// Too few in-sync replicas fails the wait at once (the high-water
		// mark is there, the ISR is not): asking again at once would spin.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		return // a later leadership change took over
	}
	// The coordinator refuses a partition it still holds from an earlier
	// leadership that was not unloaded in between; make sure it starts clean.
	coord.UnloadPartition(p.Index)
	if err := coord.LoadPartitionAt(ctx, p.Index, p.LeaderEpoch(), records(p)); err != nil && ctx.Err() == nil {
		s.log.Error("loading group partition", "partition", p.Index, "err", err)
	}
}

// loaded ends job, a load of partition index: a later load may start at
// once, and the partition has no load left unless a later one began.
func (s *Store) loaded(index int32, job *loadJob) {
	close(job.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loading[index] == job {
		delete(s.loading, index)
	}
}

// records replays a partition from its log start up to its high-water mark in
// log order, each record with its log offset, as Kafka's coordinator loader
// does: the records of a transactional batch come marked Txn with their
// producer id, and a transaction's marker as a Record with Txn and Marker set,
// Commit telling a commit from an abort; the coordinator holds the
// transaction's offset commits until then.
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
				break
			}
			data, err := res.Chunk.Bytes()
			next := res.Chunk.NextOffset
			res.Chunk.Release()
			if err != nil {
				yield(group.Record{}, err)
				return
			}
			for it := batch.NewIter(data); it.Next(); {
				h := it.Header()
				if h.Control() {
					typ, err := batch.ParseControl(it.Batch())
					if err != nil || !h.Transactional() {
						continue
					}
					marker := group.Record{Offset: h.BaseOffset, Txn: true, ProducerID: h.ProducerID, Marker: true, Commit: typ == batch.ControlCommit}
					if !yield(marker, nil) {
						return
					}
					continue
				}
				var out []group.Record
				err := batch.Records(it.Batch(), func(_ batch.Header, r batch.Record) error {
					rec := group.Record{Key: append([]byte(nil), r.Key...), Offset: h.BaseOffset + int64(r.OffsetDelta)}
					if r.Value != nil {
						rec.Value = append([]byte{}, r.Value...)
					}
					if h.Transactional() {
						rec.Txn, rec.ProducerID = true, h.ProducerID
					}
					out = append(out, rec)
					return nil
				})
				if err != nil {
					yield(group.Record{}, err)
					return
				}
				for _, rec := range out {
					if !yield(rec, nil) {
						return
					}
				}
			}
			offset = next
		}
	}
}
