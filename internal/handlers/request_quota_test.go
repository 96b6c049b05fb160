package handlers

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
)

// TestAcksZeroProduceExemptFromRequestQuota: Kafka does not enforce the
// request quota on a Produce with acks=0 (KafkaApis.handleProduceRequest
// records no request time for it): only a byte-rate throttle may mute its
// connection. A client allowed a sliver of a request thread is not muted for
// its acks=0 produces, nor charged for them, while an acks=1 produce is
// throttled. Strata used to charge and mute acks=0 produces too.
func TestAcksZeroProduceExemptFromRequestQuota(t *testing.T) {
	quotas := quota.New(nil)
	h, _ := newProduceRulesHandlersWith(t, Config{Quotas: quotas},
		&metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{ClientID: metadata.QuotaName{Set: true, Default: true}},
			Key: metadata.QuotaRequestPercentage, Value: 1e-9})
	produce := func(acks int16) protocol.Response {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = acks, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "plain"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batchtest.Build(batchtest.Options{})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.Handle(context.Background(), &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.Version, Msg: req})
	}
	conn := &protocol.ConnInfo{}
	for range 3 {
		if resp := produce(0); !resp.None || resp.Close != nil || resp.Throttle != 0 {
			t.Fatalf("acks=0 produce: none %v close %v throttle %v, want no answer and no throttle", resp.None, resp.Close, resp.Throttle)
		}
	}
	if d := quotas.RecordRequestTime(h.cluster.Image(), quota.UserOf(conn.Principal()), conn.ClientID(), 0); d != 0 {
		t.Fatalf("the acks=0 produces were charged: a request of no time is throttled %v", d)
	}
	resp := produce(1)
	if resp.Throttle <= 0 {
		t.Fatalf("acks=1 produce against 1e-9%% of a thread: throttle %v, want throttled", resp.Throttle)
	}
	if pr, ok := resp.Msg.(*kmsg.ProduceResponse); !ok || pr.ThrottleMillis <= 0 {
		t.Fatalf("acks=1 produce answered %+v, want throttle_time_ms set", resp.Msg)
	}
}
