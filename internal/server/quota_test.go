package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/quota"
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

	// Each request keeps a handler busy for a few microseconds (2 us on a fast
	// machine): a thousand or so pass 1 ms, and as many are far under bob's
	// quota. (DescribeCluster: kgo answers Metadata from its cache.)
	describe := func(cl *kgo.Client) {
		t.Helper()
		if _, err := cl.Request(ctx, kmsg.NewPtrDescribeClusterRequest()); err != nil {
			t.Fatal(err)
		}
	}
	const aliceMax = 20000
	for i := 0; i < aliceMax && aliceHook.max.Load() == 0; i++ {
		describe(alice)
	}
	if aliceHook.max.Load() == 0 {
		t.Fatalf("alice sent %d DescribeCluster requests against 0.01%% of a request thread and was never throttled", aliceMax)
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

// TestIPQuotas: connection_creation_rate on IP entities (KIP-612), set with
// AlterClientQuotas as kafka-configs --entity-type ips does:
//   - Kafka's refusals: an ip beside a user, another key on an ip, the rate on
//     a user, a fractional rate, a name that is not an address, and an ip
//     filter beside a user filter in DescribeClientQuotas;
//   - 127.0.0.3, allowed 1 connection a second, opens 20 connections at once:
//     the 10 s minimum window admits the first 10, and the broker closes the
//     others without serving them; 127.0.0.4, under the default entity's 1000,
//     and the test's own clients (127.0.0.1) are served throughout.
func TestIPQuotas(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := n.client(t)
	ip := func(name *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "ip", Name: name}
	}
	set := func(key string, v float64, entity ...kadm.ClientQuotaEntityComponent) error {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
			Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Err
	}
	for name, err := range map[string]error{
		"ip and user":       set("connection_creation_rate", 5, ip(strPtr("127.0.0.3")), kadm.ClientQuotaEntityComponent{Type: "user", Name: strPtr("alice")}),
		"byte rate on ip":   set("producer_byte_rate", 5, ip(strPtr("127.0.0.3"))),
		"rate on a user":    set("connection_creation_rate", 5, kadm.ClientQuotaEntityComponent{Type: "user", Name: strPtr("alice")}),
		"fractional":        set("connection_creation_rate", 1.5, ip(strPtr("127.0.0.3"))),
		"not an address":    set("connection_creation_rate", 5, ip(strPtr("no.such.host"))),
		"unknown type":      set("connection_creation_rate", 5, kadm.ClientQuotaEntityComponent{Type: "ips", Name: strPtr("127.0.0.3")}),
		"negative ip quota": set("connection_creation_rate", -1, ip(nil)),
	} {
		if !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, err)
		}
	}
	if err := set("connection_creation_rate", 1, ip(strPtr("127.0.0.3"))); err != nil {
		t.Fatal(err)
	}
	if err := set("connection_creation_rate", 1000, ip(nil)); err != nil {
		t.Fatal(err)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}})
	if err != nil || len(described) != 2 {
		t.Fatalf("DescribeClientQuotas ip: %v %+v", err, described)
	}
	for _, d := range described {
		if len(d.Entity) != 1 || d.Entity[0].Type != "ip" || len(d.Values) != 1 || d.Values[0].Key != "connection_creation_rate" {
			t.Fatalf("described %+v", d)
		}
	}
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Components = []kmsg.DescribeClientQuotasRequestComponent{
		{EntityType: "ip", MatchType: kmsg.QuotasMatchTypeDefault},
		{EntityType: "user", MatchType: kmsg.QuotasMatchTypeAny},
	}
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("ip and user filter: %v %+v", err, resp)
	}

	// 20 connections at once from the limited address: dialled first, so that
	// all are accepted well within the 10 s window, then each asks ApiVersions.
	dialFrom := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		nc, err := d.DialContext(ctx, "tcp", n.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		return nc
	}
	served := func(nc net.Conn) bool {
		t.Helper()
		frame := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff} // ApiVersions v0, correlation id 7, null client id
		if _, err := nc.Write(frame); err != nil {
			return false // closed before the request could be written
		}
		var size [4]byte
		_, err := io.ReadFull(nc, size[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection neither served nor closed: %v", err)
		}
		return err == nil
	}
	start := time.Now()
	var conns []net.Conn
	for range 20 {
		conns = append(conns, dialFrom("127.0.0.3"))
	}
	dialled := time.Since(start)
	count := 0
	for _, nc := range conns {
		if served(nc) {
			count++
		}
	}
	if dialled > 9*time.Second {
		t.Fatalf("dialling 20 connections took %v: the window's bound cannot be checked", dialled)
	}
	if count != 10 {
		t.Fatalf("%d of 20 connections from 127.0.0.3 served, want 10 (1/s over the 10 s minimum window)", count)
	}
	if st := n.kafka.Stats(); st.ThrottledConnections != 10 {
		t.Fatalf("stats %+v, want 10 throttled connections", st)
	}
	for range 20 {
		if !served(dialFrom("127.0.0.4")) {
			t.Fatal("a connection from 127.0.0.4 (default quota 1000/s) was not served")
		}
	}
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Fatalf("the test's own client: %v", err)
	}
}

// TestAcksZeroThrottle: a Produce with acks=0 has no answer to carry
// throttle_time_ms, so a client over its producer_byte_rate is throttled by
// muting its connection alone, as Kafka does:
//   - one raw acks=0 request of F bytes against a quota of F/13 per second is
//     13 / 10 of the quota over the 10 s minimum window: the broker's throttle
//     is (1.3 - 1) x 10 s = 3 s, and an ApiVersions sent right behind it on the
//     same connection is answered no sooner;
//   - a franz-go producer with acks=0 sending as fast as it can for 5 s gets
//     no more into the log than the quota allows over that time plus the 11 s
//     the rate is measured over (without the mute it writes megabytes), and
//     not less than half the first window's allowance.
func TestAcksZeroThrottle(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, adm := n.client(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "z"); err != nil {
		t.Fatal(err)
	}
	setQuota := func(clientID string, rate float64) {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: strPtr(clientID)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
		}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("AlterClientQuotas: %v %+v", err, res)
		}
	}

	value := make([]byte, 100_000)
	rand.Read(value)
	records, err := batch.Build(batch.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 0, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "z"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := rawFrame(req, 1, "zero-raw")
	setQuota("zero-raw", math.Floor(float64(len(frame))/13)) // a byte rate is a whole number, as in Kafka
	nc, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	sent := time.Now()
	if _, err := nc.Write(append(frame, rawFrame(kmsg.NewPtrApiVersionsRequest(), 2, "zero-raw")...)); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		t.Fatalf("ApiVersions behind the throttled produce: %v", err)
	}
	if corr := int32(head[4])<<24 | int32(head[5])<<16 | int32(head[6])<<8 | int32(head[7]); corr != 2 {
		t.Fatalf("first answer has correlation id %d, want 2 (acks=0 is never answered)", corr)
	}
	if muted := time.Since(sent); muted < 3*time.Second-100*time.Millisecond {
		t.Fatalf("ApiVersions answered %v after an acks=0 produce throttled for 3 s", muted)
	}

	const rate = 20_000.0
	setQuota("zero", rate)
	cl, _ := n.client(t, kgo.ClientID("zero"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.DefaultProduceTopic("z"), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0))
	ends := func() int64 {
		t.Helper()
		o, err := adm.ListEndOffsets(ctx, "z")
		if err != nil {
			t.Fatal(err)
		}
		off, _ := o.Lookup("z", 0)
		return off.Offset
	}
	before := ends()
	small := value[:1000]
	start := time.Now()
	produceCtx, stop := context.WithDeadline(ctx, start.Add(5*time.Second))
	defer stop()
	for produceCtx.Err() == nil {
		v := make([]byte, len(small)) // incompressible: the quota counts bytes on the wire
		rand.Read(v)
		cl.Produce(produceCtx, &kgo.Record{Value: v}, nil) // blocks while the buffer is full
	}
	elapsed := time.Since(start)
	written := float64(ends()-before) * float64(len(small))
	if limit := rate*(elapsed+quota.Samples*quota.Window).Seconds() + 64<<10; written > limit {
		t.Fatalf("acks=0 producer wrote %.0f bytes in %v against %v B/s: more than %.0f", written, elapsed, rate, limit)
	}
	if written < rate*10/2 {
		t.Fatalf("acks=0 producer wrote only %.0f bytes in %v against %v B/s", written, elapsed, rate)
	}
	t.Logf("acks=0 producer wrote %.0f bytes in %v against %v B/s", written, elapsed, rate)
}

// rawFrame is req's request frame: size, header (v1) and body.
func rawFrame(req kmsg.Request, corr int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0) // no header tags
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestMaxConnectionCreationRate: --max-connection-creation-rate 1 admits 10
// connections at once (the 10 s minimum window) and then makes accepting
// wait: of 14 connections opened and served one after another, the last 4
// wait a second each (the wait is bounded by one window), and every one is
// served.
func TestMaxConnectionCreationRate(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.MaxConnectionCreationRate = 1
	n := startNode(t, cfg)
	frame := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff} // ApiVersions v0
	start := time.Now()
	for i := range 14 {
		nc, err := net.Dial("tcp", n.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		var size [4]byte
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatalf("connection %d not served: %v", i+1, err)
		}
		nc.Close()
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("14 connections against 1/s were served in %v: accepting did not wait a second for each of the last 4", took)
	}
}

// TestRequestQuotaChargesApiVersions: Kafka serves ApiVersions in its API
// layer (KafkaApis.handleApiVersionsRequest) and charges it to the request
// quota like any client request (RequestQuotaTest counts it among the client
// actions): a client over its request_percentage is throttled by ApiVersions
// alone, with throttle_time_ms in the answer.
func TestRequestQuotaChargesApiVersions(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256"
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=alice,password=a]"}
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hook := &throttleHook{}
	alice, adm := n.client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "a"}.AsSha256Mechanism()), kgo.WithHooks(hook))
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: strPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.001}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
	if hook.max.Load() != 0 {
		t.Fatalf("throttled %v before any ApiVersions", time.Duration(hook.max.Load()))
	}
	// 0.001% of a thread is 100 us in the 10 s minimum window: a few dozen
	// ApiVersions answers pass it.
	const maxRequests = 5000
	for i := 0; i < maxRequests && hook.max.Load() == 0; i++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1"
		if _, err := alice.Request(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if hook.max.Load() == 0 {
		t.Fatalf("alice sent %d ApiVersions requests against 0.001%% of a request thread and was never throttled", maxRequests)
	}
}
