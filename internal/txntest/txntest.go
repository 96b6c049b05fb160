// Package txntest drives the partition side of Kafka transactions over the wire
// for tests: it writes transactional batches with raw Produce requests and ends
// them with WriteTxnMarkers, as a transaction coordinator would. It has no state.
package txntest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
)

// ClientID is the client id a client of these functions needs for their
// transactional batches, which name no transactional id (a coordinator's
// markers end them, not a coordinator's verification): Kafka's admin client
// id, the only one a broker takes such batches from.
const ClientID = "__admin_client"

// ProducerID asks the broker for a fresh (non-transactional) producer id.
func ProducerID(ctx context.Context, cl *kgo.Client) (int64, error) {
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return resp.ProducerID, nil
}

// Produce writes values as one batch of producer pid (epoch 0, first sequence
// seq) to topic/partition with acks=all, transactional or not.
func Produce(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, seq int32, transactional bool, values ...string) error {
	return ProduceAs(ctx, cl, topic, partition, pid, 0, seq, transactional, values...)
}

// ProduceAs is Produce at producer epoch epoch.
func ProduceAs(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, epoch int16, seq int32, transactional bool, values ...string) error {
	return ProduceWithID(ctx, cl, "", topic, partition, pid, epoch, seq, transactional, values...)
}

// ProduceWithID is ProduceAs with the request's transactional id set to id
// (none when empty), as a transactional client sends it, through r (a client,
// or one broker of it).
func ProduceWithID(ctx context.Context, r kmsg.Requestor, id, topic string, partition int32, pid int64, epoch int16, seq int32, transactional bool, values ...string) error {
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Value: []byte(v)}
	}
	b, err := batch.Build(batch.BuildOptions{
		FirstTimestamp: time.Now().UnixMilli(),
		Idempotent:     true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Transactional: transactional,
	}, recs)
	if err != nil {
		return err
	}
	topicID, err := TopicID(ctx, r, topic)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	if id != "" {
		req.TransactionID = kmsg.StringPtr(id)
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID // the name up to v12, the id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return nil
}

// TopicID is topic's id, asked of r with a Metadata request: a raw Produce
// (v13+) names its topic by id.
func TopicID(ctx context.Context, r kmsg.Requestor, topic string) ([16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return [16]byte{}, err
	}
	if len(resp.Topics) != 1 {
		return [16]byte{}, fmt.Errorf("metadata of %s: %d topics", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	return resp.Topics[0].TopicID, nil
}

// EndTxn writes producer pid's commit or abort marker on topic/partition.
func EndTxn(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, commit bool) error {
	return EndTxnAt(ctx, cl, topic, partition, pid, 0, commit)
}

// EndTxnAt is EndTxn with the markers of a coordinator at coordinatorEpoch.
func EndTxnAt(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, coordinatorEpoch int32, commit bool) error {
	return writeMarker(ctx, cl, topic, partition, pid, 0, coordinatorEpoch, 0, commit)
}

// EndTxnV2 writes the marker of a transaction-version-2 coordinator (KIP-1228:
// WriteTxnMarkers v2, transaction version 2) at producer epoch epoch, which
// must be above the producer's on the partition.
func EndTxnV2(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, epoch int16, commit bool) error {
	return writeMarker(ctx, cl, topic, partition, pid, epoch, 0, 2, commit)
}

func writeMarker(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, epoch int16, coordinatorEpoch int32, tv int8, commit bool) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, m.TransactionVersion = pid, epoch, coordinatorEpoch, commit, tv
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("WriteTxnMarkers: %w", err)
	}
	return nil
}
