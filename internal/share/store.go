package share

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StateTopic is the internal, compacted topic holding share-partition state.
const StateTopic = "__share_group_state"

// DefaultStateTopicPartitions is Kafka's share.coordinator.state.topic.num.partitions.
const DefaultStateTopicPartitions = 50

// Key names one share partition: a group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Store keeps share-partition snapshots durably. Save must not return before the
// snapshot is durable (replicated): an acknowledgement is answered only then.
type Store interface {
	// Load returns the latest snapshot of k; false when there is none.
	Load(ctx context.Context, k Key) (Snapshot, bool, error)
	// Save makes s the latest snapshot of k.
	Save(ctx context.Context, k Key, s Snapshot) error
}

// ErrCorruptState: a state record does not decode.
var ErrCorruptState = errors.New("share: corrupt share-group state record")

// The records of StateTopic. All integers are big-endian; strings are int16
// length + bytes.
//
//	key    | int16 version=0 | string group | [16]byte topic id | int32 partition |
//	value  | int16 version=1 | int32 state epoch | int32 leader epoch |
//	       | int64 start offset | int32 batch count | batches |
//	value  | int16 version=0 | int32 leader epoch | int64 start offset |
//	       | int32 batch count | batches |      (written before state epochs; read
//	                                             as state epoch 0)
//	batch  | int64 first offset | int64 last offset | int8 state | int16 deliveries |
//
// The state epoch (Kafka's share coordinator stateEpoch) counts the
// initializations of the share partition: an offset reset writes the next one, and
// the share-partition leader writes the one it loaded. The leader epoch is the data
// partition's when the value was written. A load takes the latest value of the
// highest state epoch and, within it, of the highest leader epoch: a leader that
// writes late cannot roll back a reset made meanwhile, nor a deposed leader its
// successor's state (the topic is compacted: older values of a key go).
const (
	keyVersion   = 0
	stateVersion = 1
)

func encodeKey(k Key) []byte {
	b := binary.BigEndian.AppendUint16(nil, keyVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

func encodeSnapshot(s Snapshot) []byte {
	b := binary.BigEndian.AppendUint16(nil, stateVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(s.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Start))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Batches)))
	for _, sb := range s.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.State))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
	}
	return b
}

func decodeSnapshot(b []byte) (Snapshot, error) {
	const batchSize = 8 + 8 + 1 + 2
	if len(b) < 2 {
		return Snapshot{}, ErrCorruptState
	}
	var s Snapshot
	switch binary.BigEndian.Uint16(b) {
	case 0:
		b = b[2:]
	case 1:
		if len(b) < 6 {
			return Snapshot{}, ErrCorruptState
		}
		s.StateEpoch = int32(binary.BigEndian.Uint32(b[2:]))
		b = b[6:]
	default:
		return Snapshot{}, ErrCorruptState
	}
	if len(b) < 16 {
		return Snapshot{}, ErrCorruptState
	}
	s.LeaderEpoch, s.Start = int32(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:]))
	n := int(binary.BigEndian.Uint32(b[12:]))
	b = b[16:]
	if len(b) != n*batchSize {
		return Snapshot{}, ErrCorruptState
	}
	for range n {
		s.Batches = append(s.Batches, StateBatch{
			First:         int64(binary.BigEndian.Uint64(b)),
			Last:          int64(binary.BigEndian.Uint64(b[8:])),
			State:         RecordState(b[16]),
			DeliveryCount: int16(binary.BigEndian.Uint16(b[17:])),
		})
		b = b[batchSize:]
	}
	return s, nil
}

// statePartition is the partition of StateTopic holding k (FNV-1a of the key).
func statePartition(k Key, partitions int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write(encodeKey(k))
	return int32(h.Sum32() % uint32(partitions))
}

// TopicStore is the Store on StateTopic, reached like any topic with a Kafka client:
// a save is an acks=all produce to the key's partition (replicated before it is
// acknowledged), a load reads that partition from its start to its high watermark.
// Whoever leads the partition orders the writes, as a coordinator would.
type TopicStore struct {
	cl         *kgo.Client
	seeds      []string
	partitions int32
	ensureOnce sync.Mutex
	ensured    bool
}

// NewTopicStore returns a store writing through a client on seeds; the topic is
// created (compacted, partitions partitions) on first use.
func NewTopicStore(seeds []string, partitions int32) (*TopicStore, error) {
	if partitions <= 0 {
		partitions = DefaultStateTopicPartitions
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("strata-share-state"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		return nil, err
	}
	return &TopicStore{cl: cl, seeds: seeds, partitions: partitions}, nil
}

// Close closes the store's client.
func (s *TopicStore) Close() { s.cl.Close() }

// Kafka's share.coordinator.state.topic.replication.factor and
// share.coordinator.state.topic.min.isr. The state topic gets them capped to the
// brokers there are, as Strata's other internal topics: a one-node cluster gets
// replication factor 1 and min.insync.replicas 1, two nodes 2 and 2.
const (
	stateTopicReplicationFactor = 3
	stateTopicMinISR            = 2
)

// stateTopicReplication is the state topic's replication factor and
// min.insync.replicas with brokers brokers.
func stateTopicReplication(brokers int) (rf int16, minISR int) {
	rf = int16(max(min(stateTopicReplicationFactor, brokers), 1))
	return rf, min(stateTopicMinISR, int(rf))
}

// ensure creates the state topic once.
func (s *TopicStore) ensure(ctx context.Context) error {
	s.ensureOnce.Lock()
	defer s.ensureOnce.Unlock()
	if s.ensured {
		return nil
	}
	adm := kadm.NewClient(s.cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("share: listing brokers to create %s: %w", StateTopic, err)
	}
	rf, minISR := stateTopicReplication(len(meta.Brokers))
	compact, isr := "compact", strconv.Itoa(minISR)
	_, err = adm.CreateTopic(ctx, s.partitions, rf, map[string]*string{"cleanup.policy": &compact, "min.insync.replicas": &isr}, StateTopic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("share: creating %s: %w", StateTopic, err)
	}
	s.ensured = true
	return nil
}

// Save implements Store.
func (s *TopicStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	r := &kgo.Record{Topic: StateTopic, Partition: statePartition(k, s.partitions), Key: encodeKey(k), Value: encodeSnapshot(snap)}
	return s.cl.ProduceSync(ctx, r).FirstErr()
}

// Load implements Store: it reads the key's partition up to its high watermark with
// a client of its own.
func (s *TopicStore) Load(ctx context.Context, k Key) (Snapshot, bool, error) {
	if err := s.ensure(ctx); err != nil {
		return Snapshot{}, false, err
	}
	p := statePartition(k, s.partitions)
	end, err := s.endOffset(ctx, p)
	if err != nil {
		return Snapshot{}, false, err
	}
	if end <= 0 {
		return Snapshot{}, false, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds...), kgo.ClientID("strata-share-state-load"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{StateTopic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return Snapshot{}, false, err
	}
	defer cl.Close()
	want := encodeKey(k)
	var (
		found bool
		snap  Snapshot
		next  int64
	)
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Snapshot{}, false, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return Snapshot{}, false, fmt.Errorf("share: reading %s-%d: %w", StateTopic, p, ferr)
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if string(r.Key) != string(want) || derr != nil {
				return
			}
			if r.Value == nil {
				found, snap = false, Snapshot{}
				return
			}
			s, err := decodeSnapshot(r.Value)
			switch {
			case err != nil:
				derr = err
			case !found || s.newerThan(snap):
				snap, found = s, true
			}
		})
		if derr != nil {
			return Snapshot{}, false, derr
		}
	}
	return snap, found, nil
}

// endOffset is the high watermark of partition p of StateTopic, asked of that
// partition alone: another state partition without a leader must not stop loads
// of keys that do not live there. Retriable answers (no leader yet right after the
// topic is created or a leader change, or OFFSET_NOT_AVAILABLE from a new leader
// whose high watermark is not yet known) are retried until ctx ends.
func (s *TopicStore) endOffset(ctx context.Context, p int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = StateTopic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		resp, err := req.RequestWith(ctx, s.cl)
		if err == nil {
			err = fmt.Errorf("no answer for partition %d", p)
			if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
				ap := resp.Topics[0].Partitions[0]
				if err = kerr.ErrorForCode(ap.ErrorCode); err == nil {
					return ap.Offset, nil
				}
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("share: listing the end offset of %s-%d: %w", StateTopic, p, err)
		case <-t.C:
		}
	}
}
