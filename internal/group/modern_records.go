package group

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// This file is what the consumer group records (consumer_records.go), the
// streams group records (streams_records.go) and the share group records
// (share_records.go) have in common: Kafka 4.4's framing of its group
// coordinator's records, and how a group's records are kept in step with its
// state.
//
//	key   | int16 record type | string group | string member (member records) |
//	value | int16 version=0 | fields, flexible: compact strings and arrays, |
//	      | a tagged-field section after each struct |
//
// The keys are not flexible (strings are int16 length + bytes). A tombstone is
// the key with a null value.
//
// Writes follow the state rather than each change: after every change the
// records it may have touched (group.changes: the group-level records, those
// of the members it changed, all of them when the group is new or an append
// failed) are encoded and compared with what the log holds (group.written),
// and only the keys whose value differs are appended (tombstones for keys that
// went), one batch per change, in the group's write queue, in the order Kafka's
// own coordinator writes them (recordOrder). A heartbeat thus costs its own
// member's records, not the whole group's. Each kind of group marks its
// changes where its state changes (touchMemberLocked, touchGroupLocked), so
// that a heartbeat that changes nothing encodes and compares nothing. A
// failed append takes the group back to what the log holds (revert.go).

// recordValueVersion is the version of every consumer, streams and share value
// written and read.
const recordValueVersion = 0

// unknownValue stands for a key whose value in the log is not known (its last
// append failed): it equals no value, so the next diff writes the key again.
var unknownValue = []byte{}

// recordKey is a consumer, streams or share record key: type, group and, for
// member records, member (for a consumer group's pattern record, the pattern).
func recordKey(typ int16, group, member string) []byte {
	return appendRecordKey(make([]byte, 0, 6+len(group)+len(member)), typ, group, member)
}

func appendRecordKey(dst []byte, typ int16, group, member string) []byte {
	dst = kbin.AppendInt16(dst, typ)
	dst = kbin.AppendString(dst, group)
	if isMemberType(typ) {
		dst = kbin.AppendString(dst, member)
	}
	return dst
}

// keyScratch is room for most record keys on the stack (a longer one grows).
type keyScratch [128]byte

// newValue is an empty buffer to encode a record value into, with room for
// most values, so that one costs a single allocation (a larger one grows).
func newValue() []byte { return make([]byte, 0, 64) }

// isMemberType reports whether records of type typ are keyed by member too
// (or, a consumer group's pattern record, by the pattern).
func isMemberType(typ int16) bool {
	switch typ {
	case typeConsumerMember, typeConsumerTargetMember, typeConsumerCurrent, typeConsumerRegex,
		typeStreamsMember, typeStreamsTargetMember, typeStreamsCurrent,
		typeShareMember, typeShareTargetMember, typeShareCurrent:
		return true
	}
	return false
}

// decodeRecordKey parses the rest of a consumer, streams or share key after its
// type.
func decodeRecordKey(kind recordKind, typ int16, b []byte) (decodedKey, error) {
	r := kbin.Reader{Src: b[2:]}
	k := decodedKey{kind: kind, typ: typ, group: r.String()}
	if isMemberType(typ) {
		k.member = r.String()
	}
	if err := r.Complete(); err != nil || len(r.Src) > 0 {
		return decodedKey{}, fmt.Errorf("%w: key type %d of %d bytes", ErrCorruptRecord, typ, len(b))
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

// tagAssignmentEpochs is the tagged field of a consumer group's topic or a
// streams group's subtopology in a current assignment that holds the member
// epoch each partition was assigned in (KIP-1251).
const tagAssignmentEpochs = 0

// appendAssignmentEpochs appends the tagged-field section of a streams
// group's subtopology in a current assignment: its epochs, none when nil (the
// streams schema leaves a null field out; the consumer schema writes it, see
// appendEpochPartitions).
func appendAssignmentEpochs(dst []byte, epochs []int32) []byte {
	if epochs == nil {
		return appendTags(dst)
	}
	return appendTags(dst, taggedField{tagAssignmentEpochs, appendInt32s(nil, epochs)})
}

// readAssignmentEpochs reads the tagged-field section of a current
// assignment's topic or subtopology: its epochs, nil when there are none or
// they are null.
func readAssignmentEpochs(r *kbin.Reader) []int32 {
	var epochs []int32
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagAssignmentEpochs && !bytes.Equal(data, []byte{0}) { // 0: a null array
			tr := kbin.Reader{Src: data}
			epochs = readInt32s(&tr)
		}
	})
	return epochs
}

// valueReader checks a value's version and returns a reader of its fields.
func valueReader(typ int16, b []byte) (*kbin.Reader, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: value type %d of %d bytes", ErrCorruptRecord, typ, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != recordValueVersion {
		return nil, fmt.Errorf("%w: value type %d version %d", ErrCorruptRecord, typ, v)
	}
	return &kbin.Reader{Src: b[2:]}, nil
}

// valueDone checks that a value decoded whole.
func valueDone(typ int16, r *kbin.Reader) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: value type %d: %v", ErrCorruptRecord, typ, err)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: value type %d: %d bytes left over", ErrCorruptRecord, typ, len(r.Src))
	}
	return nil
}

// targetMetaValue is StreamsGroupTargetAssignmentMetadataValue and
// ShareGroupTargetAssignmentMetadataValue (the same fields).
type targetMetaValue struct {
	epoch int32
	// timeMs is when the assignment was computed, 0 for unknown (tagged field
	// 0, AssignmentTimestamp).
	timeMs int64
}

const tagAssignmentTimestamp = 0

// targetMetaOf is the target metadata of a target computed at epoch, at time
// at (zero: unknown).
func targetMetaOf(epoch int32, at time.Time) targetMetaValue {
	v := targetMetaValue{epoch: epoch}
	if !at.IsZero() {
		v.timeMs = at.UnixMilli()
	}
	return v
}

func (v targetMetaValue) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, recordValueVersion)
	dst = kbin.AppendInt32(dst, v.epoch)
	if v.timeMs == 0 {
		return appendTags(dst)
	}
	return appendTags(dst, taggedField{tagAssignmentTimestamp, kbin.AppendInt64(nil, v.timeMs)})
}

func decodeTargetMeta(typ int16, b []byte) (targetMetaValue, error) {
	r, err := valueReader(typ, b)
	if err != nil {
		return targetMetaValue{}, err
	}
	v := targetMetaValue{epoch: r.Int32()}
	readTags(r, func(tag uint32, data []byte) {
		if tag == tagAssignmentTimestamp && len(data) == 8 {
			v.timeMs = int64(binary.BigEndian.Uint64(data))
		}
	})
	return v, valueDone(typ, r)
}

// topicsHash is the metadata hash of a consumer, streams or share group: of
// the topics it reads that exist, their names, ids and partition counts. A
// group loaded with a hash that no longer matches the topics takes them in
// again (a streams group reconfigures its topology) and rebalances at its next
// heartbeat, as Kafka's does; the hash is Strata's own
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

// catalogCheck is when a group's topics (those its assignment is computed
// from) were last found to be what the catalog says, so that a heartbeat
// compares them with the catalog only after a metadata change.
type catalogCheck struct {
	version uint64 // the catalog's TopicNamesVersion then
	current bool   // unset: never, or the topics were set from elsewhere
}

// changed reports whether the topics as the catalog describes them now
// (describe) differ from topics; it asks describe only when the catalog's
// TopicNamesVersion moved since topics were last found current.
func (c *catalogCheck) changed(cat TopicCatalog, topics map[string]topicMeta, describe func() map[string]topicMeta) bool {
	version := cat.TopicNamesVersion()
	if c.current && version == c.version {
		return false
	}
	if !maps.Equal(describe(), topics) {
		return true
	}
	c.takenAt(version)
	return false
}

// take returns the topics as the catalog describes them now (describe),
// found current.
func (c *catalogCheck) take(cat TopicCatalog, describe func() map[string]topicMeta) map[string]topicMeta {
	c.takenAt(cat.TopicNamesVersion())
	return describe()
}

// takenAt notes that the topics are the catalog's at its TopicNamesVersion
// version.
func (c *catalogCheck) takenAt(version uint64) { *c = catalogCheck{version: version, current: true} }

// recordChanges is what may have changed in a group's consumer, streams or
// share state since its records were last compared with the log, so that a change costs
// what it touched rather than the whole group: when tracked, the group-level
// records when group is set and those of the
// listed members (a member that is gone has tombstones); otherwise anything,
// and the whole group is compared. A group
// starts untracked (the zero value: new, loaded, or turning into a consumer,
// streams or share group, none of which wrote these records before), and is
// untracked again when an append fails.
type recordChanges struct {
	tracked bool
	// group is set when the group-level records may have changed.
	group   bool
	members map[string]struct{}
}

// touchGroupLocked notes that the group-level records may have changed.
func (g *group) touchGroupLocked() { g.changes.group = true }

// touchMemberLocked notes that member id's records may have changed.
func (g *group) touchMemberLocked(id string) {
	if g.changes.members == nil {
		g.changes.members = map[string]struct{}{}
	}
	g.changes.members[id] = struct{}{}
}

// touchTargetsLocked notes the members whose target differs between before
// and after (one missing from either counts as different from an empty one).
func (g *group) touchTargetsLocked(before, after map[string]partSet) {
	for id, ps := range after {
		if old, ok := before[id]; !ok || !old.equal(ps) {
			g.touchMemberLocked(id)
		}
	}
	for id := range before {
		if _, ok := after[id]; !ok {
			g.touchMemberLocked(id)
		}
	}
}

// stateRecords collects a consumer, streams or share group's state as records:
// key -> value.
type stateRecords struct {
	group string
	out   map[string][]byte
}

func (s stateRecords) put(typ int16, member string, v []byte) {
	var scratch keyScratch
	s.out[string(appendRecordKey(scratch[:0], typ, s.group, member))] = v
}

// modernKind is how the consumer, streams or share side of a group turns into
// records.
type modernKind struct {
	groupTypes, memberTypes []int16
	// groupRecords puts the group-level records.
	groupRecords func(g *group, s stateRecords)
	// memberRecords puts member id's records; none when it is gone.
	memberRecords func(g *group, s stateRecords, id string)
	// memberIDs lists the members.
	memberIDs func(g *group) []string
	// namedRecords, when set, names the group-level records keyed by a name
	// too (a consumer group's patterns) that a comparison of the group-level
	// records must cover: their type, and the names groupRecords puts and
	// those gone since the last such comparison.
	namedRecords func(g *group) (typ int16, names []string)
}

// The kinds of modern group, each as its records describe it.
var (
	consumerKind = modernKind{
		groupTypes:   []int16{typeConsumerMetadata, typeConsumerTargetMetadata},
		memberTypes:  []int16{typeConsumerMember, typeConsumerTargetMember, typeConsumerCurrent},
		groupRecords: (*group).consumerGroupRecordsLocked, memberRecords: (*group).consumerMemberRecordsLocked,
		memberIDs:    func(g *group) []string { return slices.Collect(maps.Keys(g.cg.members)) },
		namedRecords: (*group).consumerPatternNamesLocked,
	}
	streamsKind = modernKind{
		groupTypes:   []int16{typeStreamsMetadata, typeStreamsTopology, typeStreamsTargetMetadata},
		memberTypes:  []int16{typeStreamsMember, typeStreamsTargetMember, typeStreamsCurrent},
		groupRecords: (*group).streamsGroupRecordsLocked, memberRecords: (*group).streamsMemberRecordsLocked,
		memberIDs: func(g *group) []string { return slices.Collect(maps.Keys(g.st.members)) },
	}
	shareKind = modernKind{
		groupTypes:   []int16{typeShareMetadata, typeShareTargetMetadata},
		memberTypes:  []int16{typeShareMember, typeShareTargetMember, typeShareCurrent},
		groupRecords: (*group).shareGroupRecordsLocked, memberRecords: (*group).shareMemberRecordsLocked,
		memberIDs: func(g *group) []string { return slices.Collect(maps.Keys(g.sg.members)) },
	}
)

// modernKindLocked is the group's consumer, streams or share side; nil when
// it is none of them.
func (g *group) modernKindLocked() *modernKind {
	switch {
	case g.cg != nil:
		return &consumerKind
	case g.st != nil:
		return &streamsKind
	case g.sg != nil:
		return &shareKind
	}
	return nil
}

// wholeRecordsLocked is the group's whole consumer, streams or share state as
// records (none when it is none of them).
func (g *group) wholeRecordsLocked() map[string][]byte {
	s := stateRecords{group: g.id, out: map[string][]byte{}}
	if kind := g.modernKindLocked(); kind != nil {
		kind.groupRecords(g, s)
		for _, id := range kind.memberIDs(g) {
			kind.memberRecords(g, s, id)
		}
	}
	return s.out
}

// changedRecordsLocked returns the records that bring the log in line with
// the group's consumer, streams or share state, comparing only what g.changes
// says may have changed: the group-level records and those of the members
// touched, key by key.
func (g *group) changedRecordsLocked() []Record {
	if g.unchangedLocked() {
		return nil
	}
	kind := g.modernKindLocked()
	if kind == nil || !g.changes.tracked || g.catalogChangedLocked() {
		g.forgetLookupsLocked()
		return diffRecords(g.wholeRecordsLocked(), g.written)
	}
	want := stateRecords{group: g.id, out: map[string][]byte{}}
	if g.changes.group {
		kind.groupRecords(g, want)
	}
	for id := range g.changes.members {
		kind.memberRecords(g, want, id)
	}
	var recs []Record
	var scratch keyScratch
	compare := func(typ int16, member string) {
		k := appendRecordKey(scratch[:0], typ, g.id, member)
		v, wanted := want.out[string(k)]
		w, logged := g.written[string(k)]
		switch {
		case wanted && (!logged || !bytes.Equal(w, v)):
			recs = append(recs, Record{Key: bytes.Clone(k), Value: v})
		case !wanted && logged:
			recs = append(recs, Record{Key: bytes.Clone(k)})
		}
	}
	if g.changes.group {
		for _, typ := range kind.groupTypes {
			compare(typ, "")
		}
		if kind.namedRecords != nil {
			typ, names := kind.namedRecords(g)
			for _, name := range names {
				compare(typ, name)
			}
		}
	}
	for id := range g.changes.members {
		for _, typ := range kind.memberTypes {
			compare(typ, id)
		}
	}
	return recs
}

// unchangedLocked reports whether the records cannot have changed since they
// were last compared with the log: a consumer, streams or share group,
// nothing touched, and the catalog saying the same of the topics of
// its assignments.
func (g *group) unchangedLocked() bool {
	return g.modernKindLocked() != nil && g.changes.tracked && !g.changes.group &&
		len(g.changes.members) == 0 && !g.catalogChangedLocked()
}

// groupReplay is a consumer or share group's records as a partition's replay
// left them: the latest value of each key, decoded.
type groupReplay[Meta, Member, Current any] struct {
	codec      *replayCodec[Meta, Member, Current]
	raw        map[string][]byte // key -> value, as in the log
	metadata   *Meta
	targetMeta *targetMetaValue
	members    map[string]Member
	targets    map[string]targetMemberValue
	current    map[string]Current
}

// replayCodec is how a consumer or share group's records decode: their types
// by role, and the decoders of the values that differ between the two.
type replayCodec[Meta, Member, Current any] struct {
	types    [roleCount]int16
	metadata func([]byte) (Meta, error)
	member   func([]byte) (Member, error)
	current  func([]byte) (Current, error)
}

func newGroupReplay[Meta, Member, Current any](codec *replayCodec[Meta, Member, Current]) *groupReplay[Meta, Member, Current] {
	return &groupReplay[Meta, Member, Current]{codec: codec, raw: map[string][]byte{}, members: map[string]Member{},
		targets: map[string]targetMemberValue{}, current: map[string]Current{}}
}

// apply folds one record (value nil: a tombstone) into the replay.
func (gr *groupReplay[Meta, Member, Current]) apply(k decodedKey, key, value []byte) error {
	var err error
	switch types := gr.codec.types; k.typ {
	case types[roleMetadata]:
		gr.metadata, err = decodeOrForget(value, gr.codec.metadata)
	case types[roleTargetMetadata]:
		gr.targetMeta, err = decodeOrForget(value, func(b []byte) (targetMetaValue, error) { return decodeTargetMeta(k.typ, b) })
	case types[roleMember]:
		err = replayMember(gr.members, k.member, value, gr.codec.member)
	case types[roleTargetMember]:
		err = replayMember(gr.targets, k.member, value, func(b []byte) (targetMemberValue, error) { return decodeTargetMember(k.typ, b) })
	case types[roleCurrent]:
		err = replayMember(gr.current, k.member, value, gr.codec.current)
	}
	if err != nil {
		return err
	}
	if value == nil {
		delete(gr.raw, string(key))
	} else {
		gr.raw[string(key)] = bytes.Clone(value)
	}
	return nil
}

// decodeOrForget decodes a group-level value; nil for a tombstone.
func decodeOrForget[V any](value []byte, decode func([]byte) (V, error)) (*V, error) {
	if value == nil {
		return nil, nil
	}
	v, err := decode(value)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// replayMember folds a member-level value (nil: a tombstone) into byMember.
func replayMember[V any](byMember map[string]V, member string, value []byte, decode func([]byte) (V, error)) error {
	if value == nil {
		delete(byMember, member)
		return nil
	}
	v, err := decode(value)
	if err != nil {
		return err
	}
	byMember[member] = v
	return nil
}

// diffRecords returns the records that turn written into want: the keys whose
// value differs, and tombstones for the keys that went.
func diffRecords(want, written map[string][]byte) []Record {
	var recs []Record
	for k, v := range want {
		if w, ok := written[k]; !ok || !bytes.Equal(w, v) {
			recs = append(recs, Record{Key: []byte(k), Value: v})
		}
	}
	for k := range written {
		if _, ok := want[k]; !ok {
			recs = append(recs, Record{Key: []byte(k)})
		}
	}
	return recs
}

// persistRecordsLocked queues the records that bring the log in line with the
// group's consumer, streams or share state (none when it is none of them:
// tombstones for whatever it wrote). done, when set, runs once they are appended, or once the
// group's writes already in flight are when there is nothing to write, so that
// nobody is answered with state the log may not hold yet. It reports whether it
// queued anything; the caller then flushes.
func (g *group) persistRecordsLocked(done func(error)) bool {
	recs := g.changedRecordsLocked()
	g.changes = recordChanges{tracked: true}
	if len(recs) == 0 {
		if done == nil || (!g.writing && len(g.writeQ) == 0) {
			return false
		}
		g.queueLocked(nil, done)
		return true
	}
	slices.SortFunc(recs, recordOrder)
	g.queueRecordsLocked(recs, done)
	return true
}

// persistAwaitedLocked is persistRecordsLocked for a heartbeat answered once
// the log holds what it changed: the channel its append's result comes on, nil
// when there is nothing to wait for (a steady heartbeat allocates nothing).
func (g *group) persistAwaitedLocked() <-chan error {
	if !g.writing && len(g.writeQ) == 0 && g.unchangedLocked() {
		return nil
	}
	done := make(chan error, 1)
	if !g.persistRecordsLocked(func(err error) { done <- err }) {
		return nil
	}
	return done
}

// queueRecordsLocked queues records and keeps g.written in step with
// what the log will hold; if the append fails, the group goes back to what
// the log holds (revert.go), and a group no write of which was ever appended
// goes (dropFreshLocked).
func (g *group) queueRecordsLocked(recs []Record, done func(error)) {
	w := g.writeRecordsLocked(recs)
	g.writeQ = append(g.writeQ, write{records: recs, modern: w, done: func(_ int64, err error) {
		if err != nil {
			g.revertLocked(w, recs, err)
			g.dropFreshLocked()
		} else {
			g.appendedLocked(w)
		}
		if done != nil {
			done(err)
		}
	}})
}

// forgetRecordsLocked marks the keys of recs unknown (their append failed).
func (g *group) forgetRecordsLocked(recs []Record) {
	if g.written == nil {
		g.written = map[string][]byte{}
	}
	for _, r := range recs {
		g.written[string(r.Key)] = unknownValue
	}
	g.changes = recordChanges{} // the next write compares the whole group
}

// recordTombstonesLocked returns tombstones for every consumer, streams or
// share record of the group the log holds (the group is being deleted).
func (g *group) recordTombstonesLocked() []Record {
	var recs []Record
	for k := range g.written {
		recs = append(recs, Record{Key: []byte(k)})
	}
	slices.SortFunc(recs, recordOrder)
	return recs
}

// recordOrder orders one change's records as Kafka's group coordinator writes
// them, so that its replay would take them: streams records and a consumer
// group's pattern records (which Kafka writes in batches of their own) by key,
// first; consumer and share records' tombstones, a member's before the
// group's (current assignment, target, member, then the target metadata and
// the group), then the values (member, group, target, target metadata,
// current assignment).
func recordOrder(a, b Record) int {
	return cmp.Or(cmp.Compare(roleRank(a), roleRank(b)), bytes.Compare(a.Key, b.Key))
}

// The roles of consumer and share records, in the order Kafka writes their
// values.
const (
	roleMember = iota
	roleMetadata
	roleTargetMember
	roleTargetMetadata
	roleCurrent
	roleCount
)

// recordRoles maps consumer and share record types to their roles.
var recordRoles = map[int16]int{
	typeConsumerMember: roleMember, typeConsumerMetadata: roleMetadata,
	typeConsumerTargetMember: roleTargetMember, typeConsumerTargetMetadata: roleTargetMetadata,
	typeConsumerCurrent: roleCurrent,
	typeShareMember:     roleMember, typeShareMetadata: roleMetadata,
	typeShareTargetMember: roleTargetMember, typeShareTargetMetadata: roleTargetMetadata,
	typeShareCurrent: roleCurrent,
}

// tombstoneRanks is the order of the roles' tombstones.
var tombstoneRanks = [roleCount]int{
	roleCurrent: 0, roleTargetMember: 1, roleMember: 2, roleTargetMetadata: 3, roleMetadata: 4,
}

// roleRank is a record's place in recordOrder: 0 for any but a consumer or
// share record.
func roleRank(r Record) int {
	if len(r.Key) < 2 {
		return 0
	}
	role, ok := recordRoles[int16(binary.BigEndian.Uint16(r.Key))]
	switch {
	case !ok:
		return 0
	case r.Value == nil:
		return 1 + tombstoneRanks[role]
	}
	return 1 + roleCount + role
}
