package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIncrementalFetchSession drives a fetch session (KIP-227) over the wire: a
// full fetch opens it, an incremental fetch with nothing new answers no
// partitions, and after a produce only the partition written to comes back, with
// its records; a franz-go consumer, which uses sessions, then reads all 32
// partitions through one.
func TestIncrementalFetchSession(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const topic, parts = "sessions", 32
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	fetch := func(id, epoch int32, offsets map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 10
		req.SessionID, req.SessionEpoch = id, epoch
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, o := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, o, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			req.Topics = append(req.Topics, rt)
		}
		resp := rawRequest(t, n.KafkaAddr(), req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch session %d epoch %d: error %d", id, epoch, resp.ErrorCode)
		}
		return resp
	}
	all := map[int32]int64{}
	for p := range int32(parts) {
		all[p] = 0
	}
	resp := fetch(0, 0, all)
	if resp.SessionID == 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
		t.Fatalf("full fetch: session %d, topics %+v", resp.SessionID, resp.Topics)
	}
	id := resp.SessionID
	if resp := fetch(id, 1, nil); len(resp.Topics) != 0 || resp.SessionID != id {
		t.Fatalf("incremental fetch with nothing new: session %d, %d topics", resp.SessionID, len(resp.Topics))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 7, Value: []byte("news")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp = fetch(id, 2, nil)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("after a produce to partition 7: %+v", resp.Topics)
	}
	if p := resp.Topics[0].Partitions[0]; p.Partition != 7 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("after a produce to partition 7: partition %d, high-water mark %d, %d record bytes", p.Partition, p.HighWatermark, len(p.RecordBatches))
	}

	// A franz-go consumer of every partition (fetch sessions on by default).
	var recs []*kgo.Record
	for p := range int32(parts) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, n.KafkaAddr(), topic, parts+1); len(got) != parts+1 {
		t.Fatalf("franz-go read %d records, want %d", len(got), parts+1)
	}
}

// TestNoFetchSessionSlots: with --max-incremental-fetch-session-cache-slots=0 a
// full fetch opens no session (session id 0, every partition answered), and a
// franz-go consumer, which then keeps sending full fetches, reads everything.
func TestNoFetchSessionSlots(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.MaxIncrementalFetchSessionCacheSlots = 0
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const topic, parts = "no-sessions", 4
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(parts) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 10
	req.SessionID, req.SessionEpoch = 0, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(parts) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := rawRequest(t, n.KafkaAddr(), req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
		t.Fatalf("full fetch: error %d, session %d, topics %+v", resp.ErrorCode, resp.SessionID, resp.Topics)
	}
	if got := consumeAll(t, n.KafkaAddr(), topic, parts); len(got) != parts {
		t.Fatalf("franz-go read %d records, want %d", len(got), parts)
	}
}
