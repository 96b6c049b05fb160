package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions of the __consumer_offsets schemas this package writes. It reads every
// version kmsg knows (keys 0-2, values 0-4), the consumer group records
// (consumer_records.go), the share group records (share_records.go) and the
// streams group records (streams_records.go), and skips keys of other versions.
const (
	offsetKeyVersion         = 1 // OffsetCommitKey (0 and 1 are the same layout)
	groupKeyVersion          = 2 // GroupMetadataKey: the key version tells the two apart
	offsetValueVersion       = 3 // OffsetCommitValue with leader epoch (KIP-320)
	offsetValueExpireVersion = 1 // OffsetCommitValue with an explicit expire timestamp
	groupValueVersion        = 3 // GroupMetadataValue with instance ids (KIP-345)
	maxValueVersion          = 4 // the newest value version kmsg decodes
)

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// offsetCommit is one committed offset. The offset is the next one to read.
type offsetCommit struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	expireTime  time.Time // zero unless committed with a v2-v4 retention time
	// recordOffset is the offset of the commit's record in __consumer_offsets
	// (not encoded): of a plain and a transactional commit of one partition,
	// the one written last is the group's once the transaction commits, as
	// Kafka's OffsetAndMetadata.recordOffset decides.
	recordOffset int64
}

// putOffset makes o the committed offset of tp in offs unless the one there
// was written later in the log (see offsetCommit.recordOffset).
func putOffset(offs map[topicPartition]offsetCommit, tp topicPartition, o offsetCommit) {
	if cur, ok := offs[tp]; !ok || cur.recordOffset <= o.recordOffset {
		offs[tp] = o
	}
}

func offsetKey(group string, tp topicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.topic, Partition: tp.partition}
	return k.AppendTo(nil)
}

func offsetValue(o offsetCommit) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if !o.expireTime.IsZero() {
		v.Version = offsetValueExpireVersion
		v.ExpireTimestamp = o.expireTime.UnixMilli()
	}
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitTime.UnixMilli()
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// recordKind says what a __consumer_offsets key holds.
type recordKind int8

const (
	kindUnknown recordKind = iota // a key version this package does not know: skipped
	kindOffset
	kindGroup
	kindStreams  // a streams group record (streams_records.go)
	kindShare    // a share group record (share_records.go)
	kindConsumer // a consumer group record (consumer_records.go)
)

// decodedKey is a parsed __consumer_offsets key.
type decodedKey struct {
	kind   recordKind
	group  string
	tp     topicPartition
	typ    int16  // the record type of a consumer, streams or share key
	member string // the member of a consumer, streams or share member key
}

// decodeKey parses a record key. Keys of versions other than 0-2 and the
// consumer, streams and share record types come back as kindUnknown; a
// malformed key of a known version is ErrCorruptRecord.
func decodeKey(b []byte) (decodedKey, error) {
	if len(b) < 2 {
		return decodedKey{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(b))
	}
	switch v := int16(binary.BigEndian.Uint16(b)); v {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: offset commit key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{kind: kindOffset, group: k.Group, tp: topicPartition{k.Topic, k.Partition}}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: group metadata key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{kind: kindGroup, group: k.Group}, nil
	default:
		switch v {
		case typeConsumerMetadata, typeConsumerMember, typeConsumerTargetMetadata,
			typeConsumerTargetMember, typeConsumerCurrent, typeConsumerRegex:
			return decodeRecordKey(kindConsumer, v, b)
		case typeStreamsMetadata, typeStreamsMember, typeStreamsTargetMetadata,
			typeStreamsTargetMember, typeStreamsCurrent, typeStreamsTopology:
			return decodeRecordKey(kindStreams, v, b)
		case typeShareMember, typeShareMetadata, typeShareTargetMetadata,
			typeShareTargetMember, typeShareCurrent:
			return decodeRecordKey(kindShare, v, b)
		}
		return decodedKey{kind: kindUnknown}, nil
	}
}

// valueVersion checks the version prefix of a value against what kmsg decodes.
func valueVersion(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("%w: value of %d bytes", ErrCorruptRecord, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v < 0 || v > maxValueVersion {
		return fmt.Errorf("%w: value version %d", ErrCorruptRecord, v)
	}
	return nil
}

func decodeOffsetValue(b []byte) (offsetCommit, error) {
	if err := valueVersion(b); err != nil {
		return offsetCommit{}, err
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return offsetCommit{}, fmt.Errorf("%w: offset commit value: %v", ErrCorruptRecord, err)
	}
	o := offsetCommit{
		offset:      v.Offset,
		leaderEpoch: -1,
		metadata:    v.Metadata,
		commitTime:  time.UnixMilli(v.CommitTimestamp),
	}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 && v.ExpireTimestamp >= 0 {
		o.expireTime = time.UnixMilli(v.ExpireTimestamp)
	}
	return o, nil
}

func decodeGroupValue(b []byte) (*kmsg.GroupMetadataValue, error) {
	if err := valueVersion(b); err != nil {
		return nil, err
	}
	v := new(kmsg.GroupMetadataValue)
	if err := v.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("%w: group metadata value: %v", ErrCorruptRecord, err)
	}
	return v, nil
}

// isGroupKey reports whether k is the key of a group's own record (not of
// its offsets or members): its tombstone is the group's deletion.
func isGroupKey(k decodedKey) bool {
	switch k.kind {
	case kindGroup:
		return true
	case kindConsumer:
		return k.typ == typeConsumerMetadata
	case kindStreams:
		return k.typ == typeStreamsMetadata
	case kindShare:
		return k.typ == typeShareMetadata
	}
	return false
}

// replayed is the latest state of one partition of __consumer_offsets: the last
// value per key wins and a tombstone deletes the key.
type replayed struct {
	groups    map[string]*kmsg.GroupMetadataValue
	offsets   map[string]map[topicPartition]offsetCommit
	streams   map[string]*streamsReplay
	shares    map[string]*shareReplay
	consumers map[string]*consumerReplay
	// committed are the groups with an offset commit, transactional or
	// not, since the tombstone of their group record (of any kind): as
	// Kafka's replay of a commit makes a simple group where none exists,
	// which stays, offsets or not, until a tombstone of the group deletes
	// it, whatever becomes of the transaction.
	committed map[string]bool
	skipped   int // records with keys of unknown versions
	// txnOffsets are the offset commits of transactions without a marker
	// yet (Txn records).
	txnOffsets txnOffsets
}

func newReplayed() *replayed {
	return &replayed{
		groups:    make(map[string]*kmsg.GroupMetadataValue),
		offsets:   make(map[string]map[topicPartition]offsetCommit),
		streams:   make(map[string]*streamsReplay),
		shares:    make(map[string]*shareReplay),
		consumers: make(map[string]*consumerReplay),
		committed: make(map[string]bool),
	}
}

// apply folds one record into the state.
func (r *replayed) apply(rec Record) error {
	if rec.Marker {
		r.endTxn(rec.ProducerID, rec.Commit)
		return nil
	}
	k, err := decodeKey(rec.Key)
	if err != nil {
		return err
	}
	if rec.Txn {
		return r.applyTxn(rec, k)
	}
	if rec.Value == nil && isGroupKey(k) {
		delete(r.committed, k.group)
	}
	switch k.kind {
	case kindOffset:
		if rec.Value == nil {
			if offs := r.offsets[k.group]; offs != nil {
				delete(offs, k.tp)
				if len(offs) == 0 {
					delete(r.offsets, k.group)
				}
			}
			// It deletes the open transactions' commits of the offset too.
			r.txnOffsets.drop(k.group, []topicPartition{k.tp})
			return nil
		}
		o, err := decodeOffsetValue(rec.Value)
		if err != nil {
			return err
		}
		o.recordOffset = rec.Offset
		r.committed[k.group] = true
		r.groupOffsets(k.group)[k.tp] = o
	case kindGroup:
		if rec.Value == nil {
			delete(r.groups, k.group)
			return nil
		}
		v, err := decodeGroupValue(rec.Value)
		if err != nil {
			return err
		}
		r.groups[k.group] = v
	case kindStreams:
		sr := r.streams[k.group]
		if sr == nil {
			sr = newStreamsReplay()
			r.streams[k.group] = sr
		}
		if err := sr.apply(k, rec.Key, rec.Value); err != nil {
			return err
		}
		if len(sr.raw) == 0 {
			delete(r.streams, k.group)
		}
	case kindShare:
		sr := r.shares[k.group]
		if sr == nil {
			sr = newShareReplay()
			r.shares[k.group] = sr
		}
		if err := sr.apply(k, rec.Key, rec.Value); err != nil {
			return err
		}
		if len(sr.raw) == 0 {
			delete(r.shares, k.group)
		}
	case kindConsumer:
		cr := r.consumers[k.group]
		if cr == nil {
			cr = newConsumerReplay()
			r.consumers[k.group] = cr
		}
		if err := cr.apply(k, rec.Key, rec.Value); err != nil {
			return err
		}
		if len(cr.raw) == 0 {
			delete(r.consumers, k.group)
		}
	default:
		r.skipped++
	}
	return nil
}

// groupOffsets returns the replayed offsets of group id, making the map.
func (r *replayed) groupOffsets(id string) map[topicPartition]offsetCommit {
	offs := r.offsets[id]
	if offs == nil {
		offs = make(map[topicPartition]offsetCommit)
		r.offsets[id] = offs
	}
	return offs
}
