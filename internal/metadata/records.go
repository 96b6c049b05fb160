package metadata

// RecordType tags each record in the encoding. Values are part of the on-disk
// format: never reuse or renumber one.
type RecordType uint8

// Record types.
const (
	TypeRegisterBroker  RecordType = 1
	TypeFenceBroker     RecordType = 2
	TypeUnfenceBroker   RecordType = 3
	TypeTopic           RecordType = 4
	TypePartition       RecordType = 5
	TypePartitionChange RecordType = 6
	TypeRemoveTopic     RecordType = 7
	TypeConfig          RecordType = 8
	TypeProducerIDs     RecordType = 9
	TypeReassignment    RecordType = 10
	TypeUnregister      RecordType = 11

	// Security (20-29).
	TypeScramCredential RecordType = 20
	TypeAcl             RecordType = 21
	TypeClientQuota     RecordType = 22
	// Delegation tokens (tokens.go).
	TypeDelegationToken       RecordType = 23
	TypeRemoveDelegationToken RecordType = 24

	// Strata-internal broker features (32-33, features.go).
	TypeBrokerFeatures  RecordType = 32
	TypeBrokerDirectory RecordType = 33
	// The quorum's voter directories (34, voterdir.go).
	TypeVoterDirectory RecordType = 34
	// Unregistered brokers' data directories (35, directory.go).
	TypeFormerDirectory RecordType = 35
	// Brokers in controlled shutdown (36, shutdown.go).
	TypeControlledShutdown RecordType = 36

	// Connection quotas (50-54).
	TypeIPQuota RecordType = 50
)

// Record is one change to the cluster metadata. The set is closed: only the
// types of this package implement it, always as pointers.
type Record interface {
	Type() RecordType
	appendBody(b []byte) []byte
	readBody(r *reader)
}

// RegisterBrokerRecord registers a broker, or re-registers it with a higher epoch
// after a restart. It replaces the previous registration.
type RegisterBrokerRecord struct {
	BrokerID    int32
	Incarnation UUID  // random per broker process start
	Epoch       int64 // never reused for the id, across unregistrations (see controller.PlanRegisterBroker)
	Host        string
	Port        int32
	Rack        string // empty: none
	Fenced      bool
}

// FenceBrokerRecord marks a broker fenced: it may not lead or join ISRs.
type FenceBrokerRecord struct {
	BrokerID int32
	Epoch    int64 // the registration it fences
}

// UnfenceBrokerRecord marks a fenced broker live again.
type UnfenceBrokerRecord struct {
	BrokerID int32
	Epoch    int64 // the registration it unfences
}

// TopicRecord creates a topic with no partitions; PartitionRecords follow.
type TopicRecord struct {
	Name    string
	ID      UUID
	Configs map[string]string // topic overrides
}

// PartitionRecord adds partition Partition (the next index) to a topic, or
// carries a partition's full state in a snapshot.
type PartitionRecord struct {
	TopicID        UUID
	Partition      int32
	Replicas       []int32 // preferred leader first
	ISR            []int32
	Leader         int32 // NoLeader if none
	LeaderEpoch    int32
	PartitionEpoch int32
}

// PartitionChangeRecord changes a partition's leader and ISR. It applies only to
// the partition epoch it was planned against, and raises the partition epoch by one.
type PartitionChangeRecord struct {
	TopicID            UUID
	Partition          int32
	BasePartitionEpoch int32
	Leader             int32
	LeaderEpoch        int32 // must grow if Leader changes; never shrinks
	ISR                []int32
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	TopicID UUID
}

// ConfigRecord sets or deletes one dynamic config value. A broker resource is
// named by the broker id in decimal, or "" for the cluster-wide default.
type ConfigRecord struct {
	ResourceType ResourceType
	ResourceName string
	Key          string
	Value        string
	Delete       bool
}

// ProducerIDsRecord hands out producer ids below NextProducerID: the block
// [previous NextProducerID, NextProducerID) now belongs to the broker.
type ProducerIDsRecord struct {
	BrokerID       int32 // -1 in snapshots
	BrokerEpoch    int64
	NextProducerID int64
}

// ReassignmentRecord changes a partition's replica set (KIP-455). It starts a
// reassignment (Adding or Removing not empty: Replicas is the target followed
// by the replicas being removed), or ends one (both empty: Replicas is the
// final set), and carries the partition's leader and ISR, which must fit the new
// replica set. Like PartitionChangeRecord it applies only to the partition
// epoch it was planned against and raises it by one. A snapshot writes an
// ongoing reassignment as the PartitionRecord one epoch back followed by this
// record.
type ReassignmentRecord struct {
	TopicID            UUID
	Partition          int32
	BasePartitionEpoch int32
	Replicas           []int32
	Adding             []int32
	Removing           []int32
	ISR                []int32
	Leader             int32
	LeaderEpoch        int32 // must grow if Leader changes; never shrinks
}

// UnregisterBrokerRecord removes a fenced broker's registration
// (UnregisterBroker). Partitions keep the id in their replica lists.
type UnregisterBrokerRecord struct {
	BrokerID int32
	Epoch    int64 // the registration it removes
}

func (*RegisterBrokerRecord) Type() RecordType   { return TypeRegisterBroker }
func (*FenceBrokerRecord) Type() RecordType      { return TypeFenceBroker }
func (*UnfenceBrokerRecord) Type() RecordType    { return TypeUnfenceBroker }
func (*TopicRecord) Type() RecordType            { return TypeTopic }
func (*PartitionRecord) Type() RecordType        { return TypePartition }
func (*PartitionChangeRecord) Type() RecordType  { return TypePartitionChange }
func (*RemoveTopicRecord) Type() RecordType      { return TypeRemoveTopic }
func (*ConfigRecord) Type() RecordType           { return TypeConfig }
func (*ProducerIDsRecord) Type() RecordType      { return TypeProducerIDs }
func (*ReassignmentRecord) Type() RecordType     { return TypeReassignment }
func (*UnregisterBrokerRecord) Type() RecordType { return TypeUnregister }

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t RecordType) Record {
	switch t {
	case TypeRegisterBroker:
		return new(RegisterBrokerRecord)
	case TypeFenceBroker:
		return new(FenceBrokerRecord)
	case TypeUnfenceBroker:
		return new(UnfenceBrokerRecord)
	case TypeTopic:
		return new(TopicRecord)
	case TypePartition:
		return new(PartitionRecord)
	case TypePartitionChange:
		return new(PartitionChangeRecord)
	case TypeRemoveTopic:
		return new(RemoveTopicRecord)
	case TypeConfig:
		return new(ConfigRecord)
	case TypeProducerIDs:
		return new(ProducerIDsRecord)
	case TypeReassignment:
		return new(ReassignmentRecord)
	case TypeUnregister:
		return new(UnregisterBrokerRecord)
	case TypeScramCredential:
		return new(ScramCredentialRecord)
	case TypeAcl:
		return new(AclRecord)
	case TypeClientQuota:
		return new(ClientQuotaRecord)
	case TypeIPQuota:
		return new(IPQuotaRecord)
	case TypeDelegationToken:
		return new(DelegationTokenRecord)
	case TypeRemoveDelegationToken:
		return new(RemoveDelegationTokenRecord)
	case TypeFormerDirectory:
		return new(FormerDirectoryRecord)
	case TypeBrokerFeatures:
		return new(BrokerFeaturesRecord)
	case TypeBrokerDirectory:
		return new(BrokerDirectoryRecord)
	case TypeVoterDirectory:
		return new(VoterDirectoryRecord)
	case TypeControlledShutdown:
		return new(ControlledShutdownRecord)
	}
	return nil
}

func (r *RegisterBrokerRecord) appendBody(b []byte) []byte {
	b = appendInt32(b, r.BrokerID)
	b = append(b, r.Incarnation[:]...)
	b = appendInt64(b, r.Epoch)
	b = appendString(b, r.Host)
	b = appendInt32(b, r.Port)
	b = appendString(b, r.Rack)
	return appendBool(b, r.Fenced)
}

func (r *RegisterBrokerRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Incarnation = rd.uuid()
	r.Epoch = rd.int64()
	r.Host = rd.string()
	r.Port = rd.int32()
	r.Rack = rd.string()
	r.Fenced = rd.bool()
}

func (r *FenceBrokerRecord) appendBody(b []byte) []byte {
	return appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
}

func (r *FenceBrokerRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
}

func (r *UnfenceBrokerRecord) appendBody(b []byte) []byte {
	return appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
}

func (r *UnfenceBrokerRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
}

func (r *TopicRecord) appendBody(b []byte) []byte {
	b = appendString(b, r.Name)
	b = append(b, r.ID[:]...)
	return appendStringMap(b, r.Configs)
}

func (r *TopicRecord) readBody(rd *reader) {
	r.Name = rd.string()
	r.ID = rd.uuid()
	r.Configs = rd.stringMap()
}

func (r *PartitionRecord) appendBody(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = appendInt32(b, r.Partition)
	b = appendInt32s(b, r.Replicas)
	b = appendInt32s(b, r.ISR)
	b = appendInt32(b, r.Leader)
	b = appendInt32(b, r.LeaderEpoch)
	return appendInt32(b, r.PartitionEpoch)
}

func (r *PartitionRecord) readBody(rd *reader) {
	r.TopicID = rd.uuid()
	r.Partition = rd.int32()
	r.Replicas = rd.int32s()
	r.ISR = rd.int32s()
	r.Leader = rd.int32()
	r.LeaderEpoch = rd.int32()
	r.PartitionEpoch = rd.int32()
}

func (r *PartitionChangeRecord) appendBody(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = appendInt32(b, r.Partition)
	b = appendInt32(b, r.BasePartitionEpoch)
	b = appendInt32(b, r.Leader)
	b = appendInt32(b, r.LeaderEpoch)
	return appendInt32s(b, r.ISR)
}

func (r *PartitionChangeRecord) readBody(rd *reader) {
	r.TopicID = rd.uuid()
	r.Partition = rd.int32()
	r.BasePartitionEpoch = rd.int32()
	r.Leader = rd.int32()
	r.LeaderEpoch = rd.int32()
	r.ISR = rd.int32s()
}

func (r *RemoveTopicRecord) appendBody(b []byte) []byte { return append(b, r.TopicID[:]...) }

func (r *RemoveTopicRecord) readBody(rd *reader) { r.TopicID = rd.uuid() }

func (r *ConfigRecord) appendBody(b []byte) []byte {
	b = append(b, byte(r.ResourceType))
	b = appendString(b, r.ResourceName)
	b = appendString(b, r.Key)
	b = appendString(b, r.Value)
	return appendBool(b, r.Delete)
}

func (r *ConfigRecord) readBody(rd *reader) {
	r.ResourceType = ResourceType(rd.uint8())
	r.ResourceName = rd.string()
	r.Key = rd.string()
	r.Value = rd.string()
	r.Delete = rd.bool()
}

func (r *ProducerIDsRecord) appendBody(b []byte) []byte {
	b = appendInt32(b, r.BrokerID)
	b = appendInt64(b, r.BrokerEpoch)
	return appendInt64(b, r.NextProducerID)
}

func (r *ProducerIDsRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.BrokerEpoch = rd.int64()
	r.NextProducerID = rd.int64()
}

func (r *ReassignmentRecord) appendBody(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = appendInt32(b, r.Partition)
	b = appendInt32(b, r.BasePartitionEpoch)
	b = appendInt32s(b, r.Replicas)
	b = appendInt32s(b, r.Adding)
	b = appendInt32s(b, r.Removing)
	b = appendInt32s(b, r.ISR)
	b = appendInt32(b, r.Leader)
	return appendInt32(b, r.LeaderEpoch)
}

func (r *ReassignmentRecord) readBody(rd *reader) {
	r.TopicID = rd.uuid()
	r.Partition = rd.int32()
	r.BasePartitionEpoch = rd.int32()
	r.Replicas = rd.int32s()
	r.Adding = rd.int32s()
	r.Removing = rd.int32s()
	r.ISR = rd.int32s()
	r.Leader = rd.int32()
	r.LeaderEpoch = rd.int32()
}

func (r *UnregisterBrokerRecord) appendBody(b []byte) []byte {
	return appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
}

func (r *UnregisterBrokerRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
}
