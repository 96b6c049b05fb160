package share

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
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

// Store keeps share-partition snapshots durably, at the share coordinator
// (coordinator.go). Save must not return before the snapshot is durable
// (replicated): an acknowledgement is answered only then. Fenced writes and reads
// fail with kerr.FencedStateEpoch or kerr.FencedLeaderEpoch.
type Store interface {
	// Load returns the latest snapshot of k for the share-partition leader of the
	// data partition's leaderEpoch, fencing the writes of older leaders; false
	// when there is none.
	Load(ctx context.Context, k Key, leaderEpoch int32) (Snapshot, bool, error)
	// Initialize starts state epoch stateEpoch of k at start, nothing in flight;
	// kerr.FencedStateEpoch when k has state of that epoch or a newer one.
	Initialize(ctx context.Context, k Key, stateEpoch int32, start int64) error
	// Save makes s the latest snapshot of k.
	Save(ctx context.Context, k Key, s Snapshot) error
}

// ErrCorruptState: a state record does not decode.
var ErrCorruptState = errors.New("share: corrupt share-group state record")

// The records of StateTopic. All integers are big-endian; strings are int16
// length + bytes.
//
//	key    | int16 version=0 | string group | [16]byte topic id | int32 partition |
//	value  | int16 version=2 | int32 state epoch | int32 leader epoch |
//	       | int64 start offset | int32 delivery complete count |
//	       | int32 batch count | batches |
//	value  | int16 version=1 | int32 state epoch | int32 leader epoch |
//	       | int64 start offset | int32 batch count | batches |
//	                                            (written before delivery complete
//	                                             counts; the count is read off the
//	                                             batches)
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
	stateVersion = 2
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
	b = binary.BigEndian.AppendUint32(b, uint32(s.DeliveryComplete))
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
	version := binary.BigEndian.Uint16(b)
	switch version {
	case 0:
		b = b[2:]
	case 1, 2:
		if len(b) < 6 {
			return Snapshot{}, ErrCorruptState
		}
		s.StateEpoch = int32(binary.BigEndian.Uint32(b[2:]))
		b = b[6:]
	default:
		return Snapshot{}, fmt.Errorf("%w: value version %d, this build reads up to %d", ErrCorruptState, version, stateVersion)
	}
	if len(b) < 12 {
		return Snapshot{}, ErrCorruptState
	}
	s.LeaderEpoch, s.Start = int32(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:]))
	b = b[12:]
	complete := int32(-1)
	if version == 2 {
		if len(b) < 4 {
			return Snapshot{}, ErrCorruptState
		}
		complete, b = int32(binary.BigEndian.Uint32(b)), b[4:]
	}
	if len(b) < 4 {
		return Snapshot{}, ErrCorruptState
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
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
	s.DeliveryComplete = complete
	if complete < 0 {
		s.DeliveryComplete = CountDeliveryComplete(s.Start, s.Batches)
	}
	return s, nil
}

// statePartition is the partition of StateTopic holding k (FNV-1a of the key).
func statePartition(k Key, partitions int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write(encodeKey(k))
	return int32(h.Sum32() % uint32(partitions))
}

// TopicStore is the Store on StateTopic, reached with a Kafka client: loads,
// initializations, saves, deletions and summaries are the share coordinator's
// requests (ReadShareGroupState, InitializeShareGroupState, WriteShareGroupState,
// DeleteShareGroupState, ReadShareGroupStateSummary) sent to the leader of the
// key's state partition, found with FindCoordinator (key type share), which checks
// and orders them. GroupKeys reads the topic itself.
type TopicStore struct {
	cl         *kgo.Client
	seeds      []string
	opts       []kgo.Opt // the node's credentials, for the reading clients too
	partitions int32
	ensureMu   chan struct{} // a lock ensure can give up waiting for
	ensured    bool

	coordMu sync.Mutex
	coords  map[int32]int32 // state partition -> its coordinator, as last found
}

// NewTopicStore returns a store writing through a client on seeds with opts (the
// node's own listener and credentials); the topic is created (compacted,
// partitions partitions) on first use.
func NewTopicStore(seeds []string, partitions int32, opts ...kgo.Opt) (*TopicStore, error) {
	if partitions <= 0 {
		partitions = DefaultStateTopicPartitions
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("strata-share-state"),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &TopicStore{cl: cl, seeds: seeds, opts: opts, partitions: partitions, ensureMu: make(chan struct{}, 1), coords: map[int32]int32{}}, nil
}

// reader is a client of the store's node (with its credentials: on a listener
// with SASL a client without them is refused) consuming want of the state topic.
func (s *TopicStore) reader(clientID string, want map[int32]kgo.Offset) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(s.seeds...), kgo.ClientID(clientID),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{StateTopic: want}),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, s.opts...)...)
}

// Close closes the store's client.
func (s *TopicStore) Close() { s.cl.Close() }

// Kafka's share.coordinator.state.topic.replication.factor, .min.isr and
// .segment.bytes. The state topic gets the first two capped to the brokers
// there are, as Strata's other internal topics: a one-node cluster gets
// replication factor 1 and min.insync.replicas 1, two nodes 2 and 2.
const (
	stateTopicReplicationFactor = 3
	stateTopicMinISR            = 2
	stateTopicSegmentBytes      = 100 << 20
)

// StateTopicSettings is the replication factor and topic configs StateTopic is
// created with on a cluster of brokers brokers, by the store and by a Metadata
// request that auto-creates it alike (Kafka's share coordinator settings).
// Unlike Kafka's, the topic is compacted (the store keeps the latest value of
// each key and does not prune the topic itself) and preallocated, as Strata's
// other coordinators' topics (handlers' internalTopic).
func StateTopicSettings(brokers int) (rf int16, configs map[string]string) {
	rf = int16(max(min(stateTopicReplicationFactor, brokers), 1))
	return rf, map[string]string{
		"cleanup.policy":      "compact",
		"compression.type":    "producer",
		"min.insync.replicas": strconv.Itoa(min(stateTopicMinISR, int(rf))),
		"preallocate":         "true",
		"segment.bytes":       strconv.Itoa(stateTopicSegmentBytes),
	}
}

// ensure creates the state topic once.
func (s *TopicStore) ensure(ctx context.Context) error {
	select {
	case s.ensureMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.ensureMu }()
	if s.ensured {
		return nil
	}
	adm := kadm.NewClient(s.cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("share: listing brokers to create %s: %w", StateTopic, err)
	}
	rf, settings := StateTopicSettings(len(meta.Brokers))
	configs := make(map[string]*string, len(settings))
	for k, v := range settings {
		configs[k] = &v
	}
	_, err = adm.CreateTopic(ctx, s.partitions, rf, configs, StateTopic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("share: creating %s: %w", StateTopic, err)
	}
	s.ensured = true
	return nil
}

// CoordinatorKey is k's key for FindCoordinator (key type share), as Kafka
// writes it: "group:topic id:partition", the topic id in Kafka's base64.
func CoordinatorKey(k Key) string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// ParseCoordinatorKey reads a CoordinatorKey; false when s is not one.
func ParseCoordinatorKey(s string) (Key, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Key{}, false
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	j := strings.LastIndexByte(s[:i], ':')
	if err != nil || p < 0 || j < 0 {
		return Key{}, false
	}
	id, err := base64.RawURLEncoding.DecodeString(s[j+1 : i])
	if err != nil || len(id) != 16 {
		return Key{}, false
	}
	k := Key{Group: s[:j], Partition: int32(p)}
	copy(k.TopicID[:], id)
	return k, true
}

// StatePartition is the partition of a StateTopic of partitions partitions
// holding k's state.
func StatePartition(k Key, partitions int32) int32 { return statePartition(k, partitions) }

// coordinator returns the broker coordinating k's state partition.
func (s *TopicStore) coordinator(ctx context.Context, k Key) (int32, error) {
	p := statePartition(k, s.partitions)
	id, ok := s.knownCoordinator(p)
	if ok {
		return id, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 2
	req.CoordinatorKeys = []string{CoordinatorKey(k)}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Coordinators) != 1 {
		return 0, errors.New("FindCoordinator answered without the key")
	}
	c := resp.Coordinators[0]
	if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
		return 0, err
	}
	s.withCoords(func() { s.coords[p] = c.NodeID })
	return c.NodeID, nil
}

// knownCoordinator returns the coordinator found last for state partition p.
func (s *TopicStore) knownCoordinator(p int32) (int32, bool) {
	s.coordMu.Lock()
	defer s.coordMu.Unlock()
	id, ok := s.coords[p]
	return id, ok
}

// forget drops what coordinator found for k's state partition.
func (s *TopicStore) forget(k Key) {
	s.withCoords(func() { delete(s.coords, statePartition(k, s.partitions)) })
}

// withCoords runs f with s.coordMu held, released by defer.
func (s *TopicStore) withCoords(f func()) {
	s.coordMu.Lock()
	defer s.coordMu.Unlock()
	f()
}

// request sends req about k to its coordinator and returns the answer once its
// partition's code (partitionCode reads it) is 0, retrying until ctx ends while
// the coordinator moves or loads. Other codes are returned as kerr errors.
func (s *TopicStore) request(ctx context.Context, k Key, req kmsg.Request, partitionCode func(kmsg.Response) (int16, bool)) (kmsg.Response, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		id, err := s.coordinator(ctx, k)
		if err == nil {
			var resp kmsg.Response
			if resp, err = s.cl.Broker(int(id)).Request(ctx, req); err == nil {
				code, ok := partitionCode(resp)
				if !ok {
					return nil, fmt.Errorf("share: %s answered without the partition", kmsg.NameForKey(req.Key()))
				}
				switch code {
				case 0:
					return resp, nil
				case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
					err = kerr.ErrorForCode(code)
				default:
					return nil, kerr.ErrorForCode(code)
				}
			}
			s.forget(k)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("share: %s for %s-%d: %w", kmsg.NameForKey(req.Key()), StateTopic, statePartition(k, s.partitions), err)
		case <-t.C:
		}
	}
}

// Load implements Store with ReadShareGroupState; the coordinator answers
// UNKNOWN_TOPIC_OR_PARTITION for a key without state.
func (s *TopicStore) Load(ctx context.Context, k Key, leaderEpoch int32) (Snapshot, bool, error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := s.request(ctx, k, req, func(r kmsg.Response) (int16, bool) {
		p := readStatePartition(r.(*kmsg.ReadShareGroupStateResponse))
		if p == nil {
			return 0, false
		}
		if p.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			return 0, true // no state
		}
		return p.ErrorCode, true
	})
	if err != nil {
		return Snapshot{}, false, err
	}
	p := readStatePartition(resp.(*kmsg.ReadShareGroupStateResponse))
	if p.ErrorCode != 0 {
		return Snapshot{}, false, nil
	}
	snap := Snapshot{StateEpoch: p.StateEpoch, LeaderEpoch: leaderEpoch, Start: p.StartOffset}
	for _, b := range p.StateBatches {
		snap.Batches = append(snap.Batches, StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
	}
	snap.DeliveryComplete = CountDeliveryComplete(snap.Start, snap.Batches) // ReadShareGroupState does not carry it
	return snap, true, nil
}

func readStatePartition(r *kmsg.ReadShareGroupStateResponse) *kmsg.ReadShareGroupStateResponseTopicPartition {
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return nil
	}
	return &r.Topics[0].Partitions[0]
}

// Initialize implements Store with InitializeShareGroupState.
func (s *TopicStore) Initialize(ctx context.Context, k Key, stateEpoch int32, start int64) error {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	_, err := s.request(ctx, k, req, func(r kmsg.Response) (int16, bool) {
		resp := r.(*kmsg.InitializeShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, false
		}
		return resp.Topics[0].Partitions[0].ErrorCode, true
	})
	return err
}

// Save implements Store with WriteShareGroupState.
func (s *TopicStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, snap.StateEpoch, snap.LeaderEpoch, snap.Start
	rp.DeliveryCompleteCount = snap.DeliveryComplete // v1
	for _, b := range snap.Batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, int8(b.State), b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, sb)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	_, err := s.request(ctx, k, req, func(r kmsg.Response) (int16, bool) {
		resp := r.(*kmsg.WriteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, false
		}
		return resp.Topics[0].Partitions[0].ErrorCode, true
	})
	return err
}

// Delete removes the state of k (DeleteShareGroupState: a tombstone of its key,
// which a load reads as no state: the partition starts again at
// share.auto.offset.reset).
func (s *TopicStore) Delete(ctx context.Context, k Key) error {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	_, err := s.request(ctx, k, req, func(r kmsg.Response) (int16, bool) {
		resp := r.(*kmsg.DeleteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, false
		}
		return resp.Topics[0].Partitions[0].ErrorCode, true
	})
	return err
}

// Summary returns the start offset, state and leader epochs and delivery
// complete count of k as its share coordinator holds them
// (ReadShareGroupStateSummary v1, as Kafka's group coordinator reads them for
// DescribeShareGroupOffsets): no share-partition leader is fenced. found is false
// when k has no state.
func (s *TopicStore) Summary(ctx context.Context, k Key) (sum Summary, found bool, err error) {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	partition := func(r kmsg.Response) *kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
		resp := r.(*kmsg.ReadShareGroupStateSummaryResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil
		}
		return &resp.Topics[0].Partitions[0]
	}
	resp, err := s.request(ctx, k, req, func(r kmsg.Response) (int16, bool) {
		p := partition(r)
		if p == nil {
			return 0, false
		}
		return p.ErrorCode, true
	})
	if err != nil {
		return Summary{}, false, err
	}
	p := partition(resp)
	if p.StartOffset < 0 { // no state
		return Summary{}, false, nil
	}
	sum = Summary{Start: p.StartOffset, StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, Done: int64(max(p.DeliveryCompleteCount, 0))}
	return sum, true, nil
}
