package txn

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
)

// encodeRecord is the __transaction_state record of id's state, in Kafka's
// schema (kmsg TxnMetadataKey v0 / TxnMetadataValue v0).
func encodeRecord(id string, m Meta) group.Record {
	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = id
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = m.ProducerID, m.ProducerEpoch, m.TimeoutMs, m.State
	v.LastUpdateTimestamp, v.StartTimestamp = m.LastUpdateMs, m.StartMs
	if m.TV2 {
		// v1 (flexible) carries KIP-890's tagged fields.
		v.Version, v.ClientTransactionVersion = 1, 2
		if m.ProducerEpoch == math.MaxInt16 {
			v.NextProducerID = m.NextProducerID
		}
		if m.ProducerEpoch == 0 && m.PrevProducerID != 0 {
			v.PreviousProducerID = m.PrevProducerID
		}
	}
	EachTopic(m.Partitions, func(topic string, partitions []int32) {
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = topic, partitions
		v.Topics = append(v.Topics, t)
	})
	return group.Record{Key: key.AppendTo(nil), Value: v.AppendTo(nil)}
}

// decodeRecord reads one __transaction_state record; a nil Meta is a tombstone.
func decodeRecord(r group.Record) (string, *Meta, error) {
	var key kmsg.TxnMetadataKey
	if err := key.ReadFrom(r.Key); err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if r.Value == nil {
		return key.TransactionalID, nil, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "", nil, fmt.Errorf("%w: value of %q: %v", ErrCorruptRecord, key.TransactionalID, err)
	}
	m := &Meta{
		ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch, TimeoutMs: v.TimeoutMillis, State: v.State,
		StartMs: v.StartTimestamp, LastUpdateMs: v.LastUpdateTimestamp,
		TV2: v.ClientTransactionVersion >= 2,
	}
	if v.NextProducerID >= 0 {
		m.NextProducerID = v.NextProducerID
	}
	if v.PreviousProducerID >= 0 {
		m.PrevProducerID = v.PreviousProducerID
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions = append(m.Partitions, TopicPartition{t.Topic, p})
		}
	}
	m.Partitions = union(m.Partitions, nil)
	return key.TransactionalID, m, nil
}
