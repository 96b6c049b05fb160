package group

import (
	"bytes"
	"encoding/binary"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds a KIP-848 consumer group in __consumer_offsets, in the
// record schemas Kafka 4.4 writes (its group coordinator's ConsumerGroup*Key/
// Value; modern_records.go has the framing and how writes follow the state),
// so that a coordinator loading the partition after a failover or restart has
// the group's epochs, members and assignments, and its members carry on at
// their epochs. Partitions go by topic id.
//
//	type | key                    | value
//	   3 | group                  | metadata: group epoch, metadata hash (tagged)
//	   5 | group, member          | member: instance, rack, client, host,
//	     |                        | subscribed topics, pattern, rebalance timeout,
//	     |                        | server assignor, classic member (tagged:
//	     |                        | session timeout, protocols with metadata)
//	   6 | group                  | target assignment metadata: epoch, time (tagged)
//	   7 | group, member          | target assignment: partitions by topic id
//	   8 | group, member          | current assignment: member epoch, previous
//	     |                        | epoch, state, partitions with the epochs they
//	     |                        | were assigned in (tagged), partitions pending
//	     |                        | revocation
//	  16 | group, pattern         | a subscription pattern's resolution: the
//	     |                        | topics it matched, the catalog version and
//	     |                        | the time it was resolved at
//
// A member that speaks the classic protocol (migration.go) carries its
// session timeout and protocols in the member record, as in Kafka. A pattern
// some member subscribes with has a record from its first resolution on,
// written again when it resolves to other topics (a catalog version that
// leaves them as they were writes nothing), and a tombstone once no member
// uses it; a loaded group takes its patterns' topics from these records and
// resolves one again only when the catalog's version is not the one it was
// last resolved at. Partitions pending revocation are not given the epochs
// they were assigned in (Strata does not keep them). Kafka's type 4
// (subscription metadata, before 4.1) is skipped.
//
// As in Kafka, a member is kept until it leaves or its session times out after
// the load, and the group until it is deleted (tombstones for all its
// records); once loaded, every member's session starts again, and the
// rebalance timeout of a member still revoking (a classic member's join
// deadline). A ConsumerGroupHeartbeat, and a classic member's JoinGroup and
// LeaveGroup to a consumer group, are answered once their records are
// appended. A node that predates these records skips their keys (a key
// type it does not know); a directory written before them has none: its
// consumer groups load with their offsets only, and their members rejoin.

// Record types of Kafka 4.4's consumer group records.
const (
	typeConsumerMetadata       int16 = 3
	typeConsumerMember         int16 = 5
	typeConsumerTargetMetadata int16 = 6
	typeConsumerTargetMember   int16 = 7
	typeConsumerCurrent        int16 = 8
	typeConsumerRegex          int16 = 16
)

// consumerMetadataValue is ConsumerGroupMetadataValue.
type consumerMetadataValue struct {
	epoch int32
	// metadataHash is tagged field 0, left out when 0.
	metadataHash int64
}

const tagMetadataHash = 0

func (v consumerMetadataValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	if v.metadataHash == 0 {
		return appendTags(dst)
	}
	return appendTags(dst, taggedField{tagMetadataHash, kbin.AppendInt64(nil, v.metadataHash)})
}

func decodeConsumerMetadata(b []byte) (consumerMetadataValue, error) {
	r, err := valueReader(typeConsumerMetadata, b)
	if err != nil {
		return consumerMetadataValue{}, err
	}
	v := consumerMetadataValue{epoch: r.Int32()}
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagMetadataHash && len(data) == 8 {
			v.metadataHash = int64(binary.BigEndian.Uint64(data))
		}
	})
	return v, valueDone(typeConsumerMetadata, r)
}

// consumerMemberValue is ConsumerGroupMemberMetadataValue.
type consumerMemberValue struct {
	instanceID, rackID   *string
	clientID, clientHost string
	topics               []string
	regex                *string
	rebalanceTimeoutMs   int32
	serverAssignor       *string
	// classic is tagged field 0 (ClassicMemberMetadata), nil for a member
	// speaking the consumer protocol.
	classic *classicMemberValue
}

// classicMemberValue is ClassicMemberMetadata.
type classicMemberValue struct {
	sessionTimeoutMs int32
	protocols        []protocol
}

const tagClassicMember = 0

func (v consumerMemberValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendCompactNullableString(dst, v.instanceID)
	dst = kbin.AppendCompactNullableString(dst, v.rackID)
	dst = kbin.AppendCompactString(dst, v.clientID)
	dst = kbin.AppendCompactString(dst, v.clientHost)
	dst = appendStrings(dst, v.topics)
	dst = kbin.AppendCompactNullableString(dst, v.regex)
	dst = kbin.AppendInt32(dst, v.rebalanceTimeoutMs)
	dst = kbin.AppendCompactNullableString(dst, v.serverAssignor)
	if v.classic == nil {
		return appendTags(dst)
	}
	return appendTags(dst, taggedField{tagClassicMember, v.classic.appendTo(nil)})
}

// appendTo appends the classic member as a present nullable struct.
func (v classicMemberValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, 1)
	dst = kbin.AppendInt32(dst, v.sessionTimeoutMs)
	dst = appendArray(dst, v.protocols, func(dst []byte, p protocol) []byte {
		dst = kbin.AppendCompactString(dst, p.name)
		dst = kbin.AppendCompactBytes(dst, p.metadata)
		return appendTags(dst)
	})
	return appendTags(dst)
}

func decodeConsumerMember(b []byte) (consumerMemberValue, error) {
	r, err := valueReader(typeConsumerMember, b)
	if err != nil {
		return consumerMemberValue{}, err
	}
	v := consumerMemberValue{instanceID: r.CompactNullableString(), rackID: r.CompactNullableString(),
		clientID: r.CompactString(), clientHost: r.CompactString()}
	v.topics = readStrings(r)
	v.regex = r.CompactNullableString()
	v.rebalanceTimeoutMs = r.Int32()
	v.serverAssignor = r.CompactNullableString()
	var classicErr error
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagClassicMember {
			v.classic, classicErr = decodeClassicMember(data)
		}
	})
	if classicErr != nil {
		return consumerMemberValue{}, classicErr
	}
	return v, valueDone(typeConsumerMember, r)
}

// decodeClassicMember reads tagged field ClassicMemberMetadata: nil when null.
func decodeClassicMember(b []byte) (*classicMemberValue, error) {
	r := &kbin.Reader{Src: b}
	if r.Int8() < 0 {
		return nil, valueDone(typeConsumerMember, r)
	}
	v := &classicMemberValue{sessionTimeoutMs: r.Int32()}
	v.protocols = readArray(r, func() protocol {
		p := protocol{name: r.CompactString(), metadata: bytes.Clone(r.CompactBytes())}
		readTags(r, nil)
		return p
	})
	readTags(r, nil)
	return v, valueDone(typeConsumerMember, r)
}

// consumerRegexValue is ConsumerGroupRegularExpressionValue: what a pattern
// resolved to, at which catalog version (Kafka: the metadata image's offset)
// and when.
type consumerRegexValue struct {
	topics      []string
	version     int64
	timestampMs int64
}

func (v consumerRegexValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = appendStrings(dst, v.topics)
	dst = kbin.AppendInt64(dst, v.version)
	dst = kbin.AppendInt64(dst, v.timestampMs)
	return appendTags(dst)
}

func decodeConsumerRegex(b []byte) (consumerRegexValue, error) {
	r, err := valueReader(typeConsumerRegex, b)
	if err != nil {
		return consumerRegexValue{}, err
	}
	v := consumerRegexValue{topics: readStrings(r), version: r.Int64(), timestampMs: r.Int64()}
	readTags(r, nil)
	return v, valueDone(typeConsumerRegex, r)
}

// epochPartitions is one topic of a current assignment: its partitions and
// the member epochs they were assigned in (tagged field AssignmentEpochs; nil
// when null or not written).
type epochPartitions struct {
	topicID    [16]byte
	partitions []int32
	epochs     []int32
}

// consumerCurrentValue is ConsumerGroupCurrentMemberAssignmentValue.
type consumerCurrentValue struct {
	epoch, prevEpoch int32
	state            int8
	assigned         []epochPartitions
	revoking         []epochPartitions
}

func (v consumerCurrentValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	dst = kbin.AppendInt32(dst, v.prevEpoch)
	dst = kbin.AppendInt8(dst, v.state)
	dst = appendEpochPartitions(dst, v.assigned)
	dst = appendEpochPartitions(dst, v.revoking)
	return appendTags(dst)
}

func appendEpochPartitions(dst []byte, ts []epochPartitions) []byte {
	return appendArray(dst, ts, func(dst []byte, t epochPartitions) []byte {
		dst = append(dst, t.topicID[:]...)
		dst = appendInt32s(dst, t.partitions)
		// Kafka writes the field even when null (a null array), unlike the
		// streams schema's.
		epochs := kbin.AppendCompactNullableArrayLen(nil, len(t.epochs), t.epochs == nil)
		for _, e := range t.epochs {
			epochs = kbin.AppendInt32(epochs, e)
		}
		return appendTags(dst, taggedField{tagAssignmentEpochs, epochs})
	})
}

func readEpochPartitions(r *kbin.Reader) []epochPartitions {
	return readArray(r, func() epochPartitions {
		t := epochPartitions{topicID: r.Uuid(), partitions: readInt32s(r)}
		t.epochs = readAssignmentEpochs(r)
		return t
	})
}

func decodeConsumerCurrent(b []byte) (consumerCurrentValue, error) {
	r, err := valueReader(typeConsumerCurrent, b)
	if err != nil {
		return consumerCurrentValue{}, err
	}
	v := consumerCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
	v.assigned = readEpochPartitions(r)
	v.revoking = readEpochPartitions(r)
	readTags(r, nil)
	return v, valueDone(typeConsumerCurrent, r)
}

// consumerReplay is a consumer group's records as a partition's replay left
// them: those it shares with share groups, and its patterns' resolutions.
type consumerReplay struct {
	*groupReplay[consumerMetadataValue, consumerMemberValue, consumerCurrentValue]
	regexes map[string]consumerRegexValue // pattern -> resolution
}

func newConsumerReplay() *consumerReplay {
	return &consumerReplay{
		groupReplay: newGroupReplay(&replayCodec[consumerMetadataValue, consumerMemberValue, consumerCurrentValue]{
			types:    [roleCount]int16{typeConsumerMember, typeConsumerMetadata, typeConsumerTargetMember, typeConsumerTargetMetadata, typeConsumerCurrent},
			metadata: decodeConsumerMetadata, member: decodeConsumerMember, current: decodeConsumerCurrent,
		}),
		regexes: map[string]consumerRegexValue{},
	}
}

// apply folds one record (value nil: a tombstone) into the replay.
func (cr *consumerReplay) apply(k decodedKey, key, value []byte) error {
	if k.typ == typeConsumerRegex {
		if err := replayMember(cr.regexes, k.member, value, decodeConsumerRegex); err != nil {
			return err
		}
	}
	return cr.groupReplay.apply(k, key, value)
}

// consumerGroupRecordsLocked puts the consumer group's group-level records,
// its patterns' resolutions among them (a pattern is resolved by the epoch
// bump its first member brings).
func (g *group) consumerGroupRecordsLocked(s stateRecords) {
	cg := g.cg
	s.put(typeConsumerMetadata, "", consumerMetadataValue{epoch: cg.epoch, metadataHash: cg.metadataHash}.appendTo(newValue()))
	s.put(typeConsumerTargetMetadata, "", targetMetaOf(cg.targetEpoch, cg.targetAt).appendTo(newValue()))
	for regex, p := range cg.subs.patterns {
		if !p.resolved {
			continue
		}
		s.put(typeConsumerRegex, regex, consumerRegexValue{
			topics: p.topics, version: int64(p.version), timestampMs: p.at.UnixMilli(),
		}.appendTo(newValue()))
	}
}

// consumerMemberRecordsLocked puts the records of consumer member id, if it
// is still a member.
func (g *group) consumerMemberRecordsLocked(s stateRecords, id string) {
	cg := g.cg
	m, ok := cg.members[id]
	if !ok {
		return
	}
	mv := consumerMemberValue{
		instanceID: optional(m.instanceID), rackID: optional(m.rackID),
		clientID: m.clientID, clientHost: m.clientHost,
		topics: m.topicNames, regex: optional(m.regex),
		rebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
		serverAssignor:     optional(m.serverAssignor),
	}
	if m.classic != nil {
		mv.classic = &classicMemberValue{sessionTimeoutMs: int32(m.classic.sessionTimeout.Milliseconds()), protocols: m.classic.protocols}
	}
	s.put(typeConsumerMember, id, mv.appendTo(newValue()))
	if t, ok := cg.target[id]; ok {
		s.put(typeConsumerTargetMember, id, targetMemberValue{partitions: g.assignmentByIDLocked(t)}.appendTo(newValue()))
	}
	s.put(typeConsumerCurrent, id, consumerCurrentValue{
		epoch: m.epoch, prevEpoch: m.prevEpoch, state: kafkaMemberState(m.state),
		assigned: g.epochPartitionsLocked(ownedSet(m.assigned), m.assigned),
		revoking: g.epochPartitionsLocked(m.revoking, nil),
	}.appendTo(newValue()))
}

// consumerPatternNamesLocked names the pattern records a comparison of the
// group-level records covers: the patterns members use, and those dropped
// since the last comparison (taken now).
func (g *group) consumerPatternNamesLocked() (int16, []string) {
	s := &g.cg.subs
	names := make([]string, 0, len(s.patterns)+len(s.dropped))
	for regex := range s.patterns {
		names = append(names, regex)
	}
	for regex := range s.dropped {
		names = append(names, regex)
	}
	clear(s.dropped)
	return typeConsumerRegex, names
}

// epochPartitionsLocked is ps by topic id with, when epochs is set, the epoch
// each partition was assigned in.
func (g *group) epochPartitionsLocked(ps partSet, epochs map[topicPartition]int32) []epochPartitions {
	ts := g.assignmentByIDLocked(ps)
	out := make([]epochPartitions, 0, len(ts))
	for _, t := range ts {
		ep := epochPartitions{topicID: t.TopicID, partitions: t.Partitions}
		if epochs != nil {
			ep.epochs = make([]int32, len(t.Partitions))
			for i, p := range t.Partitions {
				ep.epochs[i] = epochs[topicPartition{t.Topic, p}]
			}
		}
		out = append(out, ep)
	}
	return out
}

// persistConsumerLocked queues the records that bring the log in line with a
// consumer group's state, or tombstones for those it wrote when the group is
// no longer one (a classic group now); streams and share groups write their
// own. done, when set, runs as persistRecordsLocked says, for a request
// answered once the log holds what it changed; the result reports whether
// there is anything to wait for.
func (g *group) persistConsumerLocked(done func(error)) bool {
	if g.cg != nil || (g.st == nil && g.sg == nil && len(g.written) > 0) {
		return g.persistRecordsLocked(done)
	}
	return false
}

// loadConsumerLocked restores a consumer group from its records: its epochs,
// target, patterns' resolutions, and members with their subscriptions,
// epochs, states, assignments (with pending revocations) and, for classic
// members, protocols. Partitions
// of topics that no longer exist are dropped; a group whose topics changed
// since (another metadata hash) starts a new group epoch at its next
// heartbeat.
func (g *group) loadConsumerLocked(cr *consumerReplay) {
	cg := newConsumerGroup()
	g.cg, g.protocolType = cg, consumerProtocolType
	if g.written == nil {
		g.written = map[string][]byte{}
	}
	maps.Copy(g.written, cr.raw)
	cg.epoch = cr.metadata.epoch
	if tm := cr.targetMeta; tm != nil {
		cg.targetEpoch = tm.epoch
		if tm.timeMs != 0 {
			cg.targetAt = time.UnixMilli(tm.timeMs)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cr.members)) {
		m := g.loadConsumerMemberLocked(id, cr.members[id], cr.current[id])
		cg.addMember(m)
		if m.instanceID != "" {
			cg.static[m.instanceID] = id
		}
		for tp := range m.assigned {
			cg.owners[tp] = id
		}
		for tp := range m.revoking {
			cg.owners[tp] = id
		}
		if t, ok := cr.targets[id]; ok {
			cg.target[id] = g.partitionsByIDLocked(t.partitions)
		}
	}
	for regex, rv := range cr.regexes {
		if p := cg.subs.patterns[regex]; p != nil {
			p.resolved, p.topics = true, rv.topics
			p.version, p.checked, p.at = uint64(rv.version), uint64(rv.version), time.UnixMilli(rv.timestampMs)
		}
	}
	g.refreshTopicsLocked()
	if cg.metadataHash != cr.metadata.metadataHash {
		cg.setTopics(map[string]topicMeta{}) // the next heartbeat sees them change
	}
	g.syncClassicViewLocked()
}

// loadConsumerMemberLocked is member id as its records hold it.
func (g *group) loadConsumerMemberLocked(id string, mv consumerMemberValue, cur consumerCurrentValue) *cmember {
	m := &cmember{
		id: id, instanceID: deref(mv.instanceID), rackID: deref(mv.rackID),
		clientID: mv.clientID, clientHost: mv.clientHost,
		epoch: cur.epoch, prevEpoch: cur.prevEpoch, state: memberStateOf(cur.state),
		rebalanceTimeout: time.Duration(mv.rebalanceTimeoutMs) * time.Millisecond,
		topicNames:       sortedTopics(mv.topics),
		serverAssignor:   deref(mv.serverAssignor),
		assigned:         map[topicPartition]int32{},
	}
	if pattern := deref(mv.regex); pattern != "" {
		if re, err := regexp.Compile("^(?:" + pattern + ")$"); err == nil {
			m.regex, m.re = pattern, re
		} else {
			g.c.log.Warn("consumer group member's pattern does not compile: dropped", "group", g.id, "member", id, "pattern", pattern, "err", err)
		}
	}
	if cv := mv.classic; cv != nil && len(cv.protocols) > 0 {
		m.classic = &classicMember{sessionTimeout: time.Duration(cv.sessionTimeoutMs) * time.Millisecond, protocols: cv.protocols}
	}
	cat := g.topicsLocked()
	for _, t := range cur.assigned {
		name, ok := cat.TopicName(t.topicID)
		if !ok {
			continue
		}
		for i, p := range t.partitions {
			e := cur.epoch
			if i < len(t.epochs) {
				e = t.epochs[i]
			}
			m.assigned[topicPartition{name, p}] = e
		}
	}
	var revoking []kmsg.AssignmentTopicPartition
	for _, t := range cur.revoking {
		revoking = append(revoking, kmsg.AssignmentTopicPartition{TopicID: t.topicID, Partitions: t.partitions})
	}
	if rev := g.partitionsByIDLocked(revoking); len(rev) > 0 {
		m.revoking = rev
	}
	return m
}

// partitionsByIDLocked maps partitions by topic id to a set, leaving out
// topics that no longer exist.
func (g *group) partitionsByIDLocked(ts []kmsg.AssignmentTopicPartition) partSet {
	cat := g.topicsLocked()
	out := partSet{}
	for _, t := range ts {
		if name, ok := cat.TopicName(t.TopicID); ok {
			for _, p := range t.Partitions {
				out[topicPartition{name, p}] = struct{}{}
			}
		}
	}
	return out
}

// armLoadedConsumerLocked starts the timers of a loaded consumer group's
// members, as Kafka's coordinator does once loaded: each one's session, and
// the rebalance timeout of one still revoking; for a classic member that is
// its join deadline (it was told to rejoin and revoke in its next join).
func (g *group) armLoadedConsumerLocked() {
	if g.cg == nil {
		return
	}
	for _, m := range g.cg.sortedMembers() {
		g.armConsumerSessionLocked(m)
		switch {
		case m.state != memberUnrevoked:
		case m.classic != nil:
			g.armClassicJoinTimerLocked(m)
		default:
			g.armRevokeTimerLocked(m)
		}
	}
}
