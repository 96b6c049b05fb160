package group

import "slices"

// APIVersion is the range of versions of one Kafka API key that the coordinator serves.
type APIVersion struct {
	Key, Min, Max int16
}

// apiVersions lists the classic group APIs, floors per KIP-896. The coordinator
// keys offsets by topic name at every version: the topic ids of OffsetCommit and
// OffsetFetch v10 are resolved to names before it sees a request (package
// handlers, topic_ids.go).
var apiVersions = [...]APIVersion{
	{Key: 8, Min: 2, Max: 10}, // OffsetCommit (v10: topic ids, resolved by the handlers)
	{Key: 9, Min: 1, Max: 10}, // OffsetFetch (v8+: several groups per request; v10: topic ids, as OffsetCommit)
	{Key: 11, Min: 0, Max: 9}, // JoinGroup (v0: no rebalance timeout, the session timeout serves; v4+: MEMBER_ID_REQUIRED; v5+: static members; v9: skip assignment)
	{Key: 12, Min: 0, Max: 4}, // Heartbeat
	{Key: 13, Min: 0, Max: 5}, // LeaveGroup (v3+: batch of members)
	{Key: 14, Min: 0, Max: 5}, // SyncGroup (v5: protocol type and name)
	{Key: 15, Min: 0, Max: 6}, // DescribeGroups (v6: GROUP_ID_NOT_FOUND for a group not found or not classic)
	{Key: 16, Min: 0, Max: 5}, // ListGroups (v4: states filter; v5: types filter)
	{Key: 42, Min: 0, Max: 3}, // DeleteGroups (v3: error messages, null as Kafka 4.4's without a streams topology plugin)
	{Key: 47, Min: 0, Max: 0}, // OffsetDelete
	{Key: 68, Min: 0, Max: 1}, // ConsumerGroupHeartbeat (v1: client-generated member ids, regex subscriptions)
	{Key: 69, Min: 0, Max: 1}, // ConsumerGroupDescribe (v1: member type)
	{Key: 76, Min: 1, Max: 1}, // ShareGroupHeartbeat (KIP-932 as released in Kafka 4.1)
	{Key: 77, Min: 1, Max: 1}, // ShareGroupDescribe (v0 was Kafka 4.0's early access)
	{Key: 88, Min: 0, Max: 1}, // StreamsGroupHeartbeat (KIP-1071; v1: int64 acceptable recovery lag, topology description request)
	{Key: 89, Min: 0, Max: 1}, // StreamsGroupDescribe (v1: topology description, assignor name)
	{Key: 90, Min: 0, Max: 1}, // DescribeShareGroupOffsets (v1: lag, KIP-1226)
	{Key: 91, Min: 0, Max: 0}, // AlterShareGroupOffsets
	{Key: 92, Min: 0, Max: 0}, // DeleteShareGroupOffsets
	{Key: 93, Min: 0, Max: 0}, // StreamsGroupTopologyDescriptionUpdate (refused: no description plugin, as Kafka without one)
}

// Versions returns the group APIs and the versions the coordinator serves, in key
// order, for the broker's version registry. The slice is the caller's.
func Versions() []APIVersion { return slices.Clone(apiVersions[:]) }
