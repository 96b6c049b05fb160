package group

import (
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds a share group's membership in __consumer_offsets, in the
// record schemas Kafka 4.4 writes (its group coordinator's ShareGroup*Key/Value;
// modern_records.go has the framing and how writes follow the state), so a
// coordinator that loads the partition after a failover or restart lists and
// describes the group with its epochs, members and assignments, and its members
// carry on at their epochs. Partitions go by topic id.
//
//	type | key                    | value
//	  10 | group, member          | member: rack, client, host, subscribed topics
//	  11 | group                  | metadata: group epoch, metadata hash
//	  12 | group                  | target assignment metadata: epoch, time (tagged)
//	  13 | group, member          | target assignment: partitions by topic id
//	  14 | group, member          | current assignment: member epoch, previous
//	     |                        | epoch, state (always stable), partitions
//
// Kafka's type 15 (ShareGroupStatePartitionMetadata: which share partitions the
// group coordinator had the share coordinator initialize) is neither written
// nor read: Strata's share-partition leaders initialize their state themselves.
//
// As in Kafka, a member is kept until it leaves or its session times out after
// the load, and the group until DeleteGroups (tombstones for all its records).
// A node that predates these records skips their keys (a key type it does not
// know); a directory written before them has none: its share groups are gone
// after a restart until a member joins again, as before.

// Record types of Kafka 4.4's share group records.
const (
	typeShareMember         int16 = 10
	typeShareMetadata       int16 = 11
	typeShareTargetMetadata int16 = 12
	typeShareTargetMember   int16 = 13
	typeShareCurrent        int16 = 14
)

// shareMetadataValue is ShareGroupMetadataValue.
type shareMetadataValue struct {
	epoch        int32
	metadataHash int64
}

func (v shareMetadataValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	dst = kbin.AppendInt64(dst, v.metadataHash)
	return appendTags(dst)
}

func decodeShareMetadata(b []byte) (shareMetadataValue, error) {
	r, err := valueReader(typeShareMetadata, b)
	if err != nil {
		return shareMetadataValue{}, err
	}
	v := shareMetadataValue{epoch: r.Int32(), metadataHash: r.Int64()}
	readTags(r, nil)
	return v, valueDone(typeShareMetadata, r)
}

// shareMemberValue is ShareGroupMemberMetadataValue.
type shareMemberValue struct {
	rackID               *string
	clientID, clientHost string
	topics               []string
}

func (v shareMemberValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendCompactNullableString(dst, v.rackID)
	dst = kbin.AppendCompactString(dst, v.clientID)
	dst = kbin.AppendCompactString(dst, v.clientHost)
	dst = appendStrings(dst, v.topics)
	return appendTags(dst)
}

func decodeShareMember(b []byte) (shareMemberValue, error) {
	r, err := valueReader(typeShareMember, b)
	if err != nil {
		return shareMemberValue{}, err
	}
	v := shareMemberValue{rackID: r.CompactNullableString(), clientID: r.CompactString(), clientHost: r.CompactString()}
	v.topics = readStrings(r)
	readTags(r, nil)
	return v, valueDone(typeShareMember, r)
}

// appendTopicPartitions appends partitions by topic id (the TopicPartition
// structs of the assignment records).
func appendTopicPartitions(dst []byte, ts []kmsg.AssignmentTopicPartition) []byte {
	return appendArray(dst, ts, func(dst []byte, t kmsg.AssignmentTopicPartition) []byte {
		dst = append(dst, t.TopicID[:]...)
		dst = appendInt32s(dst, t.Partitions)
		return appendTags(dst)
	})
}

func readTopicPartitions(r *kbin.Reader) []kmsg.AssignmentTopicPartition {
	return readArray(r, func() kmsg.AssignmentTopicPartition {
		var t kmsg.AssignmentTopicPartition
		t.TopicID = r.Uuid()
		t.Partitions = readInt32s(r)
		readTags(r, nil)
		return t
	})
}

// targetMemberValue is ShareGroupTargetAssignmentMemberValue and
// ConsumerGroupTargetAssignmentMemberValue (the same fields).
type targetMemberValue struct {
	partitions []kmsg.AssignmentTopicPartition
}

func (v targetMemberValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = appendTopicPartitions(dst, v.partitions)
	return appendTags(dst)
}

func decodeTargetMember(typ int16, b []byte) (targetMemberValue, error) {
	r, err := valueReader(typ, b)
	if err != nil {
		return targetMemberValue{}, err
	}
	v := targetMemberValue{partitions: readTopicPartitions(r)}
	readTags(r, nil)
	return v, valueDone(typ, r)
}

// shareCurrentValue is ShareGroupCurrentMemberAssignmentValue.
type shareCurrentValue struct {
	epoch, prevEpoch int32
	state            int8
	partitions       []kmsg.AssignmentTopicPartition
}

func (v shareCurrentValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	dst = kbin.AppendInt32(dst, v.prevEpoch)
	dst = kbin.AppendInt8(dst, v.state)
	dst = appendTopicPartitions(dst, v.partitions)
	return appendTags(dst)
}

func decodeShareCurrent(b []byte) (shareCurrentValue, error) {
	r, err := valueReader(typeShareCurrent, b)
	if err != nil {
		return shareCurrentValue{}, err
	}
	v := shareCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
	v.partitions = readTopicPartitions(r)
	readTags(r, nil)
	return v, valueDone(typeShareCurrent, r)
}

// shareReplay is a share group's records as a partition's replay left them.
type shareReplay = groupReplay[shareMetadataValue, shareMemberValue, shareCurrentValue]

func newShareReplay() *shareReplay {
	return newGroupReplay(&replayCodec[shareMetadataValue, shareMemberValue, shareCurrentValue]{
		types:    [roleCount]int16{typeShareMember, typeShareMetadata, typeShareTargetMember, typeShareTargetMetadata, typeShareCurrent},
		metadata: decodeShareMetadata, member: decodeShareMember, current: decodeShareCurrent,
	})
}

// shareGroupRecordsLocked puts the share group's group-level records.
func (g *group) shareGroupRecordsLocked(s stateRecords) {
	sg := g.sg
	s.put(typeShareMetadata, "", shareMetadataValue{epoch: sg.epoch, metadataHash: topicsHash(sg.topics)}.appendTo(newValue()))
	s.put(typeShareTargetMetadata, "", targetMetaOf(sg.targetEpoch, sg.targetAt).appendTo(newValue()))
}

// shareMemberRecordsLocked puts the records of share member id, if it is
// still a member.
func (g *group) shareMemberRecordsLocked(s stateRecords, id string) {
	sg := g.sg
	m, ok := sg.members[id]
	if !ok {
		return
	}
	s.put(typeShareMember, id, shareMemberValue{
		rackID: optional(m.rackID), clientID: m.clientID, clientHost: m.clientHost, topics: m.topicNames,
	}.appendTo(newValue()))
	if t, ok := sg.target[id]; ok {
		s.put(typeShareTargetMember, id, targetMemberValue{partitions: g.assignmentByIDLocked(t)}.appendTo(newValue()))
	}
	s.put(typeShareCurrent, id, shareCurrentValue{
		epoch: m.epoch, prevEpoch: m.prevEpoch, state: kafkaMemberStable, partitions: g.assignmentByIDLocked(m.assigned),
	}.appendTo(newValue()))
}

// topicLookup is what the topic catalog said of a topic name.
type topicLookup struct {
	id [16]byte
	ok bool
}

// assignmentByIDLocked is ps by topic id, as the consumer and share
// assignment records hold it; it notes what the catalog said of each topic
// (g.lookups), as the records encoded from it hold only while the catalog says
// the same.
func (g *group) assignmentByIDLocked(ps partSet) []kmsg.AssignmentTopicPartition {
	if g.lookups == nil {
		g.lookups = map[string]topicLookup{}
	}
	for tp := range ps {
		if _, ok := g.lookups[tp.topic]; !ok {
			id, _, exists := g.topicsLocked().Topic(tp.topic)
			g.lookups[tp.topic] = topicLookup{id, exists}
		}
	}
	return g.c.assignmentTopics(ps)
}

// catalogChangedLocked reports whether the catalog says something else of a
// topic than when a member's records were encoded from it: a topic of an
// assignment deleted, created or created again, so that every member's
// records must be compared again.
func (g *group) catalogChangedLocked() bool {
	cat := g.topicsLocked()
	version := cat.TopicNamesVersion()
	if version == g.lookupsVersion {
		return false
	}
	for name, was := range g.lookups {
		if id, _, ok := cat.Topic(name); ok != was.ok || id != was.id {
			return true
		}
	}
	g.lookupsVersion = version
	return false
}

// forgetLookupsLocked empties g.lookups before the whole group is compared
// with the log, encoding every record from the catalog as it is now.
func (g *group) forgetLookupsLocked() {
	g.lookupsVersion = g.topicsLocked().TopicNamesVersion()
	clear(g.lookups)
}

// loadShareLocked restores a share group from its records: its epochs and
// members with their subscriptions and assignments; partitions of topics that
// no longer exist are dropped. A group whose topics changed since (another
// metadata hash) takes a new group epoch at its next heartbeat.
func (g *group) loadShareLocked(sr *shareReplay) {
	sg := newShareGroup()
	g.sg, g.protocolType = sg, shareProtocolType
	if g.written == nil {
		g.written = map[string][]byte{}
	}
	maps.Copy(g.written, sr.raw)
	sg.epoch = sr.metadata.epoch
	if tm := sr.targetMeta; tm != nil {
		sg.targetEpoch = tm.epoch
		if tm.timeMs != 0 {
			sg.targetAt = time.UnixMilli(tm.timeMs)
		}
	}
	for id, mv := range sr.members {
		cur := sr.current[id]
		sg.addMember(&smember{
			id: id, rackID: deref(mv.rackID), clientID: mv.clientID, clientHost: mv.clientHost,
			epoch: cur.epoch, prevEpoch: cur.prevEpoch, topicNames: mv.topics, assigned: g.partitionsByIDLocked(cur.partitions),
		})
		if t, ok := sr.targets[id]; ok {
			sg.target[id] = g.partitionsByIDLocked(t.partitions)
		}
	}
	sg.topics = sg.topicsCheck.take(g.topicsLocked(), g.shareSubscriptionLocked)
	sg.stale = topicsHash(sg.topics) != sr.metadata.metadataHash
	g.syncShareViewLocked()
}

// armLoadedShareLocked starts the sessions of a loaded share group's members.
func (g *group) armLoadedShareLocked() {
	if g.sg == nil {
		return
	}
	for _, m := range g.sg.sortedMembers() {
		g.armShareSessionLocked(m)
	}
}
