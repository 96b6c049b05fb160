package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/throttle"
)

// Transport carries a follower's requests to a leader broker: its fetches,
// and the ListOffsets that finds the leader's local log start when a fetch is
// answered OFFSET_MOVED_TO_TIERED_STORAGE.
type Transport interface {
	Fetch(ctx context.Context, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error)
	ListOffsets(ctx context.Context, leader int32, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error)
}

// Fetcher settings.
const (
	fetchMaxWait        = 500 * time.Millisecond
	fetchMaxBytes       = 16 << 20
	fetchPartitionBytes = 4 << 20
	fetchBackoff        = 100 * time.Millisecond
	fetchMaxBackoff     = time.Second
)

// fetcher replicates every partition this broker follows from one leader broker:
// one Fetch request at a time for all of them, in an incremental fetch session
// (fetchsession.go). Before each fetch it waits until what it appended is
// durable, so the fetch offset it reports to the leader is a promise that those
// records survive a power loss.
type fetcher struct {
	m      *Manager
	leader int32
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	parts map[*Partition]struct{}
	wake  chan struct{} // capacity 1: partitions were added

	// Used by run's goroutine only: the fetch session with the leader, and
	// the round being built (reused): the partitions fetched, those asked
	// for (want, with wantInfo alongside), and, built only for an answer
	// that names partitions (an idle session's names none), them by topic
	// name and partition and topic names by id (an answer from v13 on names
	// topics by id).
	session  followerSession
	round    []*Partition
	want     []sessionPartition
	wantInfo []fetched
	index    map[TopicPartition]int
	names    map[metadata.UUID]string
}

// fetched is a partition of a fetch round.
type fetched struct {
	p        *Partition
	epoch    int32            // the leader epoch the request was sent at
	offset   int64            // the fetch offset (the log end when it was sent)
	throttle *throttle.Bucket // non-nil: a throttled replica (follower.replication.throttled.replicas)
}

func newFetcher(m *Manager, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{m: m, leader: leader, cancel: cancel, done: make(chan struct{}), parts: map[*Partition]struct{}{}, wake: make(chan struct{}, 1)}
	go f.run(ctx)
	return f
}

func (f *fetcher) add(p *Partition) {
	f.addPart(p)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) addPart(p *Partition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parts[p] = struct{}{}
}

// remove stops fetching p; it reports whether the fetcher has no partitions left.
func (f *fetcher) remove(p *Partition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, p)
	return len(f.parts) == 0
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// snapshot appends the partitions to fetch this round to ps.
func (f *fetcher) snapshot(ps []*Partition) []*Partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.parts {
		// A failed log takes no appends, and its log end may hold records it
		// never made durable: it must not report that end to the leader.
		if !p.closed.Load() && !p.leader.Load() && p.log.Err() == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	backoff := fetchBackoff
	for ctx.Err() == nil {
		parts := f.snapshot(f.round[:0])
		if len(parts) < len(f.round) {
			clear(f.round[len(parts):]) // keep no removed partition alive
		}
		f.round = parts
		if len(parts) == 0 {
			select {
			case <-f.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		ok, throttled := f.fetchOnce(ctx, parts)
		if ok {
			backoff = fetchBackoff
			continue
		}
		wait := backoff
		if throttled > 0 {
			wait = throttled // nothing failed: every partition waits for the throttle
		} else {
			backoff = min(2*backoff, fetchMaxBackoff)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// fetchOnce sends one fetch for parts and applies the answer. It reports false
// when the fetch or any partition failed in a way that calls for a backoff, or
// when every partition was left out for the replication throttle: then
// throttled is how long until the throttle lets one through.
func (f *fetcher) fetchOnce(ctx context.Context, parts []*Partition) (ok bool, throttled time.Duration) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.nodeID
	req.ReplicaState.ID = f.m.nodeID
	req.ReplicaState.Epoch = f.m.brokerEpoch()
	req.MaxWaitMillis = int32(fetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	want, info := f.want[:0], f.wantInfo[:0]
	now := f.m.now()
	for _, p := range parts {
		// A throttled replica out of the ISR sits out fetches while the
		// follower's throttle is exceeded (its session forgets it meanwhile);
		// the others go on.
		bucket := f.m.followerThrottle(p)
		if bucket != nil && bucket.Exceeded(now) {
			d := throttleDelay(bucket, now)
			if throttled == 0 || d < throttled {
				throttled = d
			}
			continue
		}
		offset, lastEpoch := p.fetchPosition()
		// Report only durable data: the fetch offset tells the leader what this
		// replica holds, and the HWM (acks=all) counts on it. Each log's group
		// commit covers all of the last answer's appends at once.
		if p.groupCommit && p.log.DurableOffset() < offset {
			if err := p.log.WaitDurable(ctx, offset-1); err != nil {
				if ctx.Err() != nil {
					return false, 0
				}
				f.m.log.Warn("follower fsync failed: no longer fetching the partition until a restart", "topic", p.Topic, "partition", p.Index, "err", err)
				continue
			}
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Index
		rp.CurrentLeaderEpoch = p.leaderEpoch.Load()
		rp.FetchOffset = offset
		rp.LastFetchedEpoch = lastEpoch
		rp.LogStartOffset = p.FetchLogStart(false) // what it serves consumers from (KIP-392)
		rp.PartitionMaxBytes = fetchPartitionBytes
		want = append(want, sessionPartition{key: sessionKey{p.Topic, p.TopicID, p.Index}, req: rp})
		info = append(info, fetched{p, rp.CurrentLeaderEpoch, offset, bucket})
	}
	f.want, f.wantInfo = want, info
	if len(want) == 0 {
		return false, throttled
	}
	f.session.build(req, want)
	resp, err := f.m.opts.Transport.Fetch(ctx, f.leader, req)
	if !f.session.answered(resp, err) {
		if err != nil {
			if ctx.Err() == nil {
				f.m.log.Debug("replica fetch failed", "leader", f.leader, "err", err)
			}
		} else {
			f.m.log.Debug("replica fetch refused", "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
		}
		return false, 0
	}
	healthy := true
	if len(resp.Topics) > 0 {
		f.indexWant()
	}
	for _, rt := range resp.Topics {
		name := rt.Topic
		if name == "" {
			name = f.names[rt.TopicID]
		}
		for _, rp := range rt.Partitions {
			i, ok := f.index[TopicPartition{name, rp.Partition}]
			if !ok {
				continue
			}
			fp := info[i]
			p := fp.p
			if fp.throttle != nil {
				fp.throttle.Record(len(rp.RecordBatches), f.m.now())
			}
			if err := f.apply(ctx, p, fp.epoch, fp.offset, &rp); err != nil {
				healthy = false
				level := slog.LevelDebug
				if errors.Is(err, storage.ErrLogFailed) {
					level = slog.LevelWarn // the partition stops fetching: see snapshot
				}
				f.m.log.Log(ctx, level, "replica fetch partition error", "topic", p.Topic, "partition", p.Index, "leader", f.leader, "err", err)
			}
		}
	}
	return healthy, 0
}

// indexWant indexes the round's partitions, for an answer that names some.
func (f *fetcher) indexWant() {
	if f.index == nil {
		f.index, f.names = map[TopicPartition]int{}, map[metadata.UUID]string{}
	}
	clear(f.index)
	clear(f.names)
	for i, w := range f.want {
		f.index[TopicPartition{w.key.topic, w.key.partition}] = i
		f.names[w.key.topicID] = w.key.topic
	}
}

// apply handles one partition of a fetch response. Nothing changes if p no
// longer follows at epoch, the leader epoch of the request, from the log end
// from, its fetch offset (followingFrom).
func (f *fetcher) apply(ctx context.Context, p *Partition, epoch int32, from int64, rp *kmsg.FetchResponseTopicPartition) error {
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		leo := p.log.LogEndOffset()
		end, err := p.applyDiverging(epoch, from, Diverging{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset})
		f.m.log.Info("truncating divergent follower log", "topic", p.Topic, "partition", p.Index,
			"log_end_offset", leo, "truncate_to", end, "leader_epoch", rp.DivergingEpoch.Epoch)
		return err
	}
	switch code := rp.ErrorCode; code {
	case 0:
		if err := p.appendFromLeader(epoch, from, rp.RecordBatches, rp.HighWatermark); err != nil {
			return err
		}
		return p.followLogStart(epoch, rp.LogStartOffset)
	case kerr.OffsetOutOfRange.Code:
		restart, to, err := p.applyOutOfRange(epoch, from, rp.LogStartOffset, rp.HighWatermark)
		f.m.log.Info("follower fetch out of range: truncating, or starting over when behind the leader's log start", "topic", p.Topic, "partition", p.Index,
			"log_end_offset", from, "leader_log_start_offset", rp.LogStartOffset, "leader_high_watermark", rp.HighWatermark, "start_over", restart, "to", to)
		return err
	case kerr.OffsetMovedToTieredStorage.Code:
		leaderStart, err := f.leaderLocalStart(ctx, p, epoch)
		if err != nil {
			return err
		}
		if leaderStart <= from {
			return fmt.Errorf("leader %d answered offset %d moved to tiered storage, but its local log starts at %d", f.leader, from, leaderStart)
		}
		aux, err := p.remoteAuxState(ctx, leaderStart)
		if err != nil {
			return err
		}
		if aux.lost != nil {
			f.m.log.Warn("remote producer snapshot unusable: the follower starts over without the producer state below it", "topic", p.Topic, "partition", p.Index,
				"start_offset", aux.start, "err", aux.lost)
		}
		f.m.log.Info("follower behind the leader's local log start: starting over there", "topic", p.Topic, "partition", p.Index,
			"log_end_offset", from, "leader_local_log_start_offset", leaderStart, "start_offset", aux.start, "producers_restored", aux.producers != nil)
		return p.restartAt(epoch, from, aux)
	default:
		return kerr.ErrorForCode(code)
	}
}

// leaderLocalStart asks the leader for p's local log start at leader epoch
// epoch (ListOffsets earliest-local, as Kafka's TierStateMachine does).
func (f *fetcher) leaderLocalStart(ctx context.Context, p *Partition, epoch int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.nodeID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = p.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p.Index, epoch, EarliestLocalTimestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := f.m.opts.Transport.ListOffsets(ctx, f.leader, req)
	if err != nil {
		return -1, err
	}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if st.Topic != p.Topic || sp.Partition != p.Index {
				continue
			}
			if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
				return -1, err
			}
			return sp.Offset, nil
		}
	}
	return -1, fmt.Errorf("leader %d's ListOffsets answer does not name the partition", f.leader)
}
