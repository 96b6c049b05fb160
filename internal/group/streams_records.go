package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds a streams group's state in __consumer_offsets, in the record
// schemas Kafka 4.4 writes (its group coordinator's StreamsGroup*Key/Value), so a
// coordinator that loads the partition after a failover or restart has the
// group, its epochs, topology, members and assignments. A key's int16 prefix is
// its record type (Kafka's CoordinatorRecordType); the keys are not flexible
// (strings are int16 length + bytes), the values are (version 0, flexible:
// compact strings and arrays, a tagged-field section after each struct).
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
// Writes follow the state rather than each change: after every change the
// group's records are encoded and compared with what the log holds (written),
// and only the keys whose value differs are appended (tombstones for keys that
// went), one batch per change, in the group's write queue. A failed append marks
// its keys unknown, so the next change writes them again. A heartbeat answers
// once its group's records are appended, as Kafka's does.
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

// streamsValueVersion is the version of every streams value written and read.
const streamsValueVersion = 0

// Kafka's StreamsGroupMember.MemberState values (current assignment records).
const (
	kafkaMemberStable     int8 = 1
	kafkaMemberUnrevoked  int8 = 2
	kafkaMemberUnreleased int8 = 3
)

// unknownValue stands for a key whose value in the log is not known (its last
// append failed): it equals no value, so the next diff writes the key again.
var unknownValue = []byte{}

// streamsKey is a streams record key: type, group and, for member records, member.
func streamsKey(typ int16, group, member string) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, group)
	switch typ {
	case typeStreamsMember, typeStreamsTargetMember, typeStreamsCurrent:
		b = kbin.AppendString(b, member)
	}
	return b
}

// isStreamsType reports whether typ is a streams record type this package reads.
func isStreamsType(typ int16) bool {
	switch typ {
	case typeStreamsMetadata, typeStreamsMember, typeStreamsTargetMetadata,
		typeStreamsTargetMember, typeStreamsCurrent, typeStreamsTopology:
		return true
	}
	return false
}

// decodeStreamsKey parses the rest of a streams key after its type.
func decodeStreamsKey(typ int16, b []byte) (decodedKey, error) {
	r := kbin.Reader{Src: b[2:]}
	k := decodedKey{kind: kindStreams, typ: typ, group: r.String()}
	switch typ {
	case typeStreamsMember, typeStreamsTargetMember, typeStreamsCurrent:
		k.member = r.String()
	}
	if err := r.Complete(); err != nil || len(r.Src) > 0 {
		return decodedKey{}, fmt.Errorf("%w: streams key type %d of %d bytes", ErrCorruptRecord, typ, len(b))
	}
	return k, nil
}

// taggedField is one field of a tagged-field section.
type taggedField struct {
	tag  uint32
	data []byte
}

// appendTags appends a tagged-field section (fields in tag order).
func appendTags(dst []byte, fields ...taggedField) []byte {
	dst = kbin.AppendUvarint(dst, uint32(len(fields)))
	for _, f := range fields {
		dst = kbin.AppendUvarint(dst, f.tag)
		dst = kbin.AppendUvarint(dst, uint32(len(f.data)))
		dst = append(dst, f.data...)
	}
	return dst
}

// readTags reads a tagged-field section, handing each field to known; the
// fields it does not know are skipped, as Kafka skips them.
func readTags(r *kbin.Reader, known func(tag uint32, data []byte)) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag := r.Uvarint()
		data := r.Span(int(r.Uvarint()))
		if known != nil && r.Ok() {
			known(tag, data)
		}
	}
}

// appendArray appends a compact array, each element with one.
func appendArray[T any](dst []byte, vs []T, one func([]byte, T) []byte) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(vs))
	for _, v := range vs {
		dst = one(dst, v)
	}
	return dst
}

// readArray reads a compact array (null as empty), each element with one.
func readArray[T any](r *kbin.Reader, one func() T) []T {
	n := r.CompactArrayLen()
	out := []T{}
	for i := int32(0); i < n && r.Ok(); i++ {
		out = append(out, one())
	}
	return out
}

func appendStrings(dst []byte, ss []string) []byte {
	return appendArray(dst, ss, kbin.AppendCompactString)
}
func readStrings(r *kbin.Reader) []string        { return readArray(r, r.CompactString) }
func appendInt16s(dst []byte, vs []int16) []byte { return appendArray(dst, vs, kbin.AppendInt16) }
func readInt16s(r *kbin.Reader) []int16          { return readArray(r, r.Int16) }
func appendInt32s(dst []byte, vs []int32) []byte { return appendArray(dst, vs, kbin.AppendInt32) }
func readInt32s(r *kbin.Reader) []int32          { return readArray(r, r.Int32) }

// valueReader checks a value's version and returns a reader of its fields.
func valueReader(typ int16, b []byte) (*kbin.Reader, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: streams value type %d of %d bytes", ErrCorruptRecord, typ, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != streamsValueVersion {
		return nil, fmt.Errorf("%w: streams value type %d version %d", ErrCorruptRecord, typ, v)
	}
	return &kbin.Reader{Src: b[2:]}, nil
}

// valueDone checks that a value decoded whole.
func valueDone(typ int16, r *kbin.Reader) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: streams value type %d: %v", ErrCorruptRecord, typ, err)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: streams value type %d: %d bytes left over", ErrCorruptRecord, typ, len(r.Src))
	}
	return nil
}

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
	dst = kbin.AppendInt16(dst, streamsValueVersion)
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
	dst = kbin.AppendInt16(dst, streamsValueVersion)
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

const tagAssignmentEpochs = 0

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
		if t.epochs != nil {
			dst = appendTags(dst, taggedField{tagAssignmentEpochs, appendInt32s(nil, t.epochs)})
		} else {
			dst = appendTags(dst)
		}
	}
	return dst
}

func readTasks(r *kbin.Reader) []streamsTasks {
	var out []streamsTasks
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		t := streamsTasks{subtopology: r.CompactString(), partitions: readInt32s(r)}
		readTags(r, func(tag uint32, data []byte) {
			if tag == tagAssignmentEpochs {
				tr := kbin.Reader{Src: data}
				t.epochs = readInt32s(&tr)
			}
		})
		out = append(out, t)
	}
	return out
}

// streamsTargetValue is StreamsGroupTargetAssignmentMemberValue.
type streamsTargetValue struct {
	active, standby, warmup []streamsTasks
}

func (v streamsTargetValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, streamsValueVersion)
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

// streamsTargetMetaValue is StreamsGroupTargetAssignmentMetadataValue.
type streamsTargetMetaValue struct {
	epoch int32
	// timeMs is when the assignment was computed, 0 for unknown (tagged field
	// 0, AssignmentTimestamp).
	timeMs int64
}

const tagAssignmentTimestamp = 0

func (v streamsTargetMetaValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, streamsValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	if v.timeMs == 0 {
		return appendTags(dst)
	}
	return appendTags(dst, taggedField{tagAssignmentTimestamp, kbin.AppendInt64(nil, v.timeMs)})
}

func decodeStreamsTargetMeta(b []byte) (streamsTargetMetaValue, error) {
	r, err := valueReader(typeStreamsTargetMetadata, b)
	if err != nil {
		return streamsTargetMetaValue{}, err
	}
	v := streamsTargetMetaValue{epoch: r.Int32()}
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagAssignmentTimestamp && len(data) == 8 {
			v.timeMs = int64(binary.BigEndian.Uint64(data))
		}
	})
	return v, valueDone(typeStreamsTargetMetadata, r)
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
	dst = kbin.AppendInt16(dst, streamsValueVersion)
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
	dst = kbin.AppendInt16(dst, streamsValueVersion)
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

// topicsHash is the metadata hash of a streams group: of the topology's topics
// that exist, their names, ids and partition counts. A group loaded with a
// hash that no longer matches the topics reconfigures its topology and
// rebalances at its next heartbeat, as Kafka's does; the hash is Strata's own
// (Kafka hashes with XXH3 and includes racks), so a log read by the other
// broker would rebalance once.
func topicsHash(topics map[string]topicMeta) int64 {
	h := fnv.New64a()
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		tm := topics[t]
		b := kbin.AppendString(nil, t)
		b = append(b, tm.id[:]...)
		b = kbin.AppendInt32(b, tm.partitions)
		h.Write(b)
	}
	return int64(h.Sum64())
}

// streamsReplay is a streams group's records as a partition's replay left
// them: the latest value of each key, decoded.
type streamsReplay struct {
	raw        map[string][]byte // key -> value, as in the log
	metadata   *streamsMetadataValue
	topology   *kmsg.StreamsGroupHeartbeatRequestTopology
	targetMeta *streamsTargetMetaValue
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
		var v streamsTargetMetaValue
		v, err = decodeStreamsTargetMeta(value)
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

// empty reports whether no record of the group is left.
func (sr *streamsReplay) empty() bool { return len(sr.raw) == 0 }

// streamsRecordsLocked is the group's streams state as records: key -> value.
func (g *group) streamsRecordsLocked() map[string][]byte {
	sg := g.st
	out := map[string][]byte{}
	put := func(typ int16, member string, v []byte) { out[string(streamsKey(typ, g.id, member))] = v }
	validated := int32(-1)
	if sg.topology != nil && sg.configured.ready() {
		validated = sg.topology.Epoch
	}
	put(typeStreamsMetadata, "", streamsMetadataValue{epoch: sg.epoch, metadataHash: topicsHash(sg.topics), validatedTopologyEpoch: validated}.appendTo(nil))
	if sg.topology != nil {
		put(typeStreamsTopology, "", appendTopologyValue(nil, sg.topology))
	}
	var targetMs int64
	if !sg.targetTime.IsZero() {
		targetMs = sg.targetTime.UnixMilli()
	}
	put(typeStreamsTargetMetadata, "", streamsTargetMetaValue{epoch: sg.targetEpoch, timeMs: targetMs}.appendTo(nil))
	for id, m := range sg.members {
		put(typeStreamsMember, id, streamsMemberValue{
			instanceID: optional(m.instanceID), rackID: optional(m.rackID),
			clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
			topologyEpoch:      m.topologyEpoch, processID: m.processID,
			endpoint: m.endpoint, clientTags: m.clientTags,
		}.appendTo(nil))
		put(typeStreamsTargetMember, id, streamsTargetValue{
			active: tasksOf(sg.target[id], nil), standby: tasksOf(sg.standbyTarget[id], nil),
		}.appendTo(nil))
		put(typeStreamsCurrent, id, streamsCurrentValue{
			epoch: m.epoch, prevEpoch: m.prevEpoch, state: kafkaMemberState(m.state),
			active:         tasksOf(ownedSet(m.assigned), func(tp topicPartition) int32 { return m.assigned[tp] }),
			standby:        tasksOf(m.standby, nil),
			warmup:         tasksOf(m.warmup, nil),
			activeRevoking: tasksOf(m.revoking, nil),
		}.appendTo(nil))
	}
	return out
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

// persistStreamsLocked queues the records that bring the log in line with the
// group's streams state (none when it is not a streams group: tombstones for
// whatever it wrote). done, when set, runs once they are appended, or once the
// group's writes already in flight are when there is nothing to write, so that
// nobody is answered with state the log may not hold yet. It reports whether it
// queued anything; the caller then flushes.
func (g *group) persistStreamsLocked(done func(error)) bool {
	want := map[string][]byte{}
	if g.st != nil {
		want = g.streamsRecordsLocked()
	}
	var recs []Record
	for k, v := range want {
		if w, ok := g.stWritten[k]; !ok || !bytes.Equal(w, v) {
			recs = append(recs, Record{Key: []byte(k), Value: v})
		}
	}
	for k := range g.stWritten {
		if _, ok := want[k]; !ok {
			recs = append(recs, Record{Key: []byte(k)})
		}
	}
	if len(recs) == 0 {
		if done == nil || (!g.writing && len(g.writeQ) == 0) {
			return false
		}
		g.queueLocked(nil, done)
		return true
	}
	slices.SortFunc(recs, func(a, b Record) int { return bytes.Compare(a.Key, b.Key) })
	g.queueStreamsLocked(recs, done)
	return true
}

// queueStreamsLocked queues streams records and keeps g.stWritten in step with
// what the log will hold; if the append fails, their keys become unknown.
func (g *group) queueStreamsLocked(recs []Record, done func(error)) {
	if g.stWritten == nil {
		g.stWritten = map[string][]byte{}
	}
	for _, r := range recs {
		if r.Value == nil {
			delete(g.stWritten, string(r.Key))
		} else {
			g.stWritten[string(r.Key)] = r.Value
		}
	}
	g.queueLocked(recs, func(err error) {
		if err != nil {
			g.forgetStreamsLocked(recs)
		}
		if done != nil {
			done(err)
		}
	})
}

// forgetStreamsLocked marks the keys of recs unknown (their append failed).
func (g *group) forgetStreamsLocked(recs []Record) {
	if g.stWritten == nil {
		g.stWritten = map[string][]byte{}
	}
	for _, r := range recs {
		g.stWritten[string(r.Key)] = unknownValue
	}
}

// streamsTombstonesLocked returns tombstones for every streams record of the
// group the log holds (the group is being deleted).
func (g *group) streamsTombstonesLocked() []Record {
	var recs []Record
	for _, k := range slices.Sorted(maps.Keys(g.stWritten)) {
		recs = append(recs, Record{Key: []byte(k)})
	}
	return recs
}

// loadStreamsLocked restores a streams group from its records. Members come
// back with their epochs, states and tasks (a member's session starts again);
// the topology is configured against the topics that exist now, and a group
// whose topics changed since (another metadata hash) rebalances at its next
// heartbeat.
func (g *group) loadStreamsLocked(sr *streamsReplay) {
	sg := newStreamsGroup()
	g.st, g.protocolType = sg, streamsProtocolType
	if g.stWritten == nil {
		g.stWritten = map[string][]byte{}
	}
	maps.Copy(g.stWritten, sr.raw)
	sg.epoch = sr.metadata.epoch
	if sr.targetMeta != nil {
		sg.targetEpoch = sr.targetMeta.epoch
		sg.targetTime = time.UnixMilli(sr.targetMeta.timeMs)
	}
	sg.topology = sr.topology
	if sg.topology != nil {
		sg.topics = g.topologyMetadataLocked()
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
