package metadata

import (
	"fmt"

	"github.com/strata-stream/strata/internal/acl"
	"net"
	"slices"
	"sort"
	"strconv"
)

// NoLeader is the leader of a partition that has none.
const NoLeader int32 = -1

// NoBroker names no broker where a broker id is asked for: no broker has its
// own configs under it.
const NoBroker int32 = -1

// Broker is a registered broker.
type Broker struct {
	ID          int32
	Incarnation UUID
	Epoch       int64
	Host        string
	Port        int32
	Rack        string
	Fenced      bool
	// Features are the Strata-internal features this registration supports,
	// at their highest level (BrokerFeaturesRecord); nil until recorded.
	Features    map[string]int32
	DirectoryID UUID // the registration's data directory (BrokerDirectoryRecord); zero until recorded
	// InControlledShutdown: the registration is in controlled shutdown
	// (ControlledShutdownRecord).
	InControlledShutdown bool
}

// Addr is the broker's Kafka address, host:port.
func (b *Broker) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// Topic is a topic in an image. Like everything reachable from an Image it is
// shared between images and readers: never modify it.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []*Partition // index i is partition i
	Overrides  map[string]string
	Config     TopicConfig // effective values
}

// Partition is a partition in an image. Never modify it.
type Partition struct {
	TopicID        UUID
	Index          int32
	Replicas       []int32 // preferred leader first
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// Adding and Removing are the replicas an ongoing reassignment adds and
	// removes (both members of Replicas); both empty when there is none.
	Adding, Removing []int32
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p *Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// TargetReplicas is the replica set the partition has once its reassignment
// completes (Replicas without Removing), or Replicas when none is in progress.
func (p *Partition) TargetReplicas() []int32 { return replicasWithout(p.Replicas, p.Removing) }

// OriginalReplicas is the replica set before the ongoing reassignment
// (Replicas without Adding): where a cancelled reassignment goes back to.
func (p *Partition) OriginalReplicas() []int32 { return replicasWithout(p.Replicas, p.Adding) }

// replicasWithout returns replicas minus drop, in order (replicas itself when
// drop is empty).
func replicasWithout(replicas, drop []int32) []int32 {
	if len(drop) == 0 {
		return replicas
	}
	var out []int32
	for _, id := range replicas {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// Image is an immutable snapshot of the cluster metadata after the log entry at
// Offset. Apply returns new images that share every unchanged topic, partition
// and broker with the old one, so readers keep and read an image with no locks.
type Image struct {
	offset     uint64
	names      map[string]UUID
	collisions map[string]string // collisionKey(name) -> name
	// shards holds the topics by id, split so that changing one topic copies
	// one small map; names and collisions change only with the set of topics.
	shards         [topicShards]map[UUID]*Topic
	partitions     int
	brokers        map[int32]*Broker
	brokerConfigs  map[string]map[string]string // "" (cluster default) or broker id -> key -> value
	groupConfigs   map[string]map[string]string // group id -> key -> value (groupconfigs.go)
	clientMetrics  map[string]map[string]string // subscription -> key -> value (clientmetrics.go)
	nextProducerID int64
	scram          map[string]map[ScramMechanism]*ScramCredential // user -> mechanism (scram.go)
	acls           map[acl.Binding]struct{}                       // (acls.go)
	quotas         map[QuotaEntity]map[string]float64             // client quotas (quotas.go)
	tokens         map[string]*DelegationToken                    // delegation tokens by id (tokens.go)
	voterDirs      map[int32]UUID                                 // controller voter -> its data directory (voterdir.go)
	formerDirs     map[int32]UUID                                 // unregistered broker -> its last registration's data directory (directory.go)
}

// topicShards is the number of maps the topics are split over.
const topicShards = 64

func shardOf(id UUID) int {
	var h uint32
	for _, b := range id {
		h = h*31 + uint32(b)
	}
	return int(h % topicShards)
}

var emptyImage = &Image{}

// NewImage returns the empty image: no topics, no brokers, offset 0.
func NewImage() *Image { return emptyImage }

// Offset is the Raft index of the last log entry reflected in the image.
func (img *Image) Offset() uint64 { return img.offset }

// WithOffset returns a copy of img at offset off.
func (img *Image) WithOffset(off uint64) *Image {
	c := *img
	c.offset = off
	return &c
}

// Topic returns the named topic, or nil.
func (img *Image) Topic(name string) *Topic {
	id, ok := img.names[name]
	if !ok {
		return nil
	}
	return img.TopicByID(id)
}

// TopicByID returns the topic with id, or nil.
func (img *Image) TopicByID(id UUID) *Topic { return img.shards[shardOf(id)][id] }

// Topics returns every topic, sorted by name.
func (img *Image) Topics() []*Topic {
	ts := make([]*Topic, 0, len(img.names))
	for _, shard := range img.shards {
		for _, t := range shard {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts
}

// NumTopics is the number of topics.
func (img *Image) NumTopics() int { return len(img.names) }

// NumPartitions is the number of partitions over all topics.
func (img *Image) NumPartitions() int { return img.partitions }

// Partition returns one partition, or nil.
func (img *Image) Partition(topic string, index int32) *Partition {
	t := img.Topic(topic)
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil
	}
	return t.Partitions[index]
}

// CollidingTopic returns the existing topic whose name differs from name only by
// '.' versus '_', if any. An exact match is not a collision.
func (img *Image) CollidingTopic(name string) (string, bool) {
	other, ok := img.collisions[collisionKey(name)]
	if !ok || other == name {
		return "", false
	}
	return other, true
}

// Broker returns the registered broker with id, or nil.
func (img *Image) Broker(id int32) *Broker { return img.brokers[id] }

// Brokers returns every registered broker, fenced or not, sorted by id.
func (img *Image) Brokers() []*Broker {
	bs := make([]*Broker, 0, len(img.brokers))
	for _, b := range img.brokers {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}

// IsLive reports whether broker id is registered and not fenced.
func (img *Image) IsLive(id int32) bool {
	b := img.brokers[id]
	return b != nil && !b.Fenced
}

// LiveBrokers returns the ids of the registered, unfenced brokers, ascending.
func (img *Image) LiveBrokers() []int32 {
	var ids []int32
	for id, b := range img.brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// NextProducerID is the first producer id not yet handed out.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// BrokerConfigs returns the dynamic configs set for a broker resource ("" for the
// cluster-wide default, else the broker id). Never modify the map.
func (img *Image) BrokerConfigs(name string) map[string]string { return img.brokerConfigs[name] }

// TopicConfigOn is t's effective configuration on broker: t.Config (its
// overrides over the cluster-wide broker configs), but where broker has its
// own value of a key's broker synonym (a per-broker dynamic config), that
// value comes before the cluster-wide one, as a Kafka broker builds a topic's
// LogConfig from its own configuration.
func (img *Image) TopicConfigOn(t *Topic, broker int32) TopicConfig {
	own := img.brokerConfigs[strconv.Itoa(int(broker))]
	if len(own) == 0 {
		return t.Config
	}
	return resolveTopicConfig(t.Overrides, own, img.brokerConfigs[""])
}

// TopicConfigEntries describes every config key of a topic as broker sees it
// (TopicConfigOn: its own broker configs, DYNAMIC_BROKER_CONFIG, before the
// cluster-wide ones; NoBroker for the cluster-wide alone), for
// DescribeConfigs; internal.segment.bytes only where the topic sets it.
func (img *Image) TopicConfigEntries(topic string, broker int32) ([]ConfigEntry, error) {
	t := img.Topic(topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	own, cluster := img.brokerConfigs[strconv.Itoa(int(broker))], img.brokerConfigs[""]
	es := make([]ConfigEntry, 0, len(topicConfigDefs))
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		if _, set := t.Overrides[d.Name]; d.Name == TopicInternalSegmentBytes && !set {
			continue
		}
		es = append(es, describe(d, d.Name, d.BrokerName,
			describeLevel{SourceTopic, d.Name, t.Overrides},
			describeLevel{SourceBroker, d.BrokerName, own},
			describeLevel{SourceClusterDefault, d.BrokerName, cluster}))
	}
	return es, nil
}

// DescribeTopicConfigs is TopicConfigEntries as DescribeConfigs shows them,
// as Kafka's ConfigHelper does (it describes the parsed LogConfig): the
// effective value and the topic's own synonym as Kafka's parser reads them
// back (ConfigDef.canonical), the broker-level synonyms as they were set.
// CreateTopics answers the values as given, as Kafka's controller does.
func (img *Image) DescribeTopicConfigs(topic string, broker int32) ([]ConfigEntry, error) {
	es, err := img.TopicConfigEntries(topic, broker)
	for i := range es {
		d := topicDefsByName[es[i].Name]
		es[i].Value = d.canonical(es[i].Value)
		for j := range es[i].Synonyms {
			if s := &es[i].Synonyms[j]; s.Source == SourceTopic {
				s.Value = d.canonical(s.Value)
			}
		}
	}
	return es, err
}

// BrokerConfigEntries describes the broker config keys of a broker resource: for
// a broker id every key (null for a key of coarserDefaults set nowhere, none for
// a key of listedWhereSet), for "" (the cluster-wide default) the keys set
// there, as Kafka 4.4 answers.
func (img *Image) BrokerConfigEntries(name string) []ConfigEntry {
	cluster := img.brokerConfigs[""]
	es := make([]ConfigEntry, 0, len(topicConfigDefs)+len(brokerOnlyConfigDefs))
	for _, d := range brokerConfigDefs() {
		key := d.BrokerName
		if name == "" {
			if _, set := cluster[key]; set {
				es = append(es, describe(d, key, "", describeLevel{SourceClusterDefault, key, cluster}))
			}
			continue
		}
		defaultOf := key
		if listedWhereSet[key] {
			defaultOf = ""
		}
		e := describe(d, key, defaultOf,
			describeLevel{SourceBroker, key, img.brokerConfigs[name]},
			describeLevel{SourceClusterDefault, key, cluster})
		if listedWhereSet[key] && len(e.Synonyms) == 0 {
			continue
		}
		if _, ok := coarserDefaults[key]; ok && len(e.Synonyms) == 0 {
			e.Value, e.NullValue = "", true
		}
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}

// Records returns records that rebuild the image when applied to NewImage, for
// snapshots: broker configs, brokers, topics with their partitions, producer ids.
// The records share maps and slices with the image: never modify them.
func (img *Image) Records() []Record {
	var recs []Record
	names := make([]string, 0, len(img.brokerConfigs))
	for name := range img.brokerConfigs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := img.brokerConfigs[name]
		for _, k := range sortedKeys(cfg) {
			recs = append(recs, &ConfigRecord{ResourceType: ResourceBroker, ResourceName: name, Key: k, Value: cfg[k]})
		}
	}
	recs = append(recs, namedConfigRecords(ResourceGroup, img.groupConfigs)...)
	recs = append(recs, namedConfigRecords(ResourceClientMetrics, img.clientMetrics)...)
	for _, b := range img.Brokers() {
		recs = append(recs, &RegisterBrokerRecord{
			BrokerID: b.ID, Incarnation: b.Incarnation, Epoch: b.Epoch,
			Host: b.Host, Port: b.Port, Rack: b.Rack, Fenced: b.Fenced,
		})
		if len(b.Features) > 0 {
			recs = append(recs, &BrokerFeaturesRecord{BrokerID: b.ID, Epoch: b.Epoch, Features: b.Features})
		}
		if !b.DirectoryID.IsZero() {
			recs = append(recs, &BrokerDirectoryRecord{BrokerID: b.ID, Epoch: b.Epoch, DirectoryID: b.DirectoryID})
		}
		if b.InControlledShutdown {
			recs = append(recs, &ControlledShutdownRecord{BrokerID: b.ID, Epoch: b.Epoch})
		}
	}
	recs = append(recs, img.formerDirectoryRecords()...)
	for _, t := range img.Topics() {
		recs = append(recs, &TopicRecord{Name: t.Name, ID: t.ID, Configs: t.Overrides})
		for _, p := range t.Partitions {
			if !p.Reassigning() {
				recs = append(recs, &PartitionRecord{
					TopicID: p.TopicID, Partition: p.Index, Replicas: p.Replicas, ISR: p.ISR,
					Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				})
				continue
			}
			// A reassignment is applied on top of the partition one epoch back.
			recs = append(recs, &PartitionRecord{
				TopicID: p.TopicID, Partition: p.Index, Replicas: p.Replicas, ISR: p.ISR,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch - 1,
			}, &ReassignmentRecord{
				TopicID: p.TopicID, Partition: p.Index, BasePartitionEpoch: p.PartitionEpoch - 1,
				Replicas: p.Replicas, Adding: p.Adding, Removing: p.Removing,
				ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			})
		}
	}
	if img.nextProducerID > 0 {
		recs = append(recs, &ProducerIDsRecord{BrokerID: -1, NextProducerID: img.nextProducerID})
	}
	recs = append(recs, img.scramRecords()...)
	recs = append(recs, img.aclRecords()...)
	recs = append(recs, img.quotaRecords()...)
	recs = append(recs, img.voterDirectoryRecords()...)
	return append(recs, img.tokenRecords()...)
}
