package server

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// throttleHook records the throttles brokers report.
type throttleHook struct{ max atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	for {
		cur := h.max.Load()
		if int64(d) <= cur || h.max.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// TestClientQuotas: a producer_byte_rate set with AlterClientQuotas (what
// kafka-configs --entity-type users --add-config does) throttles the user once
// over it: the produce response carries throttle_time_ms; another user is not
// throttled; DescribeClientQuotas shows the quota.
func TestClientQuotas(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256"
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=alice,password=a]", "SCRAM-SHA-256=[name=bob,password=b]"}
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login := func(user, password string, h *throttleHook) (*kgo.Client, *kadm.Client) {
		return n.client(t, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()), kgo.WithHooks(h),
			kgo.DefaultProduceTopic("q"), kgo.ProducerLinger(0))
	}
	aliceHook, bobHook := &throttleHook{}, &throttleHook{}
	alice, adm := login("alice", "a", aliceHook)
	bob, _ := login("bob", "b", bobHook)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	rate := 2000.0
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: strPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strPtr("alice"), MatchType: 0}})
	if err != nil || len(described) != 1 || described[0].Values[0].Value != rate {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, described)
	}
	value := make([]byte, 10000)
	rand.Read(value) // incompressible: the quota counts bytes on the wire
	for _, cl := range []*kgo.Client{alice, bob} {
		for range 3 { // 30 kB in the 10 s minimum window: 1.5 times the quota
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if aliceHook.max.Load() == 0 {
		t.Fatal("alice produced 30 kB against a 2 kB/s quota and was never throttled")
	}
	if bobHook.max.Load() != 0 {
		t.Fatalf("bob, without a quota, was throttled %v", time.Duration(bobHook.max.Load()))
	}
	// Removing the quota removes it from the image.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: strPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}},
	}}); err != nil {
		t.Fatal(err)
	}
	if described, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(described) != 0 {
		t.Fatalf("after removal: %v %+v", err, described)
	}
}

func strPtr(s string) *string { return &s }
