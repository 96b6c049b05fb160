package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/wait"
)

// alterShareOffsets sets group's start offset of partition 0 of topic, asking
// again while the group's coordinator is not ready (a node just started, on a
// loaded machine, may not have loaded __consumer_offsets yet).
func alterShareOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, start int64) {
	t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rp.StartOffset = start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var (
		resp *kmsg.AlterShareGroupOffsetsResponse
		err  error
	)
	wait.For(t, "the group coordinator to answer AlterShareGroupOffsets", func() bool {
		resp, err = req.RequestWith(ctx, cl)
		return err != nil || !slices.Contains([]int16{kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code}, resp.ErrorCode)
	})
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AlterShareGroupOffsets to %d: %v %+v", start, err, resp)
	}
}

// TestShareOffsetsWithSASL: with SASL on the Kafka listener, the share-group
// offset APIs read and scan the share-partition state through the node's own
// listener with its inter-broker credentials. Before, those reading clients
// logged in with nothing, were refused, and DescribeShareGroupOffsets and
// DeleteShareGroupOffsets hung until the client gave up.
func TestShareOffsetsWithSASL(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-512"
	cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]"}
	cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := n.client(t, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	const topic, group = "sasl-share", "sasl-share-group"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()

	alterShareOffsets(rctx, t, cl, group, topic, 3)

	describe := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = group
	describe.Groups = append(describe.Groups, dg) // every partition with state
	dresp, err := describe.RequestWith(rctx, cl)
	if err != nil || len(dresp.Groups) != 1 || dresp.Groups[0].ErrorCode != 0 || len(dresp.Groups[0].Topics) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, dresp)
	}
	if p := dresp.Groups[0].Topics[0].Partitions[0]; p.StartOffset != 3 {
		t.Fatalf("start offset %d, want 3", p.StartOffset)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = group
	dt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	dt.Topic = topic
	del.Topics = append(del.Topics, dt)
	delResp, err := del.RequestWith(rctx, cl)
	if err != nil || delResp.ErrorCode != 0 || len(delResp.Topics) != 1 || delResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v %+v", err, delResp)
	}
}

// TestShareOffsetsReadSummary: DescribeShareGroupOffsets reads the share
// coordinator's summary (ReadShareGroupStateSummary, as Kafka 4.4's group
// coordinator does) and answers what a Kafka 4.4 broker answered to the same
// steps (interop/cmd/sharecompare): after an alteration to 3, start offset 3,
// leader epoch 0 (no leader has read the state yet; Strata answered -1) and lag
// 2 of 5 records; after one past the high watermark, a negative lag (Strata
// answered 0). The summary itself: state epoch 1, nothing complete.
func TestShareOffsetsReadSummary(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := n.client(t)
	const topic, group = "summary-share", "summary-share-group"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	describe := func() string {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return fmt.Sprintf("code %d start %d leader epoch %d lag %d", p.ErrorCode, p.StartOffset, p.LeaderEpoch, p.Lag)
	}
	alterShareOffsets(ctx, t, cl, group, topic, 3)
	if got, want := describe(), "code 0 start 3 leader epoch 0 lag 2"; got != want {
		t.Errorf("after altering to 3: %s, want %s", got, want)
	}
	sreq := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	sreq.GroupID = group
	st := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	st.TopicID = md.Topics[topic].ID
	st.Partitions = []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()}
	sreq.Topics = append(sreq.Topics, st)
	sresp, err := sreq.RequestWith(ctx, cl) // one node: it coordinates every key
	if err != nil || len(sresp.Topics) != 1 || len(sresp.Topics[0].Partitions) != 1 {
		t.Fatalf("ReadShareGroupStateSummary: %v %+v", err, sresp)
	}
	if p := sresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 3 || p.StateEpoch != 1 || p.LeaderEpoch != 0 || p.DeliveryCompleteCount != 0 {
		t.Errorf("summary: %+v, want start 3, state epoch 1, leader epoch 0, nothing complete", p)
	}
	alterShareOffsets(ctx, t, cl, group, topic, 500)
	if got, want := describe(), "code 0 start 500 leader epoch 0 lag -495"; got != want {
		t.Errorf("after altering past the high watermark: %s, want %s", got, want)
	}
}
