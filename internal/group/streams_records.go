package group

import (
	"bytes"
	"encoding/binary"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds a streams group's state in __consumer_offsets, in the record
// schemas Kafka 4.4 writes (its group coordinator's StreamsGroup*Key/Value), so a
// coordinator that loads the partition after a failover or restart has the
// group, its epochs, topology, members and assignments. A key's int16 prefix is
// its record type (Kafka's CoordinatorRecordType); modern_records.go has the
// framing and how writes follow the state.
//
//	type | key                    | value
//	  17 | group                  | metadata: epoch, metadata hash, tagged fields
//	  19 | group, member          | member: instance, rack, client, host, rebalance
//	     |                        | timeout, topology epoch, process, endpoint, tags
//	  20 | group                  | target assignment metadata: epoch, time (tagged)
//	  21 | group, member          | target assignment: active, standby, warm-up tasks
//	  22 | group, member          | current assignment: epochs, state, tasks, tasks
//	     |                        | pending revocation
//	  23 | group                  | topology: epoch, subtopologies
//
// A heartbeat answers once its group's records are appended, as Kafka's does.
//
// A node that predates these records skips their keys (a key type it does not
// know) and sees only the group's offsets; a directory written before them has
// none, and its streams groups load as before (their members rejoin).

// Record types of Kafka 4.4's streams group records.
const (
	typeStreamsMetadata       int16 = 17
	typeStreamsMember         int16 = 19
	typeStreamsTargetMetadata int16 = 20
	typeStreamsTargetMember   int16 = 21
	typeStreamsCurrent        int16 = 22
	typeStreamsTopology       int16 = 23
)

// Kafka's StreamsGroupMember.MemberState values (current assignment records).
const (
	kafkaMemberStable     int8 = 1
	kafkaMemberUnrevoked  int8 = 2
	kafkaMemberUnreleased int8 = 3
)

// streamsMetadataValue is StreamsGroupMetadataValue.
type streamsMetadataValue struct {
	epoch        int32
	metadataHash int64
	// validatedTopologyEpoch is the topology epoch whose topics were found in a
	// valid configuration, -1 for none (tagged field 0).
	validatedTopologyEpoch int32
}

const tagValidatedTopologyEpoch = 0

func (v streamsMetadataValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	dst = kbin.AppendInt64(dst, v.metadataHash)
	var tags []taggedField
	if v.validatedTopologyEpoch != -1 {
		tags = append(tags, taggedField{tagValidatedTopologyEpoch, kbin.AppendInt32(nil, v.validatedTopologyEpoch)})
	}
	return appendTags(dst, tags...)
}

func decodeStreamsMetadata(b []byte) (streamsMetadataValue, error) {
	r, err := valueReader(typeStreamsMetadata, b)
	if err != nil {
		return streamsMetadataValue{}, err
	}
	v := streamsMetadataValue{epoch: r.Int32(), metadataHash: r.Int64(), validatedTopologyEpoch: -1}
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagValidatedTopologyEpoch && len(data) == 4 {
			v.validatedTopologyEpoch = int32(binary.BigEndian.Uint32(data))
		}
	})
	return v, valueDone(typeStreamsMetadata, r)
}

// streamsMemberValue is StreamsGroupMemberMetadataValue.
type streamsMemberValue struct {
	instanceID, rackID   *string
	clientID, clientHost string
	rebalanceTimeoutMs   int32
	topologyEpoch        int32
	processID            string
	endpoint             *kmsg.StreamsGroupHeartbeatRequestUserEndpoint
	clientTags           []kmsg.StreamsGroupHeartbeatRequestClientTag
}

func (v streamsMemberValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendCompactNullableString(dst, v.instanceID)
	dst = kbin.AppendCompactNullableString(dst, v.rackID)
	dst = kbin.AppendCompactString(dst, v.clientID)
	dst = kbin.AppendCompactString(dst, v.clientHost)
	dst = kbin.AppendInt32(dst, v.rebalanceTimeoutMs)
	dst = kbin.AppendInt32(dst, v.topologyEpoch)
	dst = kbin.AppendCompactString(dst, v.processID)
	if v.endpoint == nil {
		dst = kbin.AppendInt8(dst, -1)
	} else {
		dst = kbin.AppendInt8(dst, 1)
		dst = kbin.AppendCompactString(dst, v.endpoint.Host)
		dst = kbin.AppendUint16(dst, v.endpoint.Port)
		dst = appendTags(dst)
	}
	dst = kbin.AppendCompactArrayLen(dst, len(v.clientTags))
	for _, t := range v.clientTags {
		dst = kbin.AppendCompactString(dst, t.Key)
		dst = kbin.AppendCompactString(dst, t.Value)
		dst = appendTags(dst)
	}
	return appendTags(dst)
}

func decodeStreamsMember(b []byte) (streamsMemberValue, error) {
	r, err := valueReader(typeStreamsMember, b)
	if err != nil {
		return streamsMemberValue{}, err
	}
	var v streamsMemberValue
	v.instanceID = r.CompactNullableString()
	v.rackID = r.CompactNullableString()
	v.clientID = r.CompactString()
	v.clientHost = r.CompactString()
	v.rebalanceTimeoutMs = r.Int32()
	v.topologyEpoch = r.Int32()
	v.processID = r.CompactString()
	if r.Int8() >= 0 {
		e := kmsg.NewStreamsGroupHeartbeatRequestUserEndpoint()
		e.Host, e.Port = r.CompactString(), r.Uint16()
		readTags(r, nil)
		v.endpoint = &e
	}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		t := kmsg.NewStreamsGroupHeartbeatRequestClientTag()
		t.Key, t.Value = r.CompactString(), r.CompactString()
		readTags(r, nil)
		v.clientTags = append(v.clientTags, t)
	}
	readTags(r, nil)
	return v, valueDone(typeStreamsMember, r)
}

// streamsTasks is a list of tasks as a record holds them: per subtopology, its
// partitions and, for a member's current active tasks, the member epoch each
// came in (Kafka's AssignmentEpochs, tagged field 0 of TaskIds; nil elsewhere).
type streamsTasks struct {
	subtopology string
	partitions  []int32
	epochs      []int32
}

// tasksOf lists a set of tasks by subtopology, sorted; epochOf, when set, gives
// each task's assignment epoch.
func tasksOf(ts partSet, epochOf func(topicPartition) int32) []streamsTasks {
	var out []streamsTasks
	for _, tp := range ts.sorted() {
		if n := len(out); n == 0 || out[n-1].subtopology != tp.topic {
			out = append(out, streamsTasks{subtopology: tp.topic})
		}
		t := &out[len(out)-1]
		t.partitions = append(t.partitions, tp.partition)
		if epochOf != nil {
			t.epochs = append(t.epochs, epochOf(tp))
		}
	}
	return out
}

// set is the tasks as a set.
func taskSet(ts []streamsTasks) partSet {
	out := partSet{}
	for _, t := range ts {
		for _, p := range t.partitions {
			out[topicPartition{t.subtopology, p}] = struct{}{}
		}
	}
	return out
}

func appendTasks(dst []byte, ts []streamsTasks) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = kbin.AppendCompactString(dst, t.subtopology)
		dst = appendInt32s(dst, t.partitions)
		dst = appendAssignmentEpochs(dst, t.epochs)
	}
	return dst
}

func readTasks(r *kbin.Reader) []streamsTasks {
	var out []streamsTasks
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		t := streamsTasks{subtopology: r.CompactString(), partitions: readInt32s(r)}
		t.epochs = readAssignmentEpochs(r)
		out = append(out, t)
	}
	return out
}

// streamsTargetValue is StreamsGroupTargetAssignmentMemberValue.
type streamsTargetValue struct {
	active, standby, warmup []streamsTasks
}

func (v streamsTargetValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = appendTasks(dst, v.active)
	dst = appendTasks(dst, v.standby)
	dst = appendTasks(dst, v.warmup)
	return appendTags(dst)
}

func decodeStreamsTarget(b []byte) (streamsTargetValue, error) {
	r, err := valueReader(typeStreamsTargetMember, b)
	if err != nil {
		return streamsTargetValue{}, err
	}
	v := streamsTargetValue{active: readTasks(r), standby: readTasks(r), warmup: readTasks(r)}
	readTags(r, nil)
	return v, valueDone(typeStreamsTargetMember, r)
}

// streamsCurrentValue is StreamsGroupCurrentMemberAssignmentValue.
type streamsCurrentValue struct {
	epoch, prevEpoch        int32
	state                   int8
	active, standby, warmup []streamsTasks
	// The tasks pending revocation: only active ones exist here.
	activeRevoking, standbyRevoking, warmupRevoking []streamsTasks
}

func (v streamsCurrentValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	dst = kbin.AppendInt32(dst, v.prevEpoch)
	dst = kbin.AppendInt8(dst, v.state)
	for _, ts := range [][]streamsTasks{v.active, v.standby, v.warmup, v.activeRevoking, v.standbyRevoking, v.warmupRevoking} {
		dst = appendTasks(dst, ts)
	}
	return appendTags(dst)
}

func decodeStreamsCurrent(b []byte) (streamsCurrentValue, error) {
	r, err := valueReader(typeStreamsCurrent, b)
	if err != nil {
		return streamsCurrentValue{}, err
	}
	v := streamsCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
	v.active, v.standby, v.warmup = readTasks(r), readTasks(r), readTasks(r)
	v.activeRevoking, v.standbyRevoking, v.warmupRevoking = readTasks(r), readTasks(r), readTasks(r)
	readTags(r, nil)
	return v, valueDone(typeStreamsCurrent, r)
}

// StreamsGroupTopologyValue is the topology a member registered; it is held as
// the heartbeat's topology.
func appendTopologyValue(dst []byte, top *kmsg.StreamsGroupHeartbeatRequestTopology) []byte {
	topicInfos := func(dst []byte, tis []kmsg.TopicInfo) []byte {
		dst = kbin.AppendCompactArrayLen(dst, len(tis))
		for _, ti := range tis {
			dst = kbin.AppendCompactString(dst, ti.Topic)
			dst = kbin.AppendInt32(dst, ti.NumPartitions)
			dst = kbin.AppendInt16(dst, ti.ReplicationFactor)
			dst = kbin.AppendCompactArrayLen(dst, len(ti.Configs))
			for _, c := range ti.Configs {
				dst = kbin.AppendCompactString(dst, c.Key)
				dst = kbin.AppendCompactString(dst, c.Value)
				dst = appendTags(dst)
			}
			dst = appendTags(dst)
		}
		return dst
	}
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, top.Epoch)
	dst = kbin.AppendCompactArrayLen(dst, len(top.Subtopologies))
	for _, s := range top.Subtopologies {
		dst = kbin.AppendCompactString(dst, s.SubtopologyID)
		dst = appendStrings(dst, s.SourceTopics)
		dst = appendStrings(dst, s.SourceTopicRegex)
		dst = topicInfos(dst, s.StateChangelogTopics)
		dst = appendStrings(dst, s.RepartitionSinkTopics)
		dst = topicInfos(dst, s.RepartitionSourceTopics)
		dst = kbin.AppendCompactArrayLen(dst, len(s.CopartitionGroups))
		for _, cg := range s.CopartitionGroups {
			dst = appendInt16s(dst, cg.SourceTopics)
			dst = appendInt16s(dst, cg.SourceTopicRegex)
			dst = appendInt16s(dst, cg.RepartitionSourceTopics)
			dst = appendTags(dst)
		}
		dst = appendTags(dst)
	}
	return appendTags(dst)
}

func decodeStreamsTopology(b []byte) (*kmsg.StreamsGroupHeartbeatRequestTopology, error) {
	r, err := valueReader(typeStreamsTopology, b)
	if err != nil {
		return nil, err
	}
	topicInfos := func() []kmsg.TopicInfo {
		out := []kmsg.TopicInfo{}
		for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
			ti := kmsg.NewTopicInfo()
			ti.Topic, ti.NumPartitions, ti.ReplicationFactor = r.CompactString(), r.Int32(), r.Int16()
			for m := r.CompactArrayLen(); m > 0 && r.Ok(); m-- {
				c := kmsg.NewTopicInfoConfig()
				c.Key, c.Value = r.CompactString(), r.CompactString()
				readTags(r, nil)
				ti.Configs = append(ti.Configs, c)
			}
			readTags(r, nil)
			out = append(out, ti)
		}
		return out
	}
	top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	top.Epoch = r.Int32()
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		s.SubtopologyID = r.CompactString()
		s.SourceTopics = readStrings(r)
		s.SourceTopicRegex = readStrings(r)
		s.StateChangelogTopics = topicInfos()
		s.RepartitionSinkTopics = readStrings(r)
		s.RepartitionSourceTopics = topicInfos()
		for m := r.CompactArrayLen(); m > 0 && r.Ok(); m-- {
			cg := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup()
			cg.SourceTopics, cg.SourceTopicRegex, cg.RepartitionSourceTopics = readInt16s(r), readInt16s(r), readInt16s(r)
			readTags(r, nil)
			s.CopartitionGroups = append(s.CopartitionGroups, cg)
		}
		readTags(r, nil)
		top.Subtopologies = append(top.Subtopologies, s)
	}
	readTags(r, nil)
	return &top, valueDone(typeStreamsTopology, r)
}

// streamsReplay is a streams group's records as a partition's replay left
// them: the latest value of each key, decoded.
type streamsReplay struct {
	raw        map[string][]byte // key -> value, as in the log
	metadata   *streamsMetadataValue
	topology   *kmsg.StreamsGroupHeartbeatRequestTopology
	targetMeta *targetMetaValue
	members    map[string]streamsMemberValue
	targets    map[string]streamsTargetValue
	current    map[string]streamsCurrentValue
}

func newStreamsReplay() *streamsReplay {
	return &streamsReplay{raw: map[string][]byte{}, members: map[string]streamsMemberValue{},
		targets: map[string]streamsTargetValue{}, current: map[string]streamsCurrentValue{}}
}

// apply folds one streams record (value nil: a tombstone) into the replay.
func (sr *streamsReplay) apply(k decodedKey, key, value []byte) error {
	if value == nil {
		delete(sr.raw, string(key))
		switch k.typ {
		case typeStreamsMetadata:
			sr.metadata = nil
		case typeStreamsTopology:
			sr.topology = nil
		case typeStreamsTargetMetadata:
			sr.targetMeta = nil
		case typeStreamsMember:
			delete(sr.members, k.member)
		case typeStreamsTargetMember:
			delete(sr.targets, k.member)
		case typeStreamsCurrent:
			delete(sr.current, k.member)
		}
		return nil
	}
	var err error
	switch k.typ {
	case typeStreamsMetadata:
		var v streamsMetadataValue
		v, err = decodeStreamsMetadata(value)
		sr.metadata = &v
	case typeStreamsTopology:
		sr.topology, err = decodeStreamsTopology(value)
	case typeStreamsTargetMetadata:
		var v targetMetaValue
		v, err = decodeTargetMeta(typeStreamsTargetMetadata, value)
		sr.targetMeta = &v
	case typeStreamsMember:
		sr.members[k.member], err = decodeStreamsMember(value)
	case typeStreamsTargetMember:
		sr.targets[k.member], err = decodeStreamsTarget(value)
	case typeStreamsCurrent:
		sr.current[k.member], err = decodeStreamsCurrent(value)
	}
	if err != nil {
		return err
	}
	sr.raw[string(key)] = bytes.Clone(value)
	return nil
}

// streamsGroupRecordsLocked puts the streams group's group-level records.
func (g *group) streamsGroupRecordsLocked(s stateRecords) {
	sg := g.st
	validated := int32(-1)
	if sg.topology != nil && sg.configured.ready() {
		validated = sg.topology.Epoch
	}
	s.put(typeStreamsMetadata, "", streamsMetadataValue{epoch: sg.epoch, metadataHash: topicsHash(sg.topics), validatedTopologyEpoch: validated}.appendTo(newValue()))
	if sg.topology != nil {
		s.put(typeStreamsTopology, "", appendTopologyValue(newValue(), sg.topology))
	}
	s.put(typeStreamsTargetMetadata, "", targetMetaOf(sg.targetEpoch, sg.targetTime).appendTo(newValue()))
}

// streamsMemberRecordsLocked puts the records of streams member id, if it is
// still a member.
func (g *group) streamsMemberRecordsLocked(s stateRecords, id string) {
	sg := g.st
	m, ok := sg.members[id]
	if !ok {
		return
	}
	s.put(typeStreamsMember, id, streamsMemberValue{
		instanceID: optional(m.instanceID), rackID: optional(m.rackID),
		clientID: m.clientID, clientHost: m.clientHost,
		rebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
		topologyEpoch:      m.topologyEpoch, processID: m.processID,
		endpoint: m.endpoint, clientTags: m.clientTags,
	}.appendTo(newValue()))
	s.put(typeStreamsTargetMember, id, streamsTargetValue{
		active: tasksOf(sg.target[id], nil), standby: tasksOf(sg.standbyTarget[id], nil),
	}.appendTo(newValue()))
	s.put(typeStreamsCurrent, id, streamsCurrentValue{
		epoch: m.epoch, prevEpoch: m.prevEpoch, state: kafkaMemberState(m.state),
		active:         tasksOf(ownedSet(m.assigned), func(tp topicPartition) int32 { return m.assigned[tp] }),
		standby:        tasksOf(m.standby, nil),
		warmup:         tasksOf(m.warmup, nil),
		activeRevoking: tasksOf(m.revoking, nil),
	}.appendTo(newValue()))
}

func kafkaMemberState(s memberState) int8 {
	switch s {
	case memberUnrevoked:
		return kafkaMemberUnrevoked
	case memberUnreleased:
		return kafkaMemberUnreleased
	}
	return kafkaMemberStable
}

func memberStateOf(s int8) memberState {
	switch s {
	case kafkaMemberUnrevoked:
		return memberUnrevoked
	case kafkaMemberUnreleased:
		return memberUnreleased
	}
	return memberStable
}

// loadStreamsLocked restores a streams group from its records. Members come
// back with their epochs, states and tasks (a member's session starts again);
// the topology is configured against the topics that exist now, and a group
// whose topics changed since (another metadata hash) rebalances at its next
// heartbeat.
func (g *group) loadStreamsLocked(sr *streamsReplay) {
	sg := newStreamsGroup()
	g.st, g.protocolType = sg, streamsProtocolType
	if g.written == nil {
		g.written = map[string][]byte{}
	}
	maps.Copy(g.written, sr.raw)
	sg.epoch = sr.metadata.epoch
	if sr.targetMeta != nil {
		sg.targetEpoch = sr.targetMeta.epoch
		sg.targetTime = time.UnixMilli(sr.targetMeta.timeMs)
	}
	sg.topology = sr.topology
	if sg.topology != nil {
		sg.topics = sg.topicsCheck.take(g.topicsLocked(), g.topologyMetadataLocked)
		sg.configured = configureTopology(sg.topology, sg.topics)
		sg.stale = topicsHash(sg.topics) != sr.metadata.metadataHash
	}
	for id, mv := range sr.members {
		if sg.topology == nil {
			break // members without a topology cannot be served: they rejoin
		}
		cur := sr.current[id]
		m := &stmember{
			id: id, instanceID: deref(mv.instanceID), rackID: deref(mv.rackID),
			clientID: mv.clientID, clientHost: mv.clientHost, processID: mv.processID,
			epoch: cur.epoch, prevEpoch: cur.prevEpoch, state: memberStateOf(cur.state),
			topologyEpoch: mv.topologyEpoch, endpoint: mv.endpoint, clientTags: mv.clientTags,
			rebalanceTimeout: time.Duration(mv.rebalanceTimeoutMs) * time.Millisecond,
			assigned:         map[topicPartition]int32{},
		}
		for _, t := range cur.active {
			for i, p := range t.partitions {
				e := cur.epoch
				if i < len(t.epochs) {
					e = t.epochs[i]
				}
				m.assigned[topicPartition{t.subtopology, p}] = e
			}
		}
		if rev := taskSet(cur.activeRevoking); len(rev) > 0 {
			m.revoking = rev
		}
		if sb := taskSet(cur.standby); len(sb) > 0 {
			m.standby = sb
		}
		if wu := taskSet(cur.warmup); len(wu) > 0 {
			m.warmup = wu
		}
		sg.members[id] = m
		if m.instanceID != "" {
			sg.static[m.instanceID] = id
		}
		for tp := range m.assigned {
			sg.owners[tp] = id
		}
		for tp := range m.revoking {
			sg.owners[tp] = id
		}
		t := sr.targets[id]
		sg.target[id], sg.standbyTarget[id] = taskSet(t.active), taskSet(t.standby)
	}
	// The refined assignment is derived again from what the members hold now
	// (no task offsets yet: a pending move waits for the next report).
	g.refineStreamsLocked()
	g.syncStreamsViewLocked()
}

// armLoadedStreamsLocked starts the timers of a loaded streams group's members.
func (g *group) armLoadedStreamsLocked() {
	if g.st == nil {
		return
	}
	for _, m := range sortedByID(g.st.members) {
		g.armStreamsSessionLocked(m)
		if m.state == memberUnrevoked {
			g.armStreamsRevokeTimerLocked(m)
		}
	}
}
