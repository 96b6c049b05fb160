package handlers

import (
	"context"

	"github.com/strata-stream/strata/internal/txn"
)

// Transactions is the transaction coordinator as the handlers use it
// (txn.Coordinator). Each call answers one Kafka error code (0: success).
type Transactions interface {
	PartitionFor(transactionalID string) int32
	InitProducerID(ctx context.Context, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, int16)
	AddPartitions(ctx context.Context, id string, pid int64, epoch int16, add []txn.TopicPartition) int16
	VerifyPartitions(id string, pid int64, epoch int16, tps []txn.TopicPartition) int16
	EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, int16)
	Describe(id string) (txn.Described, int16)
	List(f txn.ListFilter) []txn.Described
}

// NextProducerID hands out a producer id from this broker's block (the
// transaction coordinator's source of new ids).
func (h *Handlers) NextProducerID(ctx context.Context) (int64, error) { return h.nextProducerID(ctx) }
