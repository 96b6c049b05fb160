package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/wait"
)

// shareMember drives a KIP-932 share consumer with raw requests, as the Java
// KafkaShareConsumer does: ShareGroupHeartbeat to join, ShareFetch in one share
// session, ShareAcknowledge.
type shareMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	topicID [16]byte
	epoch   int32 // the share session's next epoch
}

func joinShareGroup(t *testing.T, cl *kgo.Client, group, id, topic string, topicID [16]byte) *shareMember {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, id, 0, []string{topic}
	var resp *kmsg.ShareGroupHeartbeatResponse
	var err error
	// A coordinator still loading its partition answers with a retriable code,
	// which a client retries.
	wait.For(t, "the share group coordinator to take the member", func() bool {
		resp, err = hb.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatalf("ShareGroupHeartbeat: %v", err)
		}
		switch resp.ErrorCode {
		case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
			return false
		case 0:
			return true
		}
		t.Fatalf("ShareGroupHeartbeat: %+v", resp)
		return false
	})
	return &shareMember{t: t, cl: cl, group: group, id: id, topicID: topicID}
}

// acquired is one record a ShareFetch handed out.
type acquired struct {
	offset int64
	count  int16
	rec    *kmsg.Record
}

// fetch acquires records of partition 0, waiting up to wait for some.
func (m *shareMember) fetch(wait time.Duration) []acquired {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait/time.Millisecond), 1, 1<<20, 100, 100
	tp := kmsg.NewShareFetchRequestTopic()
	tp.TopicID = m.topicID
	p := kmsg.NewShareFetchRequestTopicPartition()
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("ShareFetch: %v %+v", err, resp)
	}
	m.epoch++
	var out []acquired
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.t.Fatalf("ShareFetch partition error %d", p.ErrorCode)
			}
			recs := map[int64]*kmsg.Record{}
			for rest := p.Records; len(rest) > 0; {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rest); err != nil {
					m.t.Fatalf("decoding batch: %v", err)
				}
				rest = rest[12+int(b.Length):]
				raw := b.Records
				for i := int32(0); i < b.NumRecords; i++ {
					var r kmsg.Record
					n, l := varintLen(raw)
					if err := r.ReadFrom(raw[:n+l]); err != nil {
						m.t.Fatalf("decoding record: %v", err)
					}
					raw = raw[n+l:]
					recs[b.FirstOffset+int64(r.OffsetDelta)] = &r
				}
			}
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out = append(out, acquired{offset: o, count: a.DeliveryCount, rec: recs[o]})
				}
			}
		}
	}
	return out
}

// varintLen returns the length of the zig-zag varint at the start of b and its
// value (a record's length prefix).
func varintLen(b []byte) (n, value int) {
	var x uint64
	var s uint
	for i, c := range b {
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return i + 1, int(int64(x>>1) ^ -int64(x&1))
		}
		s += 7
	}
	return len(b), 0
}

// ack acknowledges one offset with a ShareAcknowledge in the member's session; it
// returns the partition's error code.
func (m *shareMember) ack(offset int64, typ share.AckType) int16 {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	tp := kmsg.NewShareAcknowledgeRequestTopic()
	tp.TopicID = m.topicID
	p := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = offset, offset, []int8{int8(typ)}
	p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("ShareAcknowledge: %v %+v", err, resp)
	}
	m.epoch++
	return resp.Topics[0].Partitions[0].ErrorCode
}

// alterGroupConfig sets group configs with IncrementalAlterConfigs (GROUP
// resource) and returns the resource's error code.
func alterGroupConfig(t *testing.T, cl *kgo.Client, group string, kv ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(metadata.ResourceGroup), group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

// readDLQ reads partition 0 of topic until it holds want records.
func readDLQ(t *testing.T, addr, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait.DefaultTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), want, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func headerMap(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// TestShareDeadLetter: KIP-1191 dead-letter topics of share groups on one node.
//
//  1. A group's dead-letter topic is refused (INVALID_CONFIG) without the dlq.
//     prefix or without errors.deadletterqueue.group.enable=true on the topic.
//  2. A member rejects a record: it lands in the dead-letter topic, copied (key,
//     value, its headers) with the six __dlq.errors.* headers, and is archived.
//  3. A record released until it reaches share.delivery.count.limit lands there too,
//     with its delivery count.
//  4. Without copy.record.enable the dead-letter record carries the headers only.
func TestShareDeadLetter(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	ctx := context.Background()
	mustCreate := func(name string, configs map[string]*string) {
		t.Helper()
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, name); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	enable := "true"
	mustCreate("orders", nil)
	mustCreate("dlq.orders", map[string]*string{metadata.TopicDeadLetterGroupEnable: &enable})
	mustCreate("dlq.closed", nil)

	// 1. The config rules.
	for _, bad := range []string{"orders", "dlq.closed", "__consumer_offsets"} {
		if code := alterGroupConfig(t, cl, "g", metadata.GroupDeadLetterTopic, bad); code != kerr.InvalidConfig.Code {
			t.Errorf("dead-letter topic %q: code %d, want INVALID_CONFIG", bad, code)
		}
	}
	if code := alterGroupConfig(t, cl, "g", metadata.GroupShareAutoOffsetReset, "earliest", metadata.GroupShareDeliveryCountLimit, "2",
		metadata.GroupDeadLetterTopic, "dlq.orders", metadata.GroupDeadLetterCopyRecord, "true"); code != 0 {
		t.Fatalf("setting the group's configs: code %d", code)
	}

	for i := range 4 {
		r := &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("test")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	topicID := [16]byte(n.ctrl.Image().Topic("orders").ID)
	wait.For(t, "the group config to reach the node", func() bool {
		return n.ctrl.Image().GroupConfig("g", metadata.GroupDeadLetterTopic) == "dlq.orders"
	})

	// 2. A rejection.
	m := joinShareGroup(t, cl, "g", "member-1", "orders", topicID)
	got := m.fetch(5 * time.Second)
	if len(got) != 4 {
		t.Fatalf("acquired %d records, want 4", len(got))
	}
	m.ack(0, share.Accept)
	m.ack(1, share.Reject)
	m.ack(3, share.Accept)
	recs := readDLQ(t, n.KafkaAddr(), "dlq.orders", 1)
	r := recs[0]
	if string(r.Key) != "k1" || string(r.Value) != "v1" {
		t.Errorf("dead-letter record %q=%q, want k1=v1", r.Key, r.Value)
	}
	want := map[string]string{"origin": "test", share.HeaderTopic: "orders", share.HeaderPartition: "0", share.HeaderOffset: "1",
		share.HeaderGroup: "g", share.HeaderDeliveryCount: "1", share.HeaderMessage: "The record was rejected by a consumer."}
	if h := headerMap(r); fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	if len(r.Headers) != 7 || r.Headers[0].Key != "origin" {
		t.Errorf("headers %v: want the record's own first, then the six dead-letter headers", r.Headers)
	}

	// 3. The delivery count limit: released on deliveries 1 and 2.
	m.ack(2, share.Release)
	got = m.fetch(5 * time.Second)
	if len(got) != 1 || got[0].offset != 2 || got[0].count != 2 {
		t.Fatalf("acquired %+v, want offset 2 at delivery 2", got)
	}
	m.ack(2, share.Release)
	recs = readDLQ(t, n.KafkaAddr(), "dlq.orders", 2)
	if h := headerMap(recs[1]); h[share.HeaderOffset] != "2" || h[share.HeaderDeliveryCount] != "2" ||
		h[share.HeaderMessage] != "The record reached the delivery count limit." || string(recs[1].Value) != "v2" {
		t.Errorf("second dead-letter record %q with headers %v", recs[1].Value, h)
	}
	wait.For(t, "the dead-letter counts", func() bool { return n.shares.DeadLetterStats()["g"].Written == 2 })
	// Both are archived: nothing is left to acquire.
	if got := m.fetch(300 * time.Millisecond); len(got) != 0 {
		t.Errorf("acquired %+v after everything was acknowledged or dead-lettered", got)
	}

	// 4. Headers only.
	if code := alterGroupConfig(t, cl, "g", metadata.GroupDeadLetterCopyRecord, "false"); code != 0 {
		t.Fatalf("copy.record.enable=false: code %d", code)
	}
	wait.For(t, "the group config to reach the node", func() bool {
		return n.ctrl.Image().GroupConfig("g", metadata.GroupDeadLetterCopyRecord) == "false"
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("k4"), Value: []byte("v4")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := m.fetch(5 * time.Second); len(got) != 1 || got[0].offset != 4 {
		t.Fatalf("acquired %+v, want offset 4", got)
	}
	m.ack(4, share.Reject)
	recs = readDLQ(t, n.KafkaAddr(), "dlq.orders", 3)
	if r := recs[2]; r.Key != nil || r.Value != nil || len(r.Headers) != 6 || headerMap(r)[share.HeaderOffset] != "4" {
		t.Errorf("headers-only dead-letter record %q=%q headers %v", r.Key, r.Value, r.Headers)
	}
}

// TestShareDeadLetterUnwritable: a dead-letter topic that cannot be written (here
// deleted) keeps the record acquirable, counted as a failure; once the cluster may
// create the topic (errors.deadletterqueue.auto.create.topics.enable) the next
// rejection creates it, enabled for groups, and lands there.
func TestShareDeadLetterUnwritable(t *testing.T) {
	n, cl, adm := startDeadLetterNode(t, "jobs", "w")
	ctx := context.Background()
	if _, err := adm.DeleteTopics(ctx, "dlq.jobs"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte("poison")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the node to apply the configs and the deletion", func() bool {
		img := n.ctrl.Image()
		return img.Topic("dlq.jobs") == nil && img.GroupConfig("w", metadata.GroupDeadLetterTopic) == "dlq.jobs"
	})
	m := joinShareGroup(t, cl, "w", "member-1", "jobs", [16]byte(n.ctrl.Image().Topic("jobs").ID))
	if got := m.fetch(5 * time.Second); len(got) != 1 {
		t.Fatalf("acquired %+v, want the record", got)
	}
	m.ack(0, share.Reject)
	wait.For(t, "the failed write to be counted", func() bool { return n.shares.DeadLetterStats()["w"].Failed == 1 })
	got := m.fetch(5 * time.Second)
	if len(got) != 1 || got[0].offset != 0 || got[0].count != 2 {
		t.Fatalf("acquired %+v after the failed write, want offset 0 again at delivery 2", got)
	}

	enable := "true"
	setBroker := kadm.AlterConfig{Op: kadm.SetConfig, Name: metadata.BrokerDeadLetterAutoCreate, Value: &enable}
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setBroker}); err != nil || resps[0].Err != nil {
		t.Fatalf("setting %s: %v %v", metadata.BrokerDeadLetterAutoCreate, err, resps)
	}
	wait.For(t, "auto-create to reach the node", func() bool { return n.ctrl.Image().DeadLetterAutoCreate() })
	m.ack(0, share.Reject)
	recs := readDLQ(t, n.KafkaAddr(), "dlq.jobs", 1)
	if h := headerMap(recs[0]); h[share.HeaderDeliveryCount] != "2" || h[share.HeaderGroup] != "w" {
		t.Errorf("dead-letter headers %v", h)
	}
	if !n.ctrl.Image().Topic("dlq.jobs").Config.DeadLetterGroupEnable {
		t.Error("the created dead-letter topic is not enabled for groups")
	}
	wait.For(t, "the write to be counted", func() bool { return n.shares.DeadLetterStats()["w"].Written == 1 })
}

// TestShareDeadLetterAfterCrash: state saved with records Archiving, as a crash
// between the dead-letter write and the archiving leaves it, is written to the
// dead-letter topic when the share partition is loaded again (at least once: the
// headers tell a duplicate), and the records are archived then.
func TestShareDeadLetterAfterCrash(t *testing.T) {
	n, cl, _ := startDeadLetterNode(t, "tasks", "c")
	ctx := context.Background()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tasks", Value: []byte("t" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	img := n.ctrl.Image()
	topicID := [16]byte(img.Topic("tasks").ID)
	snap := share.Snapshot{LeaderEpoch: img.Partition("tasks", 0).LeaderEpoch, Start: 0, Batches: []share.StateBatch{
		{First: 0, Last: 0, State: share.Acknowledged, DeliveryCount: 1},
		{First: 1, Last: 1, State: share.Archiving, DeliveryCount: 3},
	}}
	sctx, cancel := context.WithTimeout(ctx, wait.DefaultTimeout)
	defer cancel()
	k := share.Key{Group: "c", TopicID: topicID, Partition: 0}
	if err := n.shareStore.Initialize(sctx, k, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.shareStore.Save(sctx, k, snap); err != nil {
		t.Fatal(err)
	}
	m := joinShareGroup(t, cl, "c", "member-1", "tasks", topicID)
	got := m.fetch(5 * time.Second)
	if len(got) != 1 || got[0].offset != 2 {
		t.Fatalf("acquired %+v, want only offset 2", got)
	}
	recs := readDLQ(t, n.KafkaAddr(), "dlq.tasks", 1)
	if h := headerMap(recs[0]); h[share.HeaderOffset] != "1" || h[share.HeaderDeliveryCount] != "3" || h[share.HeaderTopic] != "tasks" {
		t.Errorf("dead-letter headers %v", h)
	}
	wait.For(t, "the rewrite to be counted", func() bool { return n.shares.DeadLetterStats()["c"].Written == 1 })
}

// startDeadLetterNode starts a node with topic and dlq.<topic> (enabled for
// groups), one partition each, and makes dlq.<topic> the dead-letter topic of
// share group group, which starts at the earliest offset.
func startDeadLetterNode(t *testing.T, topic, group string) (*testNode, *kgo.Client, *kadm.Client) {
	t.Helper()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	enable := "true"
	for name, cfg := range map[string]map[string]*string{topic: nil, "dlq." + topic: {metadata.TopicDeadLetterGroupEnable: &enable}} {
		if _, err := adm.CreateTopic(context.Background(), 1, 1, cfg, name); err != nil {
			t.Fatal(err)
		}
	}
	if code := alterGroupConfig(t, cl, group, metadata.GroupShareAutoOffsetReset, "earliest", metadata.GroupDeadLetterTopic, "dlq."+topic); code != 0 {
		t.Fatalf("group configs: code %d", code)
	}
	return n, cl, adm
}

// TestShareDeadLetterLockExpiry: a record whose acquisition lock expires on its
// last delivery (share.delivery.count.limit) is dead-lettered by the expiry itself,
// with no acknowledgement.
func TestShareDeadLetterLockExpiry(t *testing.T) {
	n, cl, _ := startDeadLetterNode(t, "slow", "e")
	if code := alterGroupConfig(t, cl, "e", metadata.GroupShareRecordLockDuration, "1000", metadata.GroupShareDeliveryCountLimit, "2"); code != 0 {
		t.Fatalf("group configs: code %d", code)
	}
	wait.For(t, "the group configs to reach the node", func() bool {
		return n.ctrl.Image().GroupConfig("e", metadata.GroupShareDeliveryCountLimit) == "2"
	})
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "slow", Value: []byte("stuck")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := joinShareGroup(t, cl, "e", "member-1", "slow", [16]byte(n.ctrl.Image().Topic("slow").ID))
	for delivery := int16(1); delivery <= 2; delivery++ {
		got := m.fetch(5 * time.Second)
		if len(got) != 1 || got[0].count != delivery {
			t.Fatalf("delivery %d: acquired %+v", delivery, got)
		}
	}
	recs := readDLQ(t, n.KafkaAddr(), "dlq.slow", 1)
	if h := headerMap(recs[0]); h[share.HeaderDeliveryCount] != "2" || h[share.HeaderMessage] != "The record reached the delivery count limit." {
		t.Errorf("dead-letter headers %v", h)
	}
	if got := m.fetch(1500 * time.Millisecond); len(got) != 0 {
		t.Errorf("acquired %+v after the record was dead-lettered", got)
	}
}
