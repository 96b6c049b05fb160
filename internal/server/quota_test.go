package server

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// throttleHook records the throttles brokers report, and counts fetches.
type throttleHook struct{ max, fetches atomic.Int64 }

func (h *throttleHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		h.fetches.Add(1)
	}
}

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

// TestRequestQuota: request_percentage (KIP-124), set with AlterClientQuotas as
// kafka-configs --add-config request_percentage=... does, charges the time
// requests keep a handler busy, without the time they wait:
//   - alice, allowed 0.01% of a handler thread (1 ms in the 10 s minimum
//     window), sends DescribeCluster requests until the broker throttles her;
//   - bob, allowed 1000%, sends as many and is never throttled;
//   - carol, allowed 5% (500 ms in the window), long-polls an empty topic for
//     about 4 s (each Fetch waits 500 ms): charged for that wait she would be
//     8 times over, and she is not throttled.
func TestRequestQuota(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256"
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=alice,password=a]", "SCRAM-SHA-256=[name=bob,password=b]",
		"SCRAM-SHA-256=[name=carol,password=c]"}
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	login := func(user, password string, h *throttleHook, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
		return n.client(t, append([]kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()), kgo.WithHooks(h)}, opts...)...)
	}
	aliceHook, bobHook, carolHook := &throttleHook{}, &throttleHook{}, &throttleHook{}
	alice, adm := login("alice", "a", aliceHook)
	bob, _ := login("bob", "b", bobHook)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	var entries []kadm.AlterClientQuotaEntry
	for user, pct := range map[string]float64{"alice": 0.01, "bob": 1000, "carol": 5} {
		entries = append(entries, kadm.AlterClientQuotaEntry{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: strPtr(user)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: pct}},
		})
	}
	res, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil || len(res) != 3 {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("AlterClientQuotas: %+v", r)
		}
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strPtr("alice"), MatchType: 0}})
	if err != nil || len(described) != 1 || described[0].Values[0].Key != "request_percentage" || described[0].Values[0].Value != 0.01 {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, described)
	}

	// Each request is worth microseconds at least: a few hundred are well over
	// 1 ms, and far under bob's quota. (DescribeCluster: kgo answers Metadata
	// from its cache.)
	describe := func(cl *kgo.Client) {
		t.Helper()
		if _, err := cl.Request(ctx, kmsg.NewPtrDescribeClusterRequest()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 500 && aliceHook.max.Load() == 0; i++ {
		describe(alice)
	}
	if aliceHook.max.Load() == 0 {
		t.Fatal("alice sent 500 DescribeCluster requests against 0.01% of a request thread and was never throttled")
	}
	for range 500 {
		describe(bob)
	}
	if bobHook.max.Load() != 0 {
		t.Fatalf("bob, within 1000%%, was throttled %v", time.Duration(bobHook.max.Load()))
	}

	carol, _ := login("carol", "c", carolHook, kgo.ConsumeTopics("idle"), kgo.FetchMaxWait(500*time.Millisecond))
	pollCtx, pollCancel := context.WithTimeout(ctx, 4*time.Second)
	fetches := carol.PollFetches(pollCtx)
	pollCancel()
	if errs := fetches.Errors(); len(errs) != 1 || errs[0].Err != context.DeadlineExceeded {
		t.Fatalf("polling an empty topic: %+v", errs)
	}
	if carolHook.max.Load() != 0 {
		t.Fatalf("carol, long-polling within 5%%, was throttled %v: her fetches' waits were charged", time.Duration(carolHook.max.Load()))
	}
	if carolHook.fetches.Load() < 4 {
		t.Fatalf("carol sent %d fetches in 4 s, want at least 4 long polls", carolHook.fetches.Load())
	}
}
