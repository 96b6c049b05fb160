package metadata

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// MaxPartitions bounds the partitions of one topic, so that no request or
// record can make the controller allocate without limit.
const MaxPartitions = 1 << 16

// Apply returns the image that results from applying rec to img. img is not
// changed; on error the result is img itself.
func Apply(img *Image, rec Record) (*Image, error) {
	return ApplyAll(img, []Record{rec})
}

// ApplyAll applies recs in order, all or nothing: on error it returns img itself
// and an error naming the failing record. Applying is deterministic: every node
// applying the same records to the same image reaches the same image.
func ApplyAll(img *Image, recs []Record) (*Image, error) {
	if len(recs) == 0 {
		return img, nil
	}
	b := builder{img: *img, owned: make(map[*Topic]bool)}
	for i, rec := range recs {
		if err := b.apply(rec); err != nil {
			return img, fmt.Errorf("record %d of %d (type %d): %w", i+1, len(recs), typeOf(rec), err)
		}
	}
	return &b.img, nil
}

func typeOf(rec Record) RecordType {
	if rec == nil {
		return 0
	}
	return rec.Type()
}

// builder accumulates one ApplyAll. It copies a map of the base image before
// the first write to it, and a topic before the first change to it; topics it
// has copied or created (owned) are then changed in place.
type builder struct {
	img                                    Image
	ownNames, ownBrokers, ownBrokerConfigs bool
	ownGroupConfigs, ownClientMetrics      bool
	ownScram, ownAcls, ownQuotas           bool
	ownTokens, ownVoterDirs, ownFormerDirs bool
	ownShards                              [topicShards]bool
	owned                                  map[*Topic]bool
}

func (b *builder) apply(rec Record) error {
	switch r := rec.(type) {
	case *RegisterBrokerRecord:
		return b.registerBroker(r)
	case *FenceBrokerRecord:
		return b.setFenced(r.BrokerID, r.Epoch, true)
	case *UnfenceBrokerRecord:
		return b.setFenced(r.BrokerID, r.Epoch, false)
	case *UnregisterBrokerRecord:
		return b.unregisterBroker(r)
	case *TopicRecord:
		return b.createTopic(r)
	case *PartitionRecord:
		return b.addPartition(r)
	case *PartitionChangeRecord:
		return b.changePartition(r)
	case *ReassignmentRecord:
		return b.reassign(r)
	case *RemoveTopicRecord:
		return b.removeTopic(r)
	case *ConfigRecord:
		return b.config(r)
	case *ScramCredentialRecord:
		return b.scramCredential(r)
	case *AclRecord:
		return b.aclRecord(r)
	case *ClientQuotaRecord:
		return b.clientQuota(r)
	case *IPQuotaRecord:
		return b.ipQuota(r)
	case *DelegationTokenRecord:
		return b.delegationToken(r)
	case *RemoveDelegationTokenRecord:
		return b.removeDelegationToken(r)
	case *BrokerFeaturesRecord:
		return b.brokerFeatures(r)
	case *BrokerDirectoryRecord:
		return b.brokerDirectory(r)
	case *ControlledShutdownRecord:
		return b.controlledShutdown(r)
	case *VoterDirectoryRecord:
		return b.voterDirectory(r)
	case *FormerDirectoryRecord:
		return b.formerDirectory(r)
	case *ProducerIDsRecord:
		if r.NextProducerID <= b.img.nextProducerID {
			return fmt.Errorf("%w: next producer id %d does not advance past %d",
				ErrProducerIDs, r.NextProducerID, b.img.nextProducerID)
		}
		b.img.nextProducerID = r.NextProducerID
		return nil
	}
	return fmt.Errorf("%w: unknown record %T", ErrInvalidRequest, rec)
}

func (b *builder) mutBrokers() map[int32]*Broker {
	if !b.ownBrokers {
		b.img.brokers = maps.Clone(b.img.brokers)
		if b.img.brokers == nil {
			b.img.brokers = make(map[int32]*Broker)
		}
		b.ownBrokers = true
	}
	return b.img.brokers
}

func (b *builder) mutNames() {
	if !b.ownNames {
		b.img.names = cloneOrMake(b.img.names)
		b.img.collisions = cloneOrMake(b.img.collisions)
		b.ownNames = true
	}
}

func (b *builder) mutShard(id UUID) map[UUID]*Topic {
	s := shardOf(id)
	if !b.ownShards[s] {
		b.img.shards[s] = cloneOrMake(b.img.shards[s])
		b.ownShards[s] = true
	}
	return b.img.shards[s]
}

func cloneOrMake[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return make(map[K]V)
	}
	return maps.Clone(m)
}

// mutTopic returns a topic the builder may change in place, copying t (and its
// partition slice) the first time.
func (b *builder) mutTopic(t *Topic) *Topic {
	if b.owned[t] {
		return t
	}
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	b.mutShard(c.ID)[c.ID] = &c
	b.owned[&c] = true
	return &c
}

func (b *builder) registerBroker(r *RegisterBrokerRecord) error {
	switch {
	case r.BrokerID < 0:
		return fmt.Errorf("%w: broker id %d", ErrInvalidRequest, r.BrokerID)
	case r.Host == "" || r.Port <= 0 || r.Port > math.MaxUint16:
		return fmt.Errorf("%w: broker %d address %q port %d", ErrInvalidRequest, r.BrokerID, r.Host, r.Port)
	}
	if old := b.img.brokers[r.BrokerID]; old != nil && r.Epoch <= old.Epoch {
		return fmt.Errorf("%w: broker %d registration epoch %d, current %d",
			ErrStaleBrokerEpoch, r.BrokerID, r.Epoch, old.Epoch)
	}
	b.mutBrokers()[r.BrokerID] = &Broker{
		ID: r.BrokerID, Incarnation: r.Incarnation, Epoch: r.Epoch,
		Host: r.Host, Port: r.Port, Rack: r.Rack, Fenced: r.Fenced,
	}
	b.setFormerDirectory(r.BrokerID, UUID{})
	return nil
}

// unregisterBroker removes a fenced registration; a live broker must be
// fenced first (in the same batch), so that no partition is left led by it.
func (b *builder) unregisterBroker(r *UnregisterBrokerRecord) error {
	old, err := b.registration(r.BrokerID, r.Epoch)
	switch {
	case err != nil:
		return err
	case !old.Fenced:
		return fmt.Errorf("%w: broker %d is not fenced", ErrInvalidRequest, r.BrokerID)
	}
	delete(b.mutBrokers(), r.BrokerID)
	b.setFormerDirectory(r.BrokerID, old.DirectoryID)
	return nil
}

// registration is broker id's registration if its epoch is epoch.
func (b *builder) registration(id int32, epoch int64) (*Broker, error) {
	old := b.img.brokers[id]
	if old == nil {
		return nil, fmt.Errorf("%w: broker %d", ErrUnknownBroker, id)
	}
	if old.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleBrokerEpoch, id, epoch, old.Epoch)
	}
	return old, nil
}

func (b *builder) setFenced(id int32, epoch int64, fenced bool) error {
	old, err := b.registration(id, epoch)
	if err != nil {
		return err
	}
	c := *old
	c.Fenced = fenced
	b.mutBrokers()[id] = &c
	return nil
}

func (b *builder) createTopic(r *TopicRecord) error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	switch {
	case b.img.Topic(r.Name) != nil:
		return fmt.Errorf("%w: %q", ErrTopicExists, r.Name)
	case r.ID.IsZero():
		return fmt.Errorf("%w: topic %q has the zero id", ErrInvalidRequest, r.Name)
	case b.img.TopicByID(r.ID) != nil:
		return fmt.Errorf("%w: topic id %s is in use by %q", ErrTopicExists, r.ID, b.img.TopicByID(r.ID).Name)
	}
	if other, ok := b.img.CollidingTopic(r.Name); ok {
		return fmt.Errorf("%w: %q collides with existing topic %q", ErrInvalidTopic, r.Name, other)
	}
	for k, v := range r.Configs {
		if err := ValidateConfig(ResourceTopic, k, v); err != nil {
			return fmt.Errorf("topic %q: %w", r.Name, err)
		}
	}
	b.mutNames()
	t := &Topic{Name: r.Name, ID: r.ID, Overrides: maps.Clone(r.Configs)}
	t.Config = resolveTopicConfig(t.Overrides, b.img.brokerConfigs[""])
	b.img.names[t.Name] = t.ID
	b.img.collisions[collisionKey(t.Name)] = t.Name
	b.mutShard(t.ID)[t.ID] = t
	b.owned[t] = true
	return nil
}

func (b *builder) addPartition(r *PartitionRecord) error {
	t := b.img.TopicByID(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopicID, r.TopicID)
	}
	if int(r.Partition) != len(t.Partitions) || r.Partition >= MaxPartitions {
		return fmt.Errorf("%w: topic %q: partition %d cannot follow %d partitions (limit %d)",
			ErrInvalidPartitions, t.Name, r.Partition, len(t.Partitions), MaxPartitions)
	}
	if err := checkPartitionState(r.Replicas, r.ISR, r.Leader); err != nil {
		return fmt.Errorf("topic %q partition %d: %w", t.Name, r.Partition, err)
	}
	if r.LeaderEpoch < 0 || r.PartitionEpoch < 0 {
		return fmt.Errorf("%w: topic %q partition %d: negative epoch", ErrInvalidRequest, t.Name, r.Partition)
	}
	t = b.mutTopic(t)
	t.Partitions = append(t.Partitions, &Partition{
		TopicID: r.TopicID, Index: r.Partition,
		Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
	})
	b.img.partitions++
	return nil
}

// checkPartitionState checks replicas (non-empty, distinct, non-negative), the
// ISR (distinct members of replicas) and the leader (NoLeader or an ISR member;
// only a leaderless partition may have an empty ISR).
func checkPartitionState(replicas, isr []int32, leader int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: no replicas", ErrInvalidReplicaAssignment)
	}
	for i, id := range replicas {
		if id < 0 || slices.Contains(replicas[:i], id) {
			return fmt.Errorf("%w: replicas %v", ErrInvalidReplicaAssignment, replicas)
		}
	}
	for i, id := range isr {
		if !slices.Contains(replicas, id) || slices.Contains(isr[:i], id) {
			return fmt.Errorf("%w: isr %v with replicas %v", ErrInvalidReplicaAssignment, isr, replicas)
		}
	}
	if leader != NoLeader && !slices.Contains(isr, leader) {
		return fmt.Errorf("%w: leader %d not in isr %v", ErrInvalidReplicaAssignment, leader, isr)
	}
	return nil
}

// partitionToChange finds the partition a change record names and checks the
// change against it: based on the current partition epoch, and a leader epoch
// that never shrinks and grows when the leader changes.
func (b *builder) partitionToChange(topicID UUID, partition, baseEpoch, leader, leaderEpoch int32) (*Topic, *Partition, error) {
	t := b.img.TopicByID(topicID)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrUnknownTopicID, topicID)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: topic %q partition %d", ErrUnknownTopic, t.Name, partition)
	}
	p := t.Partitions[partition]
	switch {
	case baseEpoch != p.PartitionEpoch || p.PartitionEpoch == math.MaxInt32:
		return nil, nil, fmt.Errorf("%w: topic %q partition %d: change based on epoch %d, current %d",
			ErrStalePartitionEpoch, t.Name, partition, baseEpoch, p.PartitionEpoch)
	case leaderEpoch < p.LeaderEpoch || leader != p.Leader && leaderEpoch == p.LeaderEpoch:
		return nil, nil, fmt.Errorf("%w: topic %q partition %d: leader %d epoch %d after leader %d epoch %d",
			ErrFencedLeaderEpoch, t.Name, partition, leader, leaderEpoch, p.Leader, p.LeaderEpoch)
	}
	return t, p, nil
}

func (b *builder) changePartition(r *PartitionChangeRecord) error {
	t, p, err := b.partitionToChange(r.TopicID, r.Partition, r.BasePartitionEpoch, r.Leader, r.LeaderEpoch)
	if err != nil {
		return err
	}
	if err := checkPartitionState(p.Replicas, r.ISR, r.Leader); err != nil {
		return fmt.Errorf("topic %q partition %d: %w", t.Name, r.Partition, err)
	}
	t = b.mutTopic(t)
	t.Partitions[r.Partition] = p.AfterChange(r)
	return nil
}

// AfterChange returns p as r leaves it: the partition Apply puts in the image
// when r applies to p (whether it does is Apply's check, not this).
func (p *Partition) AfterChange(r *PartitionChangeRecord) *Partition {
	return &Partition{
		TopicID: p.TopicID, Index: p.Index, Replicas: p.Replicas, ISR: slices.Clone(r.ISR),
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
		Adding: p.Adding, Removing: p.Removing,
	}
}

// reassign applies a ReassignmentRecord: the epochs as for a partition change;
// Replicas, ISR and leader as for a new partition; Adding and Removing distinct
// members of Replicas, apart from each other, and not both empty unless the
// record ends a reassignment.
func (b *builder) reassign(r *ReassignmentRecord) error {
	t, p, err := b.partitionToChange(r.TopicID, r.Partition, r.BasePartitionEpoch, r.Leader, r.LeaderEpoch)
	if err != nil {
		return err
	}
	if err := checkPartitionState(r.Replicas, r.ISR, r.Leader); err != nil {
		return fmt.Errorf("topic %q partition %d: %w", t.Name, r.Partition, err)
	}
	for _, set := range [][]int32{r.Adding, r.Removing} {
		for i, id := range set {
			if !slices.Contains(r.Replicas, id) || slices.Contains(set[:i], id) ||
				slices.Contains(r.Adding, id) && slices.Contains(r.Removing, id) {
				return fmt.Errorf("%w: topic %q partition %d: adding %v removing %v with replicas %v",
					ErrInvalidReplicaAssignment, t.Name, r.Partition, r.Adding, r.Removing, r.Replicas)
			}
		}
	}
	if len(r.Removing) == len(r.Replicas) {
		return fmt.Errorf("%w: topic %q partition %d: every replica is being removed",
			ErrInvalidReplicaAssignment, t.Name, r.Partition)
	}
	t = b.mutTopic(t)
	t.Partitions[r.Partition] = p.AfterReassignment(r)
	return nil
}

// AfterReassignment returns p as r leaves it (as AfterChange).
func (p *Partition) AfterReassignment(r *ReassignmentRecord) *Partition {
	return &Partition{
		TopicID: p.TopicID, Index: p.Index, Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
		Adding: nilIfEmpty(r.Adding), Removing: nilIfEmpty(r.Removing),
	}
}

func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return slices.Clone(ids)
}

func (b *builder) removeTopic(r *RemoveTopicRecord) error {
	t := b.img.TopicByID(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopicID, r.TopicID)
	}
	b.mutNames()
	delete(b.img.names, t.Name)
	delete(b.img.collisions, collisionKey(t.Name))
	delete(b.mutShard(t.ID), t.ID)
	delete(b.owned, t)
	b.img.partitions -= len(t.Partitions)
	return nil
}

func (b *builder) config(r *ConfigRecord) error {
	if r.Delete {
		if _, err := LookupConfig(r.ResourceType, r.Key); err != nil {
			return err
		}
	} else if err := ValidateConfig(r.ResourceType, r.Key, r.Value); err != nil {
		return err
	}
	switch r.ResourceType {
	case ResourceTopic:
		t := b.img.Topic(r.ResourceName)
		if t == nil {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, r.ResourceName)
		}
		t = b.mutTopic(t)
		t.Overrides = setOrDelete(t.Overrides, r)
		t.Config = resolveTopicConfig(t.Overrides, b.img.brokerConfigs[""])
		return nil
	case ResourceBroker:
		if err := ValidateBrokerResource(r.ResourceName); err != nil {
			return err
		}
		if !b.ownBrokerConfigs {
			b.img.brokerConfigs = cloneOrMake(b.img.brokerConfigs)
			b.ownBrokerConfigs = true
		}
		if cfg := setOrDelete(b.img.brokerConfigs[r.ResourceName], r); len(cfg) > 0 {
			b.img.brokerConfigs[r.ResourceName] = cfg
		} else {
			delete(b.img.brokerConfigs, r.ResourceName)
		}
		if r.ResourceName == "" {
			b.reresolveTopics()
		}
		return nil
	case ResourceGroup:
		return b.groupConfig(r)
	case ResourceClientMetrics:
		return b.clientMetricsConfig(r)
	}
	return fmt.Errorf("%w: configs of %v are not supported", ErrInvalidRequest, r.ResourceType)
}

// ValidateBrokerResource checks a broker resource name as Kafka 4.4's
// controller does (ControllerConfigurationValidator): "" for the cluster-wide
// default, else a non-negative 32-bit integer in any spelling ("01", "+1").
// The configs are kept under the name as given, and a broker acts only on
// its id's plain spelling, as Kafka's brokers do.
func ValidateBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	switch {
	case err != nil:
		return KafkaText(ErrInvalidRequest, "Unable to parse broker name as a base 10 number.")
	case id < 0:
		return KafkaText(ErrInvalidRequest, "Invalid negative broker ID.")
	}
	return nil
}

// setOrDelete returns a copy of m with r applied; an empty result is nil.
func setOrDelete(m map[string]string, r *ConfigRecord) map[string]string {
	m = maps.Clone(m)
	if r.Delete {
		delete(m, r.Key)
	} else {
		if m == nil {
			m = make(map[string]string)
		}
		m[r.Key] = r.Value
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// reresolveTopics recomputes every topic's effective config after a change of
// the cluster-wide defaults.
func (b *builder) reresolveTopics() {
	for _, shard := range b.img.shards {
		for _, t := range shard {
			c := resolveTopicConfig(t.Overrides, b.img.brokerConfigs[""])
			if c != t.Config {
				b.mutTopic(t).Config = c
			}
		}
	}
}
