package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

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

	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = group
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = topic
	ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	ap.StartOffset = 3
	at.Partitions = append(at.Partitions, ap)
	alter.Topics = append(alter.Topics, at)
	aresp, err := alter.RequestWith(rctx, cl)
	if err != nil || aresp.ErrorCode != 0 || aresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AlterShareGroupOffsets: %v %+v", err, aresp)
	}

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
