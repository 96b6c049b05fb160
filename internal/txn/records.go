package txn

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
)

// maxValueVersion is the newest TxnMetadataValue version this build reads (and
// writes): a newer one is refused rather than decoded with an older layout.
const maxValueVersion = 1

// encodeRecord is the __transaction_state record of id's state, in Kafka's
// schema (kmsg TxnMetadataKey v0 / TxnMetadataValue v0).
func encodeRecord(id string, m Meta) group.Record {
	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = id
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = m.ProducerID, m.ProducerEpoch, m.TimeoutMs, m.State
	v.LastUpdateTimestamp, v.StartTimestamp = m.LastUpdateMs, m.StartMs
	if m.TV2 || m.LastProducerEpoch != lastEpochUnknown {
		// v1 (flexible) carries the tagged fields: KIP-890's and Strata's.
		v.Version = 1
		if m.TV2 {
			v.ClientTransactionVersion = 2
		}
		if m.ProducerEpoch == math.MaxInt16 && m.NextProducerID != 0 {
			v.NextProducerID = m.NextProducerID
		}
		if m.ProducerEpoch == 0 && m.PrevProducerID != 0 {
			v.PreviousProducerID = m.PrevProducerID
		}
		if m.LastProducerEpoch != lastEpochUnknown {
			v.UnknownTags.Set(lastEpochTag, kbin.AppendInt16(kbin.AppendInt8(nil, lastEpochVersion), m.LastProducerEpoch))
		}
		if m.Owed != nil {
			v.UnknownTags.Set(owedTag, appendOwed(nil, m.Owed))
		}
		if len(m.Preadded) > 0 {
			v.UnknownTags.Set(preaddedTag, appendTopics(kbin.AppendInt8(nil, preaddedVersion), m.Preadded))
		}
	}
	EachTopic(m.Partitions, func(topic string, partitions []int32) {
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = topic, partitions
		v.Topics = append(v.Topics, t)
	})
	return group.Record{Key: key.AppendTo(nil), Value: v.AppendTo(nil)}
}

// tombstone is the __transaction_state record that removes id (a null value),
// as Kafka writes for an expired transactional id.
func tombstone(id string) group.Record {
	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = id
	return group.Record{Key: key.AppendTo(nil)}
}

// owedTag is the tagged field of TxnMetadataValue (v1, flexible) that holds
// Meta.Owed: Strata's own, far above the tags Kafka's schema uses (0-3), so a
// Kafka tool that reads the record skips it. Its value:
//
//	version    int8  (1)
//	commit     bool
//	producerID int64
//	epoch      int16 (the markers' epoch)
//	topics     int32 count, then per topic: name (int16 length, bytes),
//	           partitions (int32 count, then int32 each)
//
// A record without the tag (every record before the overlap, and every one
// written when no markers are owed) loads with no markers owed.
const owedTag = 1000

// owedVersion is the version of the owed tag's value written here.
const owedVersion = 1

// preaddedTag is the tagged field of TxnMetadataValue (v1) that holds
// Meta.Preadded, Strata's own like owedTag. Its value:
//
//	version    int8  (1)
//	topics     as in owedTag's value
//
// A record without the tag loads with nothing pre-added.
const preaddedTag = 1001

// preaddedVersion is the version of the pre-added tag's value written here.
const preaddedVersion = 1

// lastEpochTag is the tagged field of TxnMetadataValue (v1) that holds
// Meta.LastProducerEpoch when there is one (Kafka keeps it in memory only,
// so a retried InitProducerId that spans a change of coordinator is fenced
// there). Its value:
//
//	version    int8  (1)
//	epoch      int16
//
// -1 when there is none. A record without the tag (every record before it)
// loads with lastEpochUnknown: a retried InitProducerId is then fenced, as in
// Kafka, and a retried EndTxn v5 is taken by its epoch alone (isEndRetry).
// Every state written since carries the tag, so its record is v1.
const lastEpochTag = 1002

// lastEpochVersion is the version of the last epoch tag's value written here.
const lastEpochVersion = 1

func appendOwed(dst []byte, o *Owed) []byte {
	dst = kbin.AppendInt8(dst, owedVersion)
	dst = kbin.AppendBool(dst, o.Commit)
	dst = kbin.AppendInt64(dst, o.ProducerID)
	dst = kbin.AppendInt16(dst, o.ProducerEpoch)
	return appendTopics(dst, o.Partitions)
}

// appendTopics appends tps (sorted) as a count of topics, then each topic's
// name and partitions.
func appendTopics(dst []byte, tps []TopicPartition) []byte {
	var topics []byte
	n := 0
	EachTopic(tps, func(topic string, partitions []int32) {
		n++
		topics = kbin.AppendString(topics, topic)
		topics = kbin.AppendArrayLen(topics, len(partitions))
		for _, p := range partitions {
			topics = kbin.AppendInt32(topics, p)
		}
	})
	dst = kbin.AppendArrayLen(dst, n)
	return append(dst, topics...)
}

func readOwed(b []byte) (*Owed, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int8(); r.Ok() && v != owedVersion {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	o := &Owed{Commit: r.Bool(), ProducerID: r.Int64(), ProducerEpoch: r.Int16()}
	var err error
	o.Partitions, err = readTopics(&r)
	return o, err
}

func readLastEpoch(b []byte) (int16, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int8(); r.Ok() && v != lastEpochVersion {
		return 0, fmt.Errorf("unknown version %d", v)
	}
	e := r.Int16()
	switch err := r.Complete(); {
	case err != nil:
		return 0, err
	case len(r.Src) != 0:
		return 0, fmt.Errorf("%d bytes after the value", len(r.Src))
	case e < -1:
		return 0, fmt.Errorf("epoch %d", e)
	}
	return e, nil
}

func readPreadded(b []byte) ([]TopicPartition, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int8(); r.Ok() && v != preaddedVersion {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	return readTopics(&r)
}

// readTopics reads what appendTopics wrote, which must end r's value.
func readTopics(r *kbin.Reader) ([]TopicPartition, error) {
	var tps []TopicPartition
	for range max(r.ArrayLen(), 0) {
		topic := r.String()
		for range max(r.ArrayLen(), 0) {
			if !r.Ok() {
				break
			}
			tps = append(tps, TopicPartition{topic, r.Int32()})
		}
		if !r.Ok() {
			break
		}
	}
	if err := r.Complete(); err != nil {
		return nil, err
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%d bytes after the value", len(r.Src))
	}
	return union(tps, nil), nil
}

// decodeRecord reads one __transaction_state record; a nil Meta is a tombstone.
func decodeRecord(r group.Record) (string, *Meta, error) {
	var key kmsg.TxnMetadataKey
	if err := key.ReadFrom(r.Key); err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if key.Version != 0 {
		return "", nil, fmt.Errorf("%w: key version %d, this build reads 0", ErrCorruptRecord, key.Version)
	}
	if r.Value == nil {
		return key.TransactionalID, nil, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "", nil, fmt.Errorf("%w: value of %q: %v", ErrCorruptRecord, key.TransactionalID, err)
	}
	if v.Version > maxValueVersion {
		return "", nil, fmt.Errorf("%w: value of %q: version %d, this build reads up to %d", ErrCorruptRecord, key.TransactionalID, v.Version, maxValueVersion)
	}
	m := &Meta{
		ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch, TimeoutMs: v.TimeoutMillis, State: v.State,
		StartMs: v.StartTimestamp, LastUpdateMs: v.LastUpdateTimestamp,
		TV2: v.ClientTransactionVersion >= 2, LastProducerEpoch: lastEpochUnknown,
	}
	if v.NextProducerID >= 0 {
		m.NextProducerID = v.NextProducerID
	}
	if v.PreviousProducerID >= 0 {
		m.PrevProducerID = v.PreviousProducerID
	}
	var owedErr, preaddedErr, lastEpochErr error
	v.UnknownTags.Each(func(tag uint32, val []byte) {
		switch {
		case tag == lastEpochTag && lastEpochErr == nil:
			m.LastProducerEpoch, lastEpochErr = readLastEpoch(val)
		case tag == owedTag && owedErr == nil:
			m.Owed, owedErr = readOwed(val)
		case tag == preaddedTag && preaddedErr == nil:
			m.Preadded, preaddedErr = readPreadded(val)
		}
	})
	if owedErr != nil {
		return "", nil, fmt.Errorf("%w: value of %q: owed markers: %v", ErrCorruptRecord, key.TransactionalID, owedErr)
	}
	if lastEpochErr != nil {
		return "", nil, fmt.Errorf("%w: value of %q: last producer epoch: %v", ErrCorruptRecord, key.TransactionalID, lastEpochErr)
	}
	if preaddedErr != nil {
		return "", nil, fmt.Errorf("%w: value of %q: pre-added partitions: %v", ErrCorruptRecord, key.TransactionalID, preaddedErr)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions = append(m.Partitions, TopicPartition{t.Topic, p})
		}
	}
	m.Partitions = union(m.Partitions, nil)
	return key.TransactionalID, m, nil
}
