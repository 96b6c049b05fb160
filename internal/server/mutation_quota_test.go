package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// TestControllerMutationQuota: with controller_mutation_rate=1 on the default
// client id (a burst of 11 partitions), a strict CreateTopics of 20 partitions is
// admitted and not throttled (Kafka's StrictControllerMutationQuota); for the 9
// seconds the bucket needs to refill, strict versions (CreateTopics v6+,
// DeleteTopics v5+, CreatePartitions v3+) are refused with
// THROTTLING_QUOTA_EXCEEDED and that throttle, and older ones admitted and
// throttled; validate_only requests are not counted.
func TestControllerMutationQuota(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, adm := n.client(t)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id"}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
	wait.For(t, "the quota in the image", func() bool {
		return len(n.ctrl.Image().QuotaEntities()) == 1
	})
	create := func(version int16, name string, partitions int32, validateOnly bool) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis, req.ValidateOnly = 10000, validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
		req.Topics = append(req.Topics, rt)
		return rawRequest(t, n.KafkaAddr(), req).(*kmsg.CreateTopicsResponse)
	}
	if r := create(7, "probe", 500, true); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Fatalf("validate-only: %+v", r)
	}
	r := create(7, "big", 20, false)
	if r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Fatalf("20 partitions: error %d, throttle %dms, want admitted and not throttled", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	if r := create(7, "refused", 1, false); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis < 8000 || r.ThrottleMillis > 9000 {
		t.Fatalf("strict CreateTopics while throttled: %+v, throttle %dms, want about 9s", r.Topics[0], r.ThrottleMillis)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TimeoutMillis, del.TopicNames = 10000, []string{"big"}
	if d := rawRequest(t, n.KafkaAddr(), del).(*kmsg.DeleteTopicsResponse); d.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("strict DeleteTopics while throttled: %+v", d.Topics)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "big", 21
	cp.Topics = append(cp.Topics, cpt)
	if c := rawRequest(t, n.KafkaAddr(), cp).(*kmsg.CreatePartitionsResponse); c.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("strict CreatePartitions while throttled: %+v", c.Topics)
	}
	if r := create(5, "permissive", 1, false); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis == 0 {
		t.Fatalf("CreateTopics v5 while throttled: error %d throttle %d, want admitted and throttled", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	if n.ctrl.Image().Topic("refused") != nil || n.ctrl.Image().Topic("big") == nil {
		t.Fatal("the refused topic was created, or the admitted one not")
	}
}
