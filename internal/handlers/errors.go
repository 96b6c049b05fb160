package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/storage"
)

// errorCodes maps domain errors to Kafka error codes; the first match wins.
var errorCodes = []struct {
	err  error
	code *kerr.Error
}{
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrUnknownPartition, kerr.NotLeaderForPartition},
	{replica.ErrClosed, kerr.NotLeaderForPartition},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{replica.ErrOffsetMovedToTieredStorage, kerr.OffsetMovedToTieredStorage},
	{replica.ErrTimeout, kerr.RequestTimedOut},
	{replica.ErrRecordTooLarge, kerr.MessageTooLarge},
	{replica.ErrInvalidRecord, kerr.InvalidRecord},
	{replica.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{replica.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{replica.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{replica.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{replica.ErrInvalidTxnState, kerr.InvalidTxnState},
	{replica.ErrTxnMarkerPending, kerr.NotEnoughReplicas},
	{replica.ErrOffsetNotAvailable, kerr.OffsetNotAvailable},
	{batch.ErrCorrupt, kerr.CorruptMessage},
	{batch.ErrInvalid, kerr.InvalidRecord},
	// Kafka's decompressing stream throws a KafkaException, which its
	// produce path answers with the unknown error.
	{batch.ErrDecompress, kerr.UnknownServerError},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrEmptyAppend, kerr.InvalidRecord},
	{storage.ErrBatchTooLarge, kerr.RecordListTooLarge},
	{storage.ErrFencedLeaderEpoch, kerr.NotLeaderForPartition},
	{storage.ErrLogFailed, kerr.KafkaStorageError},
	{storage.ErrCorruptSegment, kerr.KafkaStorageError},
	{storage.ErrRemoteUnavailable, kerr.KafkaStorageError},
	{storage.ErrRemoteCorrupt, kerr.KafkaStorageError},
	{storage.ErrClosed, kerr.NotLeaderForPartition},
	{context.Canceled, kerr.RequestTimedOut},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
}

// ErrorCode is the Kafka error code for a domain error (0 for nil). It is the one
// mapping of domain errors to codes: the HTTP API (internal/httpapi) turns the code
// into a status instead of keeping a table of its own.
func ErrorCode(err error) int16 { return errorCode(err) }

// errorCode is the Kafka error code for err (0 for nil).
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *metadata.KafkaError
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return m.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// leaderPartition finds a partition this broker leads, telling an unknown
// partition (UNKNOWN_TOPIC_OR_PARTITION) from one led elsewhere (NOT_LEADER_OR_FOLLOWER).
func (h *Handlers) leaderPartition(img *metadata.Image, topic string, index int32) (*replica.Partition, error) {
	return h.leaderPartitionOf(img.Topic(topic), topic, index)
}

// leaderPartitionOf is leaderPartition for a topic already looked up in the
// image (t, nil when unknown): a fetch looks each topic up once, not once per
// partition (a follower's session may hold thousands).
func (h *Handlers) leaderPartitionOf(t *metadata.Topic, topic string, index int32) (*replica.Partition, error) {
	p, err := h.hostedPartitionOf(t, topic, index)
	if err != nil {
		return nil, err
	}
	if !p.IsLeader() {
		return nil, replica.ErrNotLeader
	}
	return p, nil
}

// leaderPartitionAt is leaderPartition for a request naming the leader epoch
// it expects (-1: any). As Kafka's Partition.getLocalLog, a replica hosted
// here checks the epoch before its role: a client whose view of the epoch
// differs from this broker's hears FENCED_LEADER_EPOCH or
// UNKNOWN_LEADER_EPOCH even from a follower.
func (h *Handlers) leaderPartitionAt(img *metadata.Image, topic string, index, epoch int32) (*replica.Partition, error) {
	p, err := h.hostedPartition(img, topic, index)
	if err == nil {
		err = p.CheckLeaderEpoch(epoch)
	}
	if err == nil && !p.IsLeader() {
		err = replica.ErrNotLeader
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// hostedPartition returns this broker's replica of a partition, leader or
// follower (a KIP-392 consumer fetch).
func (h *Handlers) hostedPartition(img *metadata.Image, topic string, index int32) (*replica.Partition, error) {
	return h.hostedPartitionOf(img.Topic(topic), topic, index)
}

// hostedPartitionOf is hostedPartition for a topic already looked up (see
// leaderPartitionOf).
func (h *Handlers) hostedPartitionOf(t *metadata.Topic, topic string, index int32) (*replica.Partition, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) || t.Partitions[index] == nil {
		return nil, metadata.ErrUnknownTopic
	}
	p, err := h.replicas.Partition(topic, index)
	if err != nil {
		return nil, replica.ErrNotLeader
	}
	return p, nil
}

// awaitLocalApply waits (briefly) until this broker's partitions reflect the
// controller's latest image, so a client can use a topic it just created or changed
// without a NOT_LEADER_OR_FOLLOWER round trip. A controller-only node hosts no
// partitions and does not wait.
func (h *Handlers) awaitLocalApply(ctx context.Context) {
	if h.replicas == nil {
		return
	}
	defer startWait(ctx)()
	ctx, cancel := context.WithTimeout(ctx, localApplyTimeout)
	defer cancel()
	if err := h.replicas.WaitApplied(ctx, h.cluster.Image().Offset()); err != nil {
		h.log.Warn("metadata change not yet applied locally", "err", err)
	}
}

const localApplyTimeout = 5 * time.Second

// awaitTopics waits (briefly) until this node's image holds the topics, created
// through the active controller (this node or another: this node's Raft log
// follows it), and its partitions reflect that image.
func (h *Handlers) awaitTopics(ctx context.Context, names []string) {
	ctx, cancel := context.WithTimeout(ctx, localApplyTimeout)
	defer cancel()
	endWait := startWait(ctx)
	for _, name := range names {
		for h.cluster.Image().Topic(name) == nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	endWait()
	h.awaitLocalApply(ctx)
}
