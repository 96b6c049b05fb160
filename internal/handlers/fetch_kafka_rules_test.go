package handlers

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

var rulesTopicID = metadata.UUID{21}

// fetchRulesHandlers is broker 1 leading topic "rv" (partitions partitions, a
// replica set of one, leader epoch epoch), each partition holding batches
// batches of ten 100-byte records.
func fetchRulesHandlers(t *testing.T, partitions, batches int, epoch int32) (*replica.Manager, *Handlers, *metadata.Image) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	recs := []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "rv", ID: rulesTopicID},
	}
	for i := range int32(partitions) {
		recs = append(recs, &metadata.PartitionRecord{TopicID: rulesTopicID, Partition: i, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	for i := range int32(partitions) {
		p, err := m.Partition("rv", i)
		if err != nil {
			t.Fatal(err)
		}
		for range batches {
			if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 100)}), 1); err != nil {
				t.Fatal(err)
			}
		}
		want := int64(10 * batches)
		wait.Within(t, 10*time.Second, "the HWM to reach the log end", func() bool { return p.HighWatermark() >= want })
	}
	return m, New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, FetchSessionCacheSlots: 10}, fakeCluster{img: img}, m, nil, nil, logger), img
}

// fetchRequest is a consumer Fetch of version v naming "rv"'s partitions at offsets.
func fetchRequest(v int16, maxBytes int32, offsets ...int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
	if v >= 15 {
		req.ReplicaState.ID = -1
	}
	rt := kmsg.NewFetchRequestTopic()
	if v >= 13 {
		rt.TopicID = rulesTopicID
	} else {
		rt.Topic = "rv"
	}
	for i, o := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(i), o, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// batchesIn counts the record batches and records in b.
func batchesIn(b []byte) (batches, records int) {
	for len(b) >= 61 {
		n := int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11]))) + 12
		if n > len(b) {
			break
		}
		batches++
		records += int(int32(uint32(b[57])<<24 | uint32(b[58])<<16 | uint32(b[59])<<8 | uint32(b[60])))
		b = b[n:]
	}
	return
}

// reelect moves "rv"'s leadership, still on broker 1, to leader epoch epoch
// and returns handlers serving the new image.
func reelect(t *testing.T, m *replica.Manager, img *metadata.Image, partitions int, epoch int32) *Handlers {
	t.Helper()
	var recs []metadata.Record
	for i := range int32(partitions) {
		recs = append(recs, &metadata.PartitionChangeRecord{TopicID: rulesTopicID, Partition: i, BasePartitionEpoch: 0, Leader: 1, LeaderEpoch: epoch, ISR: []int32{1}})
	}
	img, err := metadata.ApplyAll(img, recs)
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(2)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("rv", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.LeaderEpoch() != epoch {
		t.Fatalf("leader epoch %d after the re-election, want %d", p.LeaderEpoch(), epoch)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, FetchSessionCacheSlots: 10}, fakeCluster{img: img}, m, nil, nil, logger)
}

// TestFetchMaxBytesZero: a Fetch (v3+) whose response MaxBytes is 0 is
// answered the first batch of the first partition with data and nothing
// more, the one batch that may always exceed the limit, as Kafka answers it.
// Strata used to read 0 as no limit and answer every partition's batches.
func TestFetchMaxBytesZero(t *testing.T) {
	_, h, _ := fetchRulesHandlers(t, 2, 3, 0)
	resp := serve(t, h, fetchRequest(12, 0, 0, 0)).(*kmsg.FetchResponse)
	var batches int
	for _, p := range resp.Topics[0].Partitions {
		b, _ := batchesIn(p.RecordBatches)
		batches += b
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}
	if batches != 1 {
		t.Fatalf("Fetch with MaxBytes 0 answered %d batches (of 6 on two partitions), want 1: only the first batch may exceed the response limit", batches)
	}
}

// TestConsumerFetchDivergingEpoch: a consumer's Fetch v12+ whose
// LastFetchedEpoch (KIP-320; franz-go validates positions this way) ended on
// the leader before the fetch offset is answered the diverging epoch and no
// records, as Kafka checks every reader's epoch: here epoch 1 is unknown, the
// largest below it, 0, ends at 30, so DivergingEpoch {0, 30}. Strata used to
// check followers only and hand the consumer the records.
func TestConsumerFetchDivergingEpoch(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 3, 0) // offsets 0-29 written in epoch 0
	h := reelect(t, m, img, 1, 3)
	req := fetchRequest(12, 1<<20, 20)
	rp := &req.Topics[0].Partitions[0]
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 3, 1
	resp := serve(t, h, req).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	_, records := batchesIn(p.RecordBatches)
	if p.DivergingEpoch.Epoch != 0 || p.DivergingEpoch.EndOffset != 30 || records != 0 {
		t.Fatalf("consumer fetch at 20 with LastFetchedEpoch 1: error %d, diverging epoch {%d, %d}, %d records; want diverging epoch {0, 30} and no records, as Kafka answers",
			p.ErrorCode, p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset, records)
	}
}

// listOffsetsAt asks "rv" partition 0 for timestamp ts (ListOffsets v7).
func listOffsetsAt(t *testing.T, h *Handlers, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "rv"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// TestListOffsetsLeaderEpochOfRecord: ListOffsets answers a timestamp lookup
// and earliest with the leader epoch that wrote the offset, as Kafka does.
// Every record here was written in epoch 0 and the partition is now led in
// epoch 3; Strata used to answer 3, so a consumer that seeked there validated
// its position (OffsetsForLeaderEpoch) against an epoch that never wrote it.
func TestListOffsetsLeaderEpochOfRecord(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 3, 0)
	h := reelect(t, m, img, 1, 3)
	for _, tc := range []struct {
		name string
		ts   int64
	}{{"timestamp 0 (the first record)", 0}, {"earliest", -2}} {
		p := listOffsetsAt(t, h, tc.ts)
		if p.ErrorCode != 0 || p.Offset != 0 {
			t.Fatalf("%s: error %d offset %d", tc.name, p.ErrorCode, p.Offset)
		}
		if p.LeaderEpoch != 0 {
			t.Errorf("%s: offset 0, written in epoch 0, answered with leader epoch %d; Kafka answers 0", tc.name, p.LeaderEpoch)
		}
	}
}

// firstOffsetOf is the base offset of the first batch in b, or -1.
func firstOffsetOf(b []byte) int64 {
	if len(b) < 61 {
		return -1
	}
	var o int64
	for i := range 8 {
		o = o<<8 | int64(b[i])
	}
	return o
}

// TestFetchSessionClientWalk drives one incremental session as a client
// does, over six partitions with a response limit that fits two, with
// appends along the way: every partition's records come once each, in
// order, and all of them.
func TestFetchSessionClientWalk(t *testing.T) {
	const parts = 6
	m, h, _ := fetchRulesHandlers(t, parts, 4, 0)
	pos := make([]int64, parts)
	sent := make([]int64, parts) // what the session holds
	var id, epoch int32
	full := true
	for round := range 60 {
		if round == 10 || round == 25 {
			for i := range int32(parts) {
				p, _ := m.Partition("rv", i)
				if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 100)}), 1); err != nil {
					t.Fatal(err)
				}
			}
			for i := range int32(parts) {
				p, _ := m.Partition("rv", i)
				want := p.LogEndOffset()
				wait.Within(t, 10*time.Second, "the HWM", func() bool { return p.HighWatermark() >= want })
			}
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes = -1, 2500
		req.SessionID, req.SessionEpoch = id, epoch
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "rv"
		for i := range parts {
			if full || pos[i] != sent[i] {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(i), pos[i], 1200
				rt.Partitions = append(rt.Partitions, rp)
				sent[i] = pos[i]
			}
		}
		if len(rt.Partitions) > 0 {
			req.Topics = append(req.Topics, rt)
		}
		resp := serve(t, h, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("round %d: error %d", round, resp.ErrorCode)
		}
		if full {
			id, epoch, full = resp.SessionID, 1, false
		} else {
			epoch++
		}
		var got []string
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("round %d: partition %d error %d", round, p.Partition, p.ErrorCode)
				}
				if len(p.RecordBatches) == 0 {
					continue
				}
				first := firstOffsetOf(p.RecordBatches)
				_, n := batchesIn(p.RecordBatches)
				if first != pos[p.Partition] {
					t.Fatalf("round %d: partition %d answered from %d, position %d", round, p.Partition, first, pos[p.Partition])
				}
				pos[p.Partition] += int64(n)
				got = append(got, fmt.Sprintf("p%d:%d+%d", p.Partition, first, n))
			}
		}
		t.Logf("round %d: %v %v", round, got, partitionsOf(resp))
	}
	for i, p := range pos {
		if p != 60 {
			t.Errorf("partition %d at %d, want 60", i, p)
		}
	}
}

// TestFetchErrorAnswersAtOnce: a long-polling Fetch (MinBytes 1, MaxWait 30 s)
// one of whose partitions fails to read (here OFFSET_OUT_OF_RANGE, the fetch
// offset past the log end) is answered at once, as Kafka answers when reading
// any partition gave an error, so the consumer resets its position right away.
// Strata used to answer only when MaxWait had passed.
func TestFetchErrorAnswersAtOnce(t *testing.T) {
	_, h, _ := fetchRulesHandlers(t, 1, 3, 0)
	req := fetchRequest(12, 1<<20, 1000)
	req.MinBytes, req.MaxWaitMillis = 1, 30000
	start := time.Now()
	resp := serve(t, h, req).(*kmsg.FetchResponse)
	took := time.Since(start)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("error code %d, want OFFSET_OUT_OF_RANGE", code)
	}
	if took > 10*time.Second {
		t.Errorf("OFFSET_OUT_OF_RANGE answered after %v, want at once (Kafka answers a fetch with a partition error without waiting for MaxWait)", took.Round(time.Millisecond))
	}
}

// TestFollowerDivergingEpochAnswersAtOnce: a follower's long-polling fetch
// whose LastFetchedEpoch diverges from the leader's log is answered at once,
// as Kafka does, so the follower truncates now; Strata used to wait for an
// append, up to MaxWait, before telling it.
func TestFollowerDivergingEpochAnswersAtOnce(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 3, 0) // offsets 0-29 in epoch 0
	h := reelect(t, m, img, 1, 3)
	req := fetchRequest(12, 1<<20, 20)
	req.ReplicaID = 2
	req.MinBytes, req.MaxWaitMillis = 1, 30000
	rp := &req.Topics[0].Partitions[0]
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 3, 1
	start := time.Now()
	resp := serve(t, h, req).(*kmsg.FetchResponse)
	took := time.Since(start)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != 0 || p.DivergingEpoch.EndOffset != 30 {
		t.Fatalf("follower fetch: error %d, diverging epoch {%d, %d}, want {0, 30}", p.ErrorCode, p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset)
	}
	if took > 10*time.Second {
		t.Fatalf("diverging epoch answered after %v, want at once (Kafka does not hold a fetch that found a diverging epoch for MaxWait)", took.Round(time.Millisecond))
	}
}

// TestThrottledFetchIsEmpty: a consumer over its consumer_byte_rate gets, as
// Kafka answers it (KafkaApis.handleFetchRequest: "If throttling is
// required, return an empty response", fetchContext.getThrottledResponse,
// after unrecording the response's bytes), an empty Fetch response with
// throttle_time_ms set, the connection muted; the bytes it read are not
// counted against the quota, and the records are served by a fetch after
// the throttle. A fetch that opens a session is answered without one and
// opens none, as Kafka opens a session only with a full answer. Followers'
// fetches are not consumer bytes and never throttled so.
func TestThrottledFetchIsEmpty(t *testing.T) {
	clients := metadata.QuotaEntity{ClientID: metadata.QuotaName{Set: true, Default: true}}
	quotas := quota.New(nil)
	h, m := newProduceRulesHandlersWith(t, Config{Quotas: quotas, FetchSessionCacheSlots: 10},
		&metadata.ClientQuotaRecord{Entity: clients, Key: metadata.QuotaConsumerByteRate, Value: 1})
	p, err := m.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(10, 100)}), 1); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 10*time.Second, "the HWM to reach 10", func() bool { return p.HighWatermark() >= 10 })

	for _, sessionEpoch := range []int32{-1, 0} {
		conn := &protocol.ConnInfo{}
		resp := fetchPlain(t, h, conn, sessionEpoch)
		if resp.ThrottleMillis <= 0 {
			t.Fatalf("session epoch %d: throttle_time_ms %d: a fetch of 1 KiB at 1 B/s was not throttled", sessionEpoch, resp.ThrottleMillis)
		}
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				if len(sp.RecordBatches) > 0 {
					t.Errorf("session epoch %d: throttled (%d ms) fetch answered %d record bytes of %s-%d; Kafka answers a throttled fetch empty",
						sessionEpoch, resp.ThrottleMillis, len(sp.RecordBatches), st.Topic, sp.Partition)
				}
			}
		}
		if resp.SessionID != 0 || h.sessions.len() != 0 {
			t.Errorf("session epoch %d: answered session %d, %d sessions cached; a throttled fetch opens none", sessionEpoch, resp.SessionID, h.sessions.len())
		}
		// The bytes read were taken back: recording nothing more finds the
		// client within its quota.
		if d := quotas.Record(h.cluster.Image(), quota.UserOf(conn.Principal()), conn.ClientID(), metadata.QuotaConsumerByteRate, 0); d != 0 {
			t.Errorf("session epoch %d: the throttled fetch's bytes still count (throttle %v)", sessionEpoch, d)
		}
	}
}

// TestFetchCappedToQuotaWindow: a consumer's fetch reads at most the bytes its
// consumer_byte_rate lets it fetch at once without a throttle (the rate times
// the quota's window less one sample: 10 s), as Kafka caps it
// (ClientQuotaManager.maxValueInQuotaWindow): a larger answer would be
// throttled, and so empty, every time.
func TestFetchCappedToQuotaWindow(t *testing.T) {
	clients := metadata.QuotaEntity{ClientID: metadata.QuotaName{Set: true, Default: true}}
	h, m := newProduceRulesHandlersWith(t, Config{Quotas: quota.New(nil)},
		&metadata.ClientQuotaRecord{Entity: clients, Key: metadata.QuotaConsumerByteRate, Value: 100})
	p, err := m.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 { // about 170 bytes each, 1.7 KB in all: over 100 B/s x 10 s
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(1, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, 10*time.Second, "the HWM to reach 10", func() bool { return p.HighWatermark() >= 10 })
	resp := fetchPlain(t, h, &protocol.ConnInfo{}, -1)
	n := 0
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			n += len(sp.RecordBatches)
		}
	}
	if resp.ThrottleMillis != 0 || n == 0 || n > 1000 {
		t.Fatalf("throttle %d ms, %d record bytes; want records within 1,000 bytes and no throttle", resp.ThrottleMillis, n)
	}
}

// fetchPlain is a consumer's Fetch v12 of "plain" partition 0 at offset 0,
// 1 MiB at most, in session epoch sessionEpoch, from client id "rules" on conn.
func fetchPlain(t *testing.T, h *Handlers, conn *protocol.ConnInfo, sessionEpoch int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, sessionEpoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "plain"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 0, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	cid := "rules"
	r := &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req, ClientID: &cid}
	return serveRequest(t, h, conn, r).(*kmsg.FetchResponse)
}

// TestFetchInconsistentTopicID: while this broker still hosts the log of a
// deleted "rv" and its image already holds "rv" recreated under a new id, a
// Fetch v13+ by the new id is answered INCONSISTENT_TOPIC_ID, not the old
// topic's records, as Kafka's ReplicaManager checks the log's topic id.
// Strata used to find the log by name and serve it.
func TestFetchInconsistentTopicID(t *testing.T) {
	m, _, _ := fetchRulesHandlers(t, 1, 3, 0) // the old "rv", rulesTopicID, hosted here
	newID := metadata.UUID{22}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "rv", ID: newID},
		&metadata.PartitionRecord{TopicID: newID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, fakeCluster{img: img.WithOffset(2)}, m, nil, nil, logger)
	for _, replicaID := range []int32{-1, 2} {
		req := fetchRequest(13, 1<<20, 0)
		req.ReplicaID = replicaID
		req.Topics[0].TopicID = newID
		resp := serve(t, h, req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if _, records := batchesIn(p.RecordBatches); p.ErrorCode != kerr.InconsistentTopicID.Code || records != 0 {
			t.Errorf("replica %d: Fetch v13 by the new topic id: error %d, %d records of the deleted topic; want INCONSISTENT_TOPIC_ID and none",
				replicaID, p.ErrorCode, records)
		}
	}
}

// movingCluster is fakeCluster whose image a test replaces.
type movingCluster struct {
	fakeCluster
	cur *metadata.Image
}

func (c *movingCluster) Image() *metadata.Image { return c.cur }

// TestFetchSessionTopicRecreated: a partition keeps in its session the topic
// name its id had when it joined (Kafka's CachedPartition). Once "rv" is
// deleted and recreated under a new id, each fetch of a session opened
// before answers the partition INCONSISTENT_TOPIC_ID (the log under that name
// is another topic's: franz-go resets its session on it); a deleted topic's
// partition is UNKNOWN_TOPIC_OR_PARTITION; a full fetch by the old id,
// without a session's name, UNKNOWN_TOPIC_ID. Strata used to answer the
// session's partition UNKNOWN_TOPIC_ID, on which franz-go keeps its session
// and the recreated topic is never fetched.
func TestFetchSessionTopicRecreated(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 1, 0)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &movingCluster{fakeCluster{img: img}, img}
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, FetchSessionCacheSlots: 10}, c, m, nil, nil, logger)
	req := fetchRequest(13, 1<<20, 10)
	req.SessionEpoch = 0
	resp := serve(t, h, req).(*kmsg.FetchResponse)
	if resp.SessionID == 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("full fetch: session %d, error %d", resp.SessionID, resp.Topics[0].Partitions[0].ErrorCode)
	}
	id := resp.SessionID
	incremental := func(epoch int32) int16 {
		t.Helper()
		req := fetchRequest(13, 1<<20)
		req.Topics = nil
		req.SessionID, req.SessionEpoch = id, epoch
		resp := serve(t, h, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("incremental fetch %d: error %d, topics %+v", epoch, resp.ErrorCode, resp.Topics)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	// Deleted: the name is unknown.
	deleted, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.cur = deleted.WithOffset(2)
	if got := incremental(1); got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("topic deleted: session partition error %d, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}

	// Recreated under a new id, its new log hosted here.
	newID := metadata.UUID{22}
	recreated, err := metadata.ApplyAll(deleted, []metadata.Record{
		&metadata.TopicRecord{Name: "rv", ID: newID},
		&metadata.PartitionRecord{TopicID: newID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	recreated = recreated.WithOffset(3)
	if err := m.Apply(recreated); err != nil {
		t.Fatal(err)
	}
	c.cur = recreated
	if got := incremental(2); got != kerr.InconsistentTopicID.Code {
		t.Errorf("topic recreated: session partition error %d, want INCONSISTENT_TOPIC_ID", got)
	}
	resp = serve(t, h, fetchRequest(13, 1<<20, 0)).(*kmsg.FetchResponse)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicID.Code {
		t.Errorf("topic recreated: full fetch by the old id: error %d, want UNKNOWN_TOPIC_ID", got)
	}
}

// followerFetch is a follower's Fetch of version v by replica 2 of "rv"
// partition 0 and of a topic this broker does not know, in session id at
// epoch epoch.
func followerFetch(v int16, id, epoch int32) *kmsg.FetchRequest {
	req := fetchRequest(v, 1<<20, 0)
	if v >= 15 {
		req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = -1, 2, 1
	} else {
		req.ReplicaID = 2
	}
	req.SessionID, req.SessionEpoch = id, epoch
	unknown := kmsg.NewFetchRequestTopic()
	unknown.Topic, unknown.TopicID = "nope", metadata.UUID{99}
	if v >= 13 {
		unknown.Topic = ""
	}
	unknown.Partitions = append(unknown.Partitions, req.Topics[0].Partitions[0])
	req.Topics = append(req.Topics, unknown)
	return req
}

// TestFollowerFetchWithoutClusterAction: a follower's fetch (replica id in
// the header before v15, in ReplicaState from v15) without CLUSTER_ACTION on
// the cluster is answered TOPIC_AUTHORIZATION_FAILED on each partition it
// names, known or not, as Kafka's handleFetchRequest answers it; Strata used
// to answer a top-level CLUSTER_AUTHORIZATION_FAILED. A full fetch so refused
// opens no session (Kafka opens one: here a client without the right cannot
// take the cache's slots, a follower's of which may evict consumers'); one
// that names a session closes it, and a session opened before the right was
// taken away goes on answering the error in each incremental fetch.
func TestFollowerFetchWithoutClusterAction(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 1, 0)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	clusterAction := allowAnonymous(kmsg.ACLOperationClusterAction, resCluster, "kafka-cluster")
	readOnly := allowAnonymous(kmsg.ACLOperationRead, resTopic, "rv")
	for _, v := range []int16{12, 15} {
		authorizer := clusterAction
		h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, FetchSessionCacheSlots: 10,
			Authorizer: func() *acl.Authorizer { return authorizer() }}, fakeCluster{img: img}, m, nil, nil, logger)
		refused := func(what string, resp *kmsg.FetchResponse) {
			t.Helper()
			if resp.ErrorCode != 0 {
				t.Errorf("v%d %s: top-level error %v, want none", v, what, kerr.ErrorForCode(resp.ErrorCode))
			}
			var n int
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					n++
					if rp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
						t.Errorf("v%d %s: partition %q %x/%d: %v, want TOPIC_AUTHORIZATION_FAILED", v, what, rt.Topic, rt.TopicID, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			}
			if n != 2 {
				t.Errorf("v%d %s: %d partitions answered, want 2", v, what, n)
			}
		}

		// A session opened with the right, then the right taken away.
		opened := serve(t, h, followerFetch(v, 0, 0)).(*kmsg.FetchResponse)
		if opened.SessionID == 0 {
			t.Fatalf("v%d: a follower's full fetch with CLUSTER_ACTION opened no session", v)
		}
		authorizer = readOnly
		resp := serve(t, h, followerFetch(v, opened.SessionID, 1)).(*kmsg.FetchResponse)
		refused("incremental fetch", resp)
		if resp.SessionID != opened.SessionID {
			t.Errorf("v%d incremental fetch: session %d, want %d", v, resp.SessionID, opened.SessionID)
		}

		// A full fetch naming the session closes it and opens none.
		resp = serve(t, h, followerFetch(v, opened.SessionID, 0)).(*kmsg.FetchResponse)
		refused("full fetch", resp)
		if resp.SessionID != 0 || h.sessions.len() != 0 {
			t.Errorf("v%d full fetch: session %d, %d sessions cached; want none", v, resp.SessionID, h.sessions.len())
		}
	}
}

// TestFetchSessionKeepsLateTopicName: a partition that joins a session while
// its topic id is unknown here takes the topic's name once an incremental
// fetch finds it, and keeps it from then on, as Kafka's CachedPartition does
// (maybeResolveUnknownName): once "rv" is deleted the partition is
// UNKNOWN_TOPIC_OR_PARTITION, once recreated under a new id
// INCONSISTENT_TOPIC_ID (on which franz-go resets its session). Strata used to
// look the name up by id in each fetch and answer UNKNOWN_TOPIC_ID after the
// deletion, on which franz-go keeps its session and never fetches the new
// topic.
func TestFetchSessionKeepsLateTopicName(t *testing.T) {
	m, _, img := fetchRulesHandlers(t, 1, 1, 0)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	deleted, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &movingCluster{fakeCluster{img: img}, deleted.WithOffset(1)} // "rv" not known yet
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, FetchSessionCacheSlots: 10}, c, m, nil, nil, logger)
	req := fetchRequest(13, 1<<20, 0)
	req.SessionEpoch = 0
	resp := serve(t, h, req).(*kmsg.FetchResponse)
	if resp.SessionID == 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("full fetch of an unknown id: session %d, error %d; want a session and UNKNOWN_TOPIC_ID", resp.SessionID, resp.Topics[0].Partitions[0].ErrorCode)
	}
	id := resp.SessionID
	incremental := func(epoch int32) int16 {
		t.Helper()
		req := fetchRequest(13, 1<<20)
		req.Topics = nil
		req.SessionID, req.SessionEpoch = id, epoch
		resp := serve(t, h, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("incremental fetch %d: error %d, topics %+v", epoch, resp.ErrorCode, resp.Topics)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	c.cur = img.WithOffset(2) // "rv" known: the partition takes its name
	if got := incremental(1); got != 0 {
		t.Fatalf("topic known: session partition error %d, want none", got)
	}
	c.cur = deleted.WithOffset(3)
	if got := incremental(2); got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("topic deleted: session partition error %d, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	newID := metadata.UUID{22}
	recreated, err := metadata.ApplyAll(deleted, []metadata.Record{
		&metadata.TopicRecord{Name: "rv", ID: newID},
		&metadata.PartitionRecord{TopicID: newID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	recreated = recreated.WithOffset(4)
	if err := m.Apply(recreated); err != nil {
		t.Fatal(err)
	}
	c.cur = recreated
	if got := incremental(3); got != kerr.InconsistentTopicID.Code {
		t.Errorf("topic recreated: session partition error %d, want INCONSISTENT_TOPIC_ID", got)
	}
}
