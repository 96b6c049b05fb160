package handlers

// Produce (key 0), v3-v13. Every supported version carries v2 record batches.
//   v0-v2 are listed in ApiVersions, as Kafka 4.4 lists them, but refused: the
//   connection is closed before the body is read, as Kafka 4.4 does.
//   v3: transactional id; v5: log start offset in the response; v8: per-record
//   errors and an error message; v9+: flexible. acks=0 gets no response at all:
//   a partition's error closes the connection (the client's cue to refresh its
//   metadata, as in Kafka); over its producer_byte_rate the client is throttled
//   by muting the connection alone (protocol.Response.Throttle).
//   v3-v11 (KIP-890 part 1): a transactional batch that would open its
//   producer's transaction on a partition is appended only once the
//   coordinator confirms the partition is in the ongoing transaction
//   (AddPartitionsToTxn VerifyOnly): else INVALID_TXN_STATE, from v11
//   TRANSACTION_ABORTABLE; the coordinator's transient errors answer
//   NOT_ENOUGH_REPLICAS, which clients retry. The batches of a request that
//   need it are asked about in one request to the coordinator.
//   v10 (KIP-951): NOT_LEADER_OR_FOLLOWER names the current leader and its
//   endpoint (leader_hint.go).
//   v12 (KIP-890, transaction version 2): the first transactional batch of a
//   producer on a partition adds the partition to its transaction at the
//   coordinator (no AddPartitionsToTxn from the client; one add for all the
//   partitions of a request that need it); the coordinator's
//   transient errors answer NOT_ENOUGH_REPLICAS, CONCURRENT_TRANSACTIONS (the
//   previous transaction still completing after the broker's own retries)
//   itself, as Kafka 4 does; clients retry both.
//   v13 (KIP-516): topics are named by id, each looked up in the same metadata
//   snapshot a name would be; an id no topic has (zero, unknown, a deleted
//   topic's) is UNKNOWN_TOPIC_ID, checked before the topic's ACLs, as Kafka 4.4
//   answers.
//   v3+: the transactional batches of a request with a transactional id are
//   one producer's at one epoch, else every partition is
//   INVALID_PRODUCER_ID_MAPPING (as Kafka answers).
// The batches of all partitions are appended first, in arrival order; acks=all then
// waits for each partition's high-water mark under one shared deadline (the
// request's timeout) off the connection's handler goroutine (protocol.Response.Wait,
// run by the connection's writer: WaitOnWriter), so pipelined requests share fsyncs,
// and the answers of the requests one fsync acknowledged leave in one socket write
// (protocol.Response.Ready).
// Nothing here (nor in the Wait) keeps a slice of the request after the response:
// the records reach the log by copy, and the request's frame buffer is reused for
// a later request (ReuseFrameKeys).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) produce(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acks := req.Acks
	validAcks := acks == 0 || acks == 1 || acks == -1

	img := h.cluster.Image()
	writable := h.topicCheck(ctx, c, kmsg.ACLOperationWrite)
	internalAllowed := r.ClientID != nil && *r.ClientID == adminClientID
	// Transactional batches need WRITE on the request's transactional id: else
	// the whole request is refused, as Kafka does. A request that names no
	// transactional id is refused too, as Kafka does: no coordinator would
	// verify or end its transaction, which would hang read_committed readers
	// at its first batch. Strata's admin tooling alone (the admin client id,
	// with no authorizer) may write such batches, as its tests write a
	// coordinator's.
	txnDenied := false
	if hasTransactionalBatch(req) {
		if req.TransactionID == nil {
			txnDenied = (h.cfg.Authorizer != nil || !internalAllowed) && ctx.Value(onLinkKey{}) == nil
		} else {
			txnDenied = !h.authorize(ctx, c, kmsg.ACLOperationWrite, resTxnID, *req.TransactionID)
		}
	}
	// The transactional batches of a request with a transactional id are one
	// producer's, at one epoch (one coordinator question for all of them):
	// else, as Kafka answers, every partition is INVALID_PRODUCER_ID_MAPPING.
	mixed := !txnDenied && req.TransactionID != nil && transactionalProducers(req) > 1
	var targets []produceTarget
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		// The topic is looked up once for all its partitions: by id from v13
		// (nil: UNKNOWN_TOPIC_ID), else by name. The answer carries the id
		// (v13+) or the name as asked; st.Topic is the name either way, for
		// the leader hints and the acks=0 failure message.
		var mt *metadata.Topic
		st.TopicID = rt.TopicID
		if req.Version >= 13 {
			if mt = img.TopicByID(rt.TopicID); mt != nil {
				st.Topic = mt.Name
			}
		} else {
			st.Topic, mt = rt.Topic, img.Topic(rt.Topic)
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			// As Kafka: a topic id is resolved before the topic's ACLs are
			// checked, and a refused partition's base offset is -1.
			switch {
			case txnDenied:
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			case mixed:
				sp.ErrorCode = kerr.InvalidProducerIDMapping.Code
			case mt == nil && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !validAcks:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case !writable(st.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			if sp.ErrorCode != 0 {
				sp.BaseOffset = -1
				continue
			}
			var p *replica.Partition
			err := checkProduceTarget(mt, req.Version, rp.Partition, rp.Records, internalAllowed)
			if err == nil {
				p, err = h.leaderPartitionOf(mt, st.Topic, rp.Partition)
			}
			if err != nil {
				setProduceError(sp, err)
				continue
			}
			targets = append(targets, produceTarget{sp: sp, p: p, topic: st.Topic, records: rp.Records})
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.TransactionID != nil && len(targets) > 0 {
		if req.Version >= 12 {
			h.joinProduceTxn(ctx, *req.TransactionID, targets)
		} else {
			h.verifyProduceTxn(ctx, *req.TransactionID, targets, req.Version)
		}
	}
	// Appended in arrival order. With acks=all, a batch appended while the
	// producer's next request is read already (a pipelining client, such as a
	// transactional producer's flush sending its last batch right behind a
	// full one) lets the partition's fsync wait for that request's append, so
	// that both are acknowledged by one fsync instead of two in sequence.
	var followed func() bool
	if acks == -1 {
		followed = r.Queued
	}
	tv2 := req.TransactionID != nil && req.Version >= 12 // transaction version 2: see AppendOpts.EpochBump
	waits := 0
	for i := range targets {
		t := &targets[i]
		sp, err := t.sp, t.err
		if err == nil {
			var res replica.AppendResult
			res, err = t.p.AppendWith(t.records, acks, replica.AppendOpts{Verify: t.verified, Guard: t.guard, EpochBump: tv2, Followed: followed})
			if err == nil {
				h.cfg.Observer.Produced(t.topic, t.p.Index, int64(len(t.records)), res.LastOffset-res.BaseOffset+1)
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
				if acks == -1 {
					t.appended, waits = &res, waits+1
				}
			}
		}
		setProduceError(sp, err)
	}
	throttle := h.throttle(c, metadata.QuotaProducerByteRate, r.Size)
	if acks == 0 {
		// No answer: a partition's error closes the connection, which is how
		// the client learns to refresh its metadata (as Kafka does). Else there
		// is nothing to carry throttle_time_ms either: as Kafka does, the
		// connection is only muted for the throttle.
		if err := produceFailure(resp); err != nil {
			return protocol.Response{None: true, Close: err}
		}
		return protocol.Response{None: true, Throttle: throttle}
	}
	resp.ThrottleMillis = int32(throttle.Milliseconds())
	if waits == 0 {
		hintProduceLeaders(img, resp)
		return protocol.Response{Msg: resp, Throttle: throttle}
	}
	// The appends are done, in arrival order; waiting for the high-water mark
	// happens off the connection's handler, so the next request's appends join the
	// same group commit. It only waits, against a deadline fixed here: the
	// connection's writer runs it in the response's turn (WaitOnWriter).
	deadline := time.Now().Add(time.Duration(req.TimeoutMillis) * time.Millisecond)
	h.cfg.Observer.DelayedProduce(1)
	return protocol.Response{Throttle: throttle, WaitOnWriter: true, Ready: func() bool {
		// The fsync that acknowledges this request often acknowledges the
		// ones behind it on the connection too: their answers then leave in
		// one socket write.
		for _, t := range targets {
			if t.appended != nil && t.p.HighWatermark() <= t.appended.LastOffset {
				return false
			}
		}
		return true
	}, Wait: func(ctx context.Context) protocol.Response {
		defer h.cfg.Observer.DelayedProduce(-1)
		for _, t := range targets {
			if t.appended == nil {
				continue
			}
			// Pointers into resp.Topics[i].Partitions stay valid: those slices were
			// sized up front and never appended to.
			err := t.p.WaitCommitted(ctx, *t.appended, time.Until(deadline))
			setProduceError(t.sp, err)
		}
		hintProduceLeaders(h.cluster.Image(), resp)
		return reply(resp)
	}}
}

// produceTarget is one partition's batch of a Produce that passed the checks
// before the append: err, verified and guard are what the transaction's
// coordinator said of it (joinProduceTxn, verifyProduceTxn).
type produceTarget struct {
	sp       *kmsg.ProduceResponseTopicPartition
	p        *replica.Partition
	topic    string
	records  []byte
	err      error
	verified bool                      // append with AppendOpts.Verify and guard
	guard    replica.VerificationGuard // 0: none was needed
	appended *replica.AppendResult     // acks=all: the append to wait for (nil: no wait)
}

// txnBatch is the header of t's batch when it is transactional and carries a
// producer id: the batches the coordinator is asked about. The others are
// left to Append (which refuses a transactional batch without a producer id).
func (t *produceTarget) txnBatch() (batch.Header, bool) {
	hdr, err := batch.ParseHeader(t.records)
	return hdr, err == nil && hdr.Transactional() && hdr.Idempotent()
}

// transactionalProducers counts the distinct producer ids and epochs of the
// transactional batches of req.
func transactionalProducers(req *kmsg.ProduceRequest) int {
	type producer struct {
		id    int64
		epoch int16
	}
	seen := map[producer]bool{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if hdr, err := batch.ParseHeader(rp.Records); err == nil && hdr.Transactional() && hdr.Idempotent() {
				seen[producer{hdr.ProducerID, hdr.ProducerEpoch}] = true
			}
		}
	}
	return len(seen)
}

// joinProduceTxn adds the partitions of the transactional batches of ts to
// their producer's transaction (Produce v12+), in one request to the
// coordinator for all of them, except those whose partition has the
// producer's transaction at the batch's epoch open already. A batch at a
// newer epoch than the open one is added at once while the coordinator writes
// the earlier transaction's transaction-version-2 markers (the overlap, see
// package txn), and its append then waits in the partition for that marker
// (replica.ErrTxnMarkerPending); where the coordinator cannot overlap, the add
// waits (CONCURRENT_TRANSACTIONS) until the markers are written. As Kafka 4 does,
// the broker retries that answer itself for a moment first
// (retryConcurrentTxn): the next transaction's first produce usually follows
// EndTxn before the markers are written, and a client's own retry costs it a
// metadata refresh (seconds, for franz-go). A refused partition's target gets
// the Produce error.
//
// The wait holds the connection's request pipeline, as Kafka does (it reads a
// connection's next request only once the previous one is answered): the
// producer's later batches of the transaction, pipelined behind this one on the
// same connection, must be appended after it, or their sequence numbers would
// be out of order.
func (h *Handlers) joinProduceTxn(ctx context.Context, id string, ts []produceTarget) {
	var (
		join []int
		tps  []txn.TopicPartition
		hdr  batch.Header
	)
	for i := range ts {
		if b, ok := ts[i].txnBatch(); ok && !ts[i].p.InTxnAt(b.ProducerID, b.ProducerEpoch) {
			hdr = b // one producer and epoch: see transactionalProducers
			join = append(join, i)
			tps = append(tps, txn.TopicPartition{Topic: ts[i].topic, Partition: ts[i].p.Index})
		}
	}
	if len(join) == 0 {
		return
	}
	var codes []int16
	add := func() int16 {
		codes = h.coordinateTxnEach(ctx, id, hdr.ProducerID, hdr.ProducerEpoch, tps, false)
		return firstError(codes)
	}
	completed := func() <-chan struct{} {
		if h.txnCoordinatorHere(id) {
			return h.cfg.Transactions.Completed(id)
		}
		return nil
	}
	retryConcurrentTxn(ctx, joinTxnRetryBackoff, joinTxnRetryMax, add, completed)
	for k, i := range join {
		if code := codes[k]; code != 0 {
			ts[i].err = &metadata.KafkaError{Code: txnProduceCode(code, 12), Msg: "adding the partition to the transaction: " + kerr.ErrorForCode(code).Error()}
		}
	}
}

// verifyProduceTxn checks the transactional batches of ts (Produce v11 or
// older) that would open their producer's transaction on their partition with
// the coordinator before they are appended (KIP-890 part 1,
// replica/verify.go), in one VerifyOnly request for all of them. Every
// transactional batch is appended with AppendOpts.Verify: a batch whose
// transaction is open on its partition already needs no question (guard 0;
// the append still refuses it if a marker ended that transaction meanwhile).
// A partition the coordinator refuses forgets its guard, so a refused
// producer leaves nothing behind, and its target gets the Produce error.
func (h *Handlers) verifyProduceTxn(ctx context.Context, id string, ts []produceTarget, version int16) {
	var (
		ask []int
		tps []txn.TopicPartition
		hdr batch.Header
	)
	for i := range ts {
		b, ok := ts[i].txnBatch()
		if !ok {
			continue
		}
		ts[i].verified = true
		if ts[i].guard = ts[i].p.StartTxnVerification(b.ProducerID, b.ProducerEpoch); ts[i].guard != 0 {
			hdr = b // one producer and epoch: see transactionalProducers
			ask = append(ask, i)
			tps = append(tps, txn.TopicPartition{Topic: ts[i].topic, Partition: ts[i].p.Index})
		}
	}
	if len(ask) == 0 {
		return
	}
	codes := h.coordinateTxnEach(ctx, id, hdr.ProducerID, hdr.ProducerEpoch, tps, true)
	for k, i := range ask {
		if code := codes[k]; code != 0 {
			ts[i].p.CancelTxnVerification(hdr.ProducerID, ts[i].guard)
			ts[i].guard = 0
			ts[i].err = &metadata.KafkaError{Code: txnProduceCode(code, version), Msg: "verifying the partition is in the transaction: " + kerr.ErrorForCode(code).Error()}
		}
	}
}

// firstError is the first non-zero code of codes, or 0.
func firstError(codes []int16) int16 {
	for _, code := range codes {
		if code != 0 {
			return code
		}
	}
	return 0
}

// The broker's own retry of an implicit add the coordinator answers
// CONCURRENT_TRANSACTIONS (Kafka's add.partitions.to.txn.retry.backoff.ms and
// add.partitions.to.txn.retry.backoff.max.ms).
//
// When this broker is the coordinator, the retry waits for the coordinator's
// signal that the transactional id's change in flight (the previous
// transaction's markers) is over, and retries at once. When the coordinator is
// another broker, that broker holds the AddPartitionsToTxn (v4+, the broker
// form) and waits for the same signal itself, up to joinTxnRetryMax, before it
// answers (24_add_partitions_to_txn.go): the answer is the wake-up. Either way
// joinTxnRetryBackoff is only a fallback, polled when a signal came and the
// answer is still CONCURRENT_TRANSACTIONS, or when a coordinator answered
// without holding the add. Kafka polls every 20 ms; Strata's fallback is 5 ms,
// because completing the previous transaction usually takes a few ms here
// (with 20 ms and no signal, `strata bench produce --transaction-records 100`
// made 4.0-4.2k records/s, with 5 ms 10.2-11.1k; 1 KiB records, one node, load
// average 2, alternating runs).
//
// Kafka gives up after 100 ms; Strata waits up to 500 ms, because giving up is
// costly: when the producer had later batches of the transaction in flight they
// fail with OUT_OF_ORDER_SEQUENCE_NUMBER, and the transaction with them. With
// 100 ms, `strata bench produce --transaction-records 1000` lost one transaction
// in two of four 5 s runs on a loaded 2-core machine, where completing a
// transaction took longer; with 500 ms none in five.
const (
	joinTxnRetryBackoff = 5 * time.Millisecond
	joinTxnRetryMax     = 500 * time.Millisecond
)

// retryConcurrentTxn calls join until it answers something other than
// CONCURRENT_TRANSACTIONS, for at most max (or until ctx ends), and returns the
// last answer. Between calls it waits for the channel completed returns (the
// coordinator's signal that the change in flight is over) when there is one
// still open, else (nil: a coordinator on another broker, which held the add
// until that signal or its bound) for backoff.
func retryConcurrentTxn(ctx context.Context, backoff, max time.Duration, join func() int16, completed func() <-chan struct{}) int16 {
	deadline := time.Now().Add(max)
	sawOver := false
	for {
		code := join()
		left := time.Until(deadline)
		if code != kerr.ConcurrentTransactions.Code || left <= 0 {
			return code
		}
		done := completed()
		if done != nil && isClosed(done) {
			// Over already: retry at once, unless the previous round saw that
			// too (then poll rather than spin).
			if !sawOver {
				sawOver = true
				continue
			}
			done = nil
		}
		sawOver = false
		wait := left
		if done == nil {
			if left < backoff {
				return code
			}
			wait = backoff
		}
		t := time.NewTimer(wait)
		endWait := startWait(ctx)
		select {
		case <-ctx.Done():
			endWait()
			t.Stop()
			return code
		case <-done:
			t.Stop()
		case <-t.C:
		}
		endWait()
	}
}

// isClosed tells whether ch is closed (it is never sent on).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// adminClientID is the client id of Kafka's own admin tooling, which alone
// may write to the internal topics.
const adminClientID = "__admin_client"

// checkProduceTarget refuses what Kafka refuses before appending: an unknown
// topic (t nil) or partition; records that are not exactly one whole batch of magic
// 2 (INVALID_RECORD: none, a truncated one, two; a magic above 2
// CORRUPT_MESSAGE), a zstd batch before v7 (UNSUPPORTED_COMPRESSION_TYPE); a
// write to an internal topic (__consumer_offsets, __transaction_state,
// __share_group_state: INVALID_TOPIC_EXCEPTION) from any client id but Kafka's
// admin client's.
// A batch is checked further (CRC, sizes) by Append.
func checkProduceTarget(t *metadata.Topic, version int16, partition int32, records []byte, internalAllowed bool) error {
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) || t.Partitions[partition] == nil {
		return metadata.ErrUnknownTopic
	}
	if !hasBatch(records) {
		return &metadata.KafkaError{Code: kerr.InvalidRecord.Code, Msg: "a produce request carries one whole record batch per partition"}
	}
	if hdr, err := batch.ParseHeader(records); err == nil {
		switch {
		case hdr.Magic < 0 || hdr.Magic > 2:
			return &metadata.KafkaError{Code: kerr.CorruptMessage.Code, Msg: "invalid magic"}
		case hdr.Magic != 2:
			return &metadata.KafkaError{Code: kerr.InvalidRecord.Code, Msg: "produce requests carry record batches of magic 2 only"}
		case version < 7 && hdr.Codec() == batch.CodecZstd:
			return &metadata.KafkaError{Code: kerr.UnsupportedCompressionType.Code, Msg: "zstd compression needs produce v7 or later"}
		case hdr.Size() >= batch.HeaderSize && hasBatch(records[min(hdr.Size(), len(records)):]):
			return &metadata.KafkaError{Code: kerr.InvalidRecord.Code, Msg: "a produce request carries exactly one record batch per partition"}
		}
	}
	if IsInternalTopic(t.Name) && !internalAllowed {
		return &metadata.KafkaError{Code: kerr.InvalidTopicException.Code, Msg: "cannot append to internal topic " + t.Name}
	}
	return nil
}

// hasBatch reports whether b starts with another batch as Kafka's batch
// iterator finds one: its header up to the magic byte, and as many bytes as
// its length says (fewer is a truncated tail, not a batch).
func hasBatch(b []byte) bool {
	const upToMagic = 17
	if len(b) < upToMagic {
		return false
	}
	n := int64(int32(binary.BigEndian.Uint32(b[batch.LengthPrefix-4:])))
	return n >= 0 && int64(batch.LengthPrefix)+n <= int64(len(b))
}

// hasTransactionalBatch reports whether any partition's first batch is
// transactional.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if hdr, err := batch.ParseHeader(rp.Records); err == nil && hdr.Transactional() {
				return true
			}
		}
	}
	return false
}

// produceFailure names the first partition of resp that failed, or is nil.
func produceFailure(resp *kmsg.ProduceResponse) error {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return fmt.Errorf("acks=0 produce to %s-%d failed: %w", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	return nil
}

func setProduceError(sp *kmsg.ProduceResponseTopicPartition, err error) {
	if err == nil {
		return
	}
	sp.ErrorCode = errorCode(err)
	var tsErr *replica.TimestampError
	switch {
	case errors.As(err, &tsErr):
		setRecordErrors(sp, tsErr)
	case !errors.Is(err, metadata.ErrUnknownTopic): // Kafka names no cause for an unknown partition
		msg := err.Error()
		sp.ErrorMessage = &msg
	}
	if sp.ErrorCode != 0 && !errors.Is(err, replica.ErrTimeout) {
		sp.BaseOffset = -1
	}
}

// setRecordErrors words a timestamp refusal as Kafka does: a summary for the
// partition and one record error per refused record.
func setRecordErrors(sp *kmsg.ProduceResponseTopicPartition, e *replica.TimestampError) {
	summary := e.Summary()
	sp.ErrorMessage = &summary
	for _, r := range e.Records {
		re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		re.RelativeOffset = r.Index
		re.ErrorMessage = &r.Message
		sp.ErrorRecords = append(sp.ErrorRecords, re)
	}
}
