package handlers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestErrorCode: every domain error maps to its Kafka code, wrapped or not; a
// metadata.KafkaError carries its own; anything unknown is
// UNKNOWN_SERVER_ERROR, and nil is 0.
func TestErrorCode(t *testing.T) {
	if got := ErrorCode(nil); got != 0 {
		t.Fatalf("ErrorCode(nil) = %d", got)
	}
	for _, m := range errorCodes {
		if got := ErrorCode(m.err); got != m.code.Code {
			t.Errorf("ErrorCode(%v) = %d, want %s", m.err, got, m.code.Message)
		}
		if got := ErrorCode(fmt.Errorf("context: %w", m.err)); got != m.code.Code {
			t.Errorf("ErrorCode(wrapped %v) = %d, want %s", m.err, got, m.code.Message)
		}
	}
	if got := ErrorCode(fmt.Errorf("x: %w", metadata.ErrTopicExists)); got != kerr.TopicAlreadyExists.Code {
		t.Errorf("ErrorCode(ErrTopicExists) = %d", got)
	}
	if got := ErrorCode(errors.New("something else")); got != kerr.UnknownServerError.Code {
		t.Errorf("ErrorCode(unknown) = %d", got)
	}
}

// fakeCluster is the Cluster of a broker that is not the active controller:
// only the image is served; any controller call fails the test by panicking.
type fakeCluster struct {
	Cluster
	img *metadata.Image
}

func (f fakeCluster) Image() *metadata.Image { return f.img }
func (f fakeCluster) LeaderID() int32        { return 2 }
func (f fakeCluster) IsLeader() bool         { return false }

var (
	errTopicID       = metadata.UUID{9}
	offsetsTopicID   = metadata.UUID{10}
	compactedTopicID = metadata.UUID{11}
)

// newErrorsHandlers is broker 1 hosting topic "t": partition 0 led here
// (ISR of one, min.insync.replicas 2, leader epoch 3), partition 1 led by
// broker 2 with a replica here, partition 2 led by broker 2 (leader epoch 5)
// and not hosted here, partition 3 led here with broker 2 in its ISR, which
// never fetches (acks=all waits there until its timeout); a ten-record batch
// is on partition 0, committed before min.insync.replicas was raised to 2
// (below it the HWM does not move). Topic
// "compacted" (cleanup.policy compact) and the internal topic
// __consumer_offsets have one partition each, led here.
func newErrorsHandlers(t *testing.T) *Handlers {
	t.Helper()
	return newErrorsHandlersWith(t, Config{})
}

// newErrorsHandlersWith is newErrorsHandlers with cfg (its node id and
// broker epoch set here).
func newErrorsHandlersWith(t *testing.T, cfg Config) *Handlers {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.TopicRecord{Name: "t", ID: errTopicID},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 2, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 5},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		&metadata.TopicRecord{Name: "compacted", ID: compactedTopicID, Configs: map[string]string{"cleanup.policy": "compact"}},
		&metadata.PartitionRecord{TopicID: compactedTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.TopicRecord{Name: OffsetsTopic, ID: offsetsTopicID},
		&metadata.PartitionRecord{TopicID: offsetsTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 8)}), 1); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 10*time.Second, "the group commit to move the HWM to 10", func() bool { return p.HighWatermark() >= 10 })
	// Raised once the batch is committed: below the minimum ISR the leader's
	// HWM does not move.
	img, err = metadata.ApplyAll(img, []metadata.Record{
		&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: "min.insync.replicas", Value: "2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(2)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	cfg.NodeID, cfg.BrokerEpoch = 1, func() int64 { return 1 }
	return New(cfg, fakeCluster{img: img}, m, nil, nil, logger)
}

func serve(t *testing.T, h *Handlers, req kmsg.Request) kmsg.Response {
	t.Helper()
	return serveRequest(t, h, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req})
}

// serveRequest is serve with the connection and request header given.
func serveRequest(t *testing.T, h *Handlers, c *protocol.ConnInfo, r *protocol.Request) kmsg.Response {
	t.Helper()
	req := r.Msg
	resp := h.Handle(context.Background(), c, r)
	if resp.Wait != nil {
		resp = resp.Wait(context.Background())
	}
	if resp.Body != nil {
		defer resp.Body.Release()
		var w bufWriter
		if err := resp.Body.WriteBody(&w); err != nil {
			t.Fatal(err)
		}
		msg := req.ResponseKind()
		if err := msg.ReadFrom(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	return resp.Msg
}

// TestProduceErrors: a produce the broker cannot take gets Kafka's code for
// that partition, never a closed connection (acks=0 aside:
// TestAcksZeroErrorClosesConnection).
func TestProduceErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	good := batchtest.Build(batchtest.Options{})
	corrupt := batchtest.Build(batchtest.Options{})
	corrupt[len(corrupt)-1] ^= 0xff // the CRC no longer matches
	magic1 := batchtest.Build(batchtest.Options{})
	magic1[16] = 1
	magic3 := batchtest.Build(batchtest.Options{})
	magic3[16] = 3
	zstd := batchtest.Build(batchtest.Options{Codec: 4})
	big := batchtest.Build(batchtest.Options{Records: batchtest.Values(1, 2<<20)}) // over max.message.bytes
	transactional := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, Attributes: 0x10})
	for _, tc := range []struct {
		name      string
		version   int16
		topic     string
		partition int32
		acks      int16
		records   []byte
		clientID  string
		txnID     *string
		want      *kerr.Error
	}{
		{"unknown topic", 9, "nope", 0, 1, good, "", nil, kerr.UnknownTopicOrPartition},
		{"unknown partition", 9, "t", 7, 1, good, "", nil, kerr.UnknownTopicOrPartition},
		{"negative partition", 9, "t", -1, 1, good, "", nil, kerr.UnknownTopicOrPartition},
		{"empty topic name", 9, "", 0, 1, good, "", nil, kerr.UnknownTopicOrPartition},
		{"led elsewhere", 9, "t", 1, 1, good, "", nil, kerr.NotLeaderForPartition},
		{"acks=all under min.insync.replicas", 9, "t", 0, -1, good, "", nil, kerr.NotEnoughReplicas},
		{"acks=all past its timeout", 9, "t", 3, -1, good, "", nil, kerr.RequestTimedOut},
		{"invalid acks", 9, "t", 0, 2, good, "", nil, kerr.InvalidRequiredAcks},
		{"corrupt batch", 9, "t", 0, 1, corrupt, "", nil, kerr.CorruptMessage},
		{"no batch", 9, "t", 0, 1, []byte{}, "", nil, kerr.InvalidRecord},
		{"truncated batch", 9, "t", 0, 1, good[:30], "", nil, kerr.InvalidRecord},
		{"two batches", 9, "t", 0, 1, append(slices.Clone(good), good...), "", nil, kerr.InvalidRecord},
		{"magic 1", 9, "t", 0, 1, magic1, "", nil, kerr.InvalidRecord},
		{"zstd before v7", 6, "t", 0, 1, zstd, "", nil, kerr.UnsupportedCompressionType},
		{"zstd from v7", 7, "t", 0, 1, zstd, "", nil, nil},
		{"over max.message.bytes", 9, "t", 0, 1, big, "", nil, kerr.MessageTooLarge},
		{"internal topic", 9, OffsetsTopic, 0, 1, good, "", nil, kerr.InvalidTopicException},
		{"internal topic from the admin client", 9, OffsetsTopic, 0, 1, good, adminClientID, nil, nil},
		{"magic 3", 9, "t", 0, 1, magic3, "", nil, kerr.CorruptMessage},
		{"transactional batch without a transactional id", 9, "t", 0, 1, transactional, "", nil, kerr.TransactionalIDAuthorizationFailed},
		{"transactional batch without a transactional id from the admin client", 9, "t", 0, 1, transactional, adminClientID, nil, nil},
	} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(tc.version)
		req.Acks, req.TimeoutMillis, req.TransactionID = tc.acks, 200, tc.txnID
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = tc.partition, tc.records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r := &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req, ClientID: &tc.clientID}
		resp := serveRequest(t, h, &protocol.ConnInfo{}, r).(*kmsg.ProduceResponse)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
}

// TestProduceMixedPartitions: in one request each partition gets its own
// answer and the valid ones are appended (a transactional id the client may
// not write refuses the whole request: TestTxnRequestErrors).
func TestProduceMixedPartitions(t *testing.T) {
	h := newErrorsHandlers(t)
	p, err := h.replicas.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(records ...[]byte) []int16 {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 1, 1000
		for i, topic := range []string{"t", "t", "nope", "t"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = []int32{0, 1, 0, 9}[i], records[i]
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		var codes []int16
		for _, rt := range serve(t, h, req).(*kmsg.ProduceResponse).Topics {
			codes = append(codes, rt.Partitions[0].ErrorCode)
		}
		return codes
	}
	good := batchtest.Build(batchtest.Options{})
	before := p.LogEndOffset()
	nl, ut := kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code
	if got, want := produce(good, good, good, good), []int16{0, nl, ut, ut}; !slices.Equal(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if got := p.LogEndOffset(); got != before+1 {
		t.Fatalf("log end offset %d -> %d, want the valid partition appended", before, got)
	}
}

// TestFetchErrors: fetches at a bad offset or epoch, or of a partition not led
// here, get their codes; the partition's other state is still reported.
func TestFetchErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	for _, tc := range []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		epoch     int32
		want      *kerr.Error
	}{
		{"past the log end", "t", 0, 11, -1, kerr.OffsetOutOfRange},
		{"negative offset", "t", 0, -5, -1, kerr.OffsetOutOfRange},
		{"an older leader epoch", "t", 0, 0, 2, kerr.FencedLeaderEpoch},
		{"a newer leader epoch", "t", 0, 0, 4, kerr.UnknownLeaderEpoch},
		{"led elsewhere", "t", 1, 0, -1, kerr.NotLeaderForPartition},
		// The epoch is checked before the role, as Kafka's Partition.getLocalLog.
		{"led elsewhere, a newer leader epoch", "t", 1, 0, 1, kerr.UnknownLeaderEpoch},
		{"unknown topic", "nope", 0, 0, -1, kerr.UnknownTopicOrPartition},
	} {
		req := kmsg.NewPtrFetchRequest()
		// v10: a consumer fetch from a follower is refused; from v11 (KIP-392) a
		// follower serves it (TestPreferredReadReplica).
		req.SetVersion(10)
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = tc.partition, tc.offset, tc.epoch, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: response %+v", tc.name, resp)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want.Code {
			t.Errorf("%s: error %v, want %s", tc.name, kerr.ErrorForCode(got), tc.want.Message)
		}
	}
}

// TestPartitionRequestErrors: ListOffsets, OffsetForLeaderEpoch and
// DeleteRecords on partitions that are unknown, led elsewhere or out of range.
func TestPartitionRequestErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	lo := func(topic string, partition int32, epoch int32) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(7)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	ofe := func(topic string, partition int32) int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, -1, 3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	del := func(topic string, partition int32, offset int64) int16 {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(2)
		req.TimeoutMillis = 1000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"ListOffsets unknown topic", lo("nope", 0, -1), kerr.UnknownTopicOrPartition},
		{"ListOffsets led elsewhere", lo("t", 1, -1), kerr.NotLeaderForPartition},
		{"ListOffsets fenced epoch", lo("t", 0, 1), kerr.FencedLeaderEpoch},
		{"ListOffsets at the current epoch", lo("t", 0, 3), nil},
		{"OffsetForLeaderEpoch unknown topic", ofe("nope", 0), kerr.UnknownTopicOrPartition},
		{"OffsetForLeaderEpoch led elsewhere", ofe("t", 1), kerr.NotLeaderForPartition},
		{"DeleteRecords past the HWM", del("t", 0, 11), kerr.OffsetOutOfRange},
		{"DeleteRecords below -1", del("t", 0, -5), kerr.OffsetOutOfRange},
		{"DeleteRecords of an internal topic", del(OffsetsTopic, 0, 0), kerr.InvalidTopicException},
		{"DeleteRecords of a compacted topic", del("compacted", 0, 0), kerr.PolicyViolation},
		{"DeleteRecords unknown partition", del("t", 9, 0), kerr.UnknownTopicOrPartition},
		{"ListOffsets unknown partition", lo("t", 9, -1), kerr.UnknownTopicOrPartition},
		{"ListOffsets a newer epoch", lo("t", 0, 4), kerr.UnknownLeaderEpoch},
		{"OffsetForLeaderEpoch unknown partition", ofe("t", 9), kerr.UnknownTopicOrPartition},
		{"DeleteRecords led elsewhere", del("t", 1, 0), kerr.NotLeaderForPartition},
		{"DeleteRecords unknown topic", del("nope", 0, 0), kerr.UnknownTopicOrPartition},
	} {
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if tc.got != want {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(tc.got), kerr.ErrorForCode(want))
		}
	}
}

// TestListOffsetsDuplicates: a partition asked for twice in one ListOffsets
// gets INVALID_REQUEST in both entries, as in Kafka; the request's other
// partitions are answered as usual.
func TestListOffsetsDuplicates(t *testing.T) {
	h := newErrorsHandlers(t)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	for _, tp := range []struct {
		topic     string
		partition int32
	}{{"t", 0}, {"t", 1}, {"t", 0}, {"compacted", 0}} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.partition, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	var codes []int16
	var offsets []int64
	for _, rt := range serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics {
		codes = append(codes, rt.Partitions[0].ErrorCode)
		offsets = append(offsets, rt.Partitions[0].Offset)
	}
	inv := kerr.InvalidRequest.Code
	if want := []int16{inv, kerr.NotLeaderForPartition.Code, inv, 0}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	if offsets[3] != 0 {
		t.Fatalf("the compacted partition's latest offset is %d, want 0", offsets[3])
	}
}

// TestListOffsetsSpecialTimestamps: each special timestamp needs the
// ListOffsets version that introduced it (UNSUPPORTED_VERSION before, as in
// Kafka); on a topic that is not tiered, latest tiered (-5) and earliest
// pending upload (-6) answer offset -1 with leader epoch -1 and no error.
func TestListOffsetsSpecialTimestamps(t *testing.T) {
	h := newErrorsHandlers(t)
	lo := func(version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		version int16
		ts      int64
		want    *kerr.Error
	}{
		{6, -3, kerr.UnsupportedVersion}, {7, -3, nil},
		{7, -4, kerr.UnsupportedVersion}, {8, -4, nil},
		{8, -5, kerr.UnsupportedVersion}, {9, -5, nil},
		{10, -6, kerr.UnsupportedVersion}, {11, -6, nil},
		{1, -1, nil}, {1, -2, nil},
		// No special timestamp: UNSUPPORTED_VERSION at every version, as
		// Kafka's isListOffsetsTimestampUnsupported (Strata answered -1).
		{11, -7, kerr.UnsupportedVersion}, {11, -100, kerr.UnsupportedVersion},
	} {
		p := lo(tc.version, tc.ts)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if p.ErrorCode != want {
			t.Errorf("v%d timestamp %d: error %v, want %v", tc.version, tc.ts, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
		}
		if tc.want == nil && (tc.ts == -5 || tc.ts == -6) && (p.Offset != -1 || p.Timestamp != -1 || p.LeaderEpoch != -1) {
			t.Errorf("v%d timestamp %d on a topic that is not tiered: offset %d timestamp %d epoch %d, want -1 -1 -1",
				tc.version, tc.ts, p.Offset, p.Timestamp, p.LeaderEpoch)
		}
	}
}

// TestListOffsetsTimeout checks how long a request's timestamp lookups in the
// object store may take: without TimeoutMillis Kafka 4.4 waits
// remote.list.offsets.request.timeout.ms (30 s) and then answers
// REQUEST_TIMED_OUT; Strata capped each lookup at 5 s and answered
// KAFKA_STORAGE_ERROR. (The handler harness hosts no tiered partition: the
// replica's TestListOffsetRemoteDeadline checks the lookup under a deadline.)
func TestListOffsetsTimeout(t *testing.T) {
	for _, tt := range []struct {
		version int16
		timeout int32
		want    time.Duration
	}{
		{9, 1500, 30 * time.Second},
		{10, 0, 30 * time.Second},
		{10, -1, 30 * time.Second},
		{10, 1500, 1500 * time.Millisecond},
		{11, 60000, time.Minute},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(tt.version)
		req.TimeoutMillis = tt.timeout
		if got := listOffsetsTimeout(req); got != tt.want {
			t.Errorf("v%d TimeoutMillis %d: %v, want %v", tt.version, tt.timeout, got, tt.want)
		}
	}
	if got := errorCode(context.DeadlineExceeded); got != kerr.RequestTimedOut.Code {
		t.Errorf("a passed deadline answers %d, want REQUEST_TIMED_OUT", got)
	}
}

var (
	produceRulesPlainID = metadata.UUID{23}
	produceRulesLATID   = metadata.UUID{24}
)

// newProduceRulesHandlers is broker 1 leading topic "plain" (CreateTime,
// defaults) and topic "lat" (message.timestamp.type LogAppendTime), one
// partition each, ISR of one: the produce rules Kafka's LogValidator applies.
func newProduceRulesHandlers(t *testing.T) (*Handlers, *replica.Manager) {
	t.Helper()
	return newProduceRulesHandlersWith(t, Config{})
}

// newProduceRulesHandlersWith is newProduceRulesHandlers with cfg and extra
// metadata records.
func newProduceRulesHandlersWith(t *testing.T, cfg Config, extra ...metadata.Record) (*Handlers, *replica.Manager) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	img, err := metadata.ApplyAll(metadata.NewImage(), append([]metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "plain", ID: produceRulesPlainID},
		&metadata.PartitionRecord{TopicID: produceRulesPlainID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.TopicRecord{Name: "lat", ID: produceRulesLATID, Configs: map[string]string{"message.timestamp.type": "LogAppendTime"}},
		&metadata.PartitionRecord{TopicID: produceRulesLATID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	}, extra...))
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	cfg.NodeID, cfg.BrokerEpoch = 1, func() int64 { return 1 }
	return New(cfg, fakeCluster{img: img}, m, nil, nil, logger), m
}

// produceOne sends one batch to topic-0 (Produce v9, acks=1) and returns the
// partition's answer.
func produceOne(t *testing.T, h *Handlers, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	cid := "rules"
	r := &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req, ClientID: &cid}
	return serveRequest(t, h, &protocol.ConnInfo{}, r).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// fixCRC recomputes a v2 batch's CRC-32C after a test edited it, so that only
// the edited rule is broken.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// setRecordCount sets numRecords and lastOffsetDelta (count-1) consistently.
func setRecordCount(b []byte, count int32) {
	binary.BigEndian.PutUint32(b[23:], uint32(count-1))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
}

// TestProduceRecordsMustParse: an uncompressed batch whose header is well
// formed and whose CRC matches, but whose records do not match its record
// count or its length, is refused as Kafka refuses it: DefaultRecordBatch's
// record iterator throws InvalidRecordException ("Incorrect declared batch
// size, premature EOF reached" / "Found invalid record structure") while
// LogValidator walks every record, and the partition is answered
// INVALID_RECORD. Nothing is appended. (The record structure rules:
// internal/batch TestValidateRecords.)
func TestProduceRecordsMustParse(t *testing.T) {
	h, m := newProduceRulesHandlers(t)
	one := func() []byte { return batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli()}) }

	fewer := one() // says two records, holds one
	setRecordCount(fewer, 2)
	fixCRC(fewer)

	trailing := append(one(), 0x00, 0x00, 0x00) // three bytes after its only record
	binary.BigEndian.PutUint32(trailing[8:], uint32(len(trailing)-12))
	fixCRC(trailing)

	garbage := one() // the record's length varint points past the batch
	garbage[61] = 0x7e
	fixCRC(garbage)

	for _, tc := range []struct {
		name    string
		records []byte
	}{
		{"record count above the records held", fewer},
		{"bytes left after the last record", trailing},
		{"a record that does not parse", garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := m.Partition("plain", 0)
			if err != nil {
				t.Fatal(err)
			}
			before := p.LogEndOffset()
			sp := produceOne(t, h, "plain", slices.Clone(tc.records))
			if sp.ErrorCode != kerr.InvalidRecord.Code {
				t.Errorf("error %v (offset %d), want INVALID_RECORD as Kafka answers", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
			}
			if after := p.LogEndOffset(); after != before {
				t.Errorf("the log end moved from %d to %d: the batch was appended", before, after)
			}
		})
	}
	if sp := produceOne(t, h, "plain", one()); sp.ErrorCode != 0 {
		t.Errorf("a well-formed batch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestProduceCompressedRecordsMustParse: a compressed batch's records are
// decompressed and walked as Kafka's LogValidator walks them through its
// decompressing record iterator, for every codec: a record count above or
// below the records held, bytes after the last record and a broken record
// (InvalidRecordException) are answered INVALID_RECORD; records that do not
// decompress (a KafkaException from the codec's stream) UNKNOWN_SERVER_ERROR.
// Nothing is appended. (The same cases per codec at the batch level:
// internal/batch TestValidateCompressedRecords.)
func TestProduceCompressedRecordsMustParse(t *testing.T) {
	h, m := newProduceRulesHandlers(t)
	p, err := m.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: []batchtest.Record{
		{Key: []byte("k"), Value: []byte("v")}, {Value: bytes.Repeat([]byte("value "), 100)}, {Key: []byte("k2"), TimestampDelta: 1},
	}})
	body := plain[61:]
	// attributes, ts 0, offset 0, key null, value null, header count -1
	broken := []byte{0x0c, 0, 0, 0, 0x01, 0x01, 0x01}
	for _, codec := range []int8{1, 2, 3, 4} {
		zip := func(b []byte) []byte { return batchtest.Compress(codec, b) }
		for _, tc := range []struct {
			name    string
			records []byte
			want    *kerr.Error
		}{
			{"record count above the records held", batchtest.WithRecords(plain, codec, zip(body), 4), kerr.InvalidRecord},
			{"record count below the records held", batchtest.WithRecords(plain, codec, zip(body), 2), kerr.InvalidRecord},
			{"bytes left after the last record", batchtest.WithRecords(plain, codec, zip(append(slices.Clone(body), 0, 0, 0)), 3), kerr.InvalidRecord},
			{"a broken record", batchtest.WithRecords(plain, codec, zip(broken), 1), kerr.InvalidRecord},
			{"records that do not decompress", batchtest.WithRecords(plain, codec, []byte("plain text, no codec's output"), 3), kerr.UnknownServerError},
		} {
			t.Run(fmt.Sprintf("codec=%d/%s", codec, tc.name), func(t *testing.T) {
				before := p.LogEndOffset()
				sp := produceOne(t, h, "plain", tc.records)
				if sp.ErrorCode != tc.want.Code {
					t.Errorf("error %v (offset %d), want %v as Kafka answers", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, tc.want)
				}
				if after := p.LogEndOffset(); after != before {
					t.Errorf("the log end moved from %d to %d: the batch was appended", before, after)
				}
			})
		}
		if sp := produceOne(t, h, "plain", batchtest.WithRecords(plain, codec, zip(body), 3)); sp.ErrorCode != 0 {
			t.Errorf("codec %d: a well-formed batch: %v", codec, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
}

// TestProduceDecompressionBomb: a small compressed batch whose records
// inflate past the limit on a batch's decompressed records (64 MiB here: 128
// gzip members of 1 MiB of zeros, 130 KB compressed) is answered
// INVALID_RECORD, the message naming the limit, and nothing is appended.
// (Every codec, and the memory it takes: internal/batch
// TestDecompressionBomb.)
func TestProduceDecompressionBomb(t *testing.T) {
	h, m := newProduceRulesHandlers(t)
	p, err := m.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli()})
	bomb := bytes.Repeat(batchtest.Compress(1, make([]byte, 1<<20)), 128)
	sp := produceOne(t, h, "plain", batchtest.WithRecords(plain, 1, bomb, 1))
	limit := strconv.Itoa(batch.MinDecompressedLimit)
	var msg string
	if sp.ErrorMessage != nil {
		msg = *sp.ErrorMessage
	}
	if sp.ErrorCode != kerr.InvalidRecord.Code || !strings.Contains(msg, limit) {
		t.Errorf("error %v (%q), want INVALID_RECORD naming the limit %s", kerr.ErrorForCode(sp.ErrorCode), msg, limit)
	}
	if p.LogEndOffset() != 0 {
		t.Errorf("the batch was appended (log end %d)", p.LogEndOffset())
	}
}

// TestProduceLogAppendTimeFromClient: a client may not set the LogAppendTime
// bit, on a LogAppendTime topic as on a CreateTime one. Kafka's
// LogValidator.validateTimestamp answers such a batch INVALID_TIMESTAMP
// ("Invalid timestamp type in message ... Producer should not set timestamp
// type to LogAppendTime."), with a record error; nothing is appended.
func TestProduceLogAppendTimeFromClient(t *testing.T) {
	h, m := newProduceRulesHandlers(t)
	for _, topic := range []string{"lat", "plain"} {
		p, err := m.Partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Attributes: 0x08})
		sp := produceOne(t, h, topic, b)
		if sp.ErrorCode != kerr.InvalidTimestamp.Code {
			t.Errorf("%s: error %v (offset %d), want INVALID_TIMESTAMP as Kafka answers", topic, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
		if len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].ErrorMessage == nil {
			t.Errorf("%s: record errors %+v, want the batch's first record named", topic, sp.ErrorRecords)
		}
		if p.LogEndOffset() != 0 {
			t.Errorf("%s: the batch was appended (log end %d)", topic, p.LogEndOffset())
		}
	}
}

// TestProduceIdempotentNegativeSequence: a batch with a producer id and a
// negative base sequence is refused as Kafka's LogValidator.validateBatch
// refuses a client's ("Invalid sequence number -1 in record batch with
// producerId 7"): INVALID_RECORD, nothing appended. A coordinator's own
// transactional batches, which carry sequence -1, are appended by
// replica.Partition.AppendAsCoordinator and not checked so
// (internal/replica TestCoordinatorAppendVerified).
func TestProduceIdempotentNegativeSequence(t *testing.T) {
	h, m := newProduceRulesHandlers(t)
	p, err := m.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int32{-1, -7} {
		b := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Idempotent: true, ProducerID: 7, BaseSequence: seq})
		sp := produceOne(t, h, "plain", b)
		if sp.ErrorCode != kerr.InvalidRecord.Code {
			t.Errorf("sequence %d: error %v (offset %d), want INVALID_RECORD as Kafka answers", seq, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
	if p.LogEndOffset() != 0 {
		t.Errorf("a batch was appended (log end %d)", p.LogEndOffset())
	}
	b := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Idempotent: true, ProducerID: 7, BaseSequence: 0})
	if sp := produceOne(t, h, "plain", b); sp.ErrorCode != 0 {
		t.Errorf("sequence 0: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestListOffsetsOffsetNotAvailableByVersion: while a leader's high-water
// mark is below the start of its epoch, "latest" is OFFSET_NOT_AVAILABLE from
// ListOffsets v5 on and LEADER_NOT_AVAILABLE before, as Kafka's
// ReplicaManager.fetchOffset answers (OFFSET_NOT_AVAILABLE came with v5; an
// older client does not know it). Strata answered OFFSET_NOT_AVAILABLE at
// every version.
func TestListOffsetsOffsetNotAvailableByVersion(t *testing.T) {
	h := newErrorsHandlers(t)
	// Partition 3 is led here with broker 2, which never fetches, in its ISR:
	// records appended stay above the HWM (0). A new leader epoch then begins
	// at their end, above the HWM.
	p, err := h.replicas.Partition("t", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(4, 8)}), 1); err != nil {
		t.Fatal(err)
	}
	img, err := metadata.ApplyAll(h.cluster.Image(), []metadata.Record{
		&metadata.PartitionChangeRecord{TopicID: errTopicID, Partition: 3, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.replicas.Apply(img.WithOffset(2)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version int16
		want    *kerr.Error
	}{{1, kerr.LeaderNotAvailable}, {4, kerr.LeaderNotAvailable}, {5, kerr.OffsetNotAvailable}, {9, kerr.OffsetNotAvailable}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(tc.version)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 3, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		sp := serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != tc.want.Code || sp.Offset != -1 {
			t.Errorf("v%d: %v offset %d, want %s offset -1", tc.version, kerr.ErrorForCode(sp.ErrorCode), sp.Offset, tc.want.Message)
		}
	}
}
