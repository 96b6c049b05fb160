package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/keyhash"
	"github.com/strata-stream/strata/internal/wait"
)

// TestProduceConsumeRestart: keyed records produced with acks=all (idempotent by
// default in kgo) come back in order per partition, on the partition murmur2 picks;
// after a restart everything is still there.
func TestProduceConsumeRestart(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.RequiredAcks(kgo.AllISRAcks()))

	const topic, partitions, perKey = "orders", 3, 20
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c", "order-1", "order-2", "order-3", "xyz"}
	var sent []*kgo.Record
	for i := 0; i < perKey; i++ {
		for _, k := range keys {
			sent = append(sent, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(fmt.Sprintf("%s-%d", k, i))})
		}
	}
	if err := cl.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range sent {
		if want := keyhash.Partition(r.Key, partitions); r.Partition != want {
			t.Fatalf("key %q went to partition %d, murmur2 says %d", r.Key, r.Partition, want)
		}
	}
	check := func(t *testing.T, addr string) {
		t.Helper()
		got := consumeAll(t, addr, topic, len(sent))
		next := map[string]int{}
		for _, r := range got {
			want := fmt.Sprintf("%s-%d", r.Key, next[string(r.Key)])
			if string(r.Value) != want {
				t.Fatalf("partition %d offset %d: value %q, want %q (per-key order)", r.Partition, r.Offset, r.Value, want)
			}
			next[string(r.Key)]++
		}
		for _, k := range keys {
			if next[k] != perKey {
				t.Fatalf("key %q: read %d records, want %d", k, next[k], perKey)
			}
		}
	}
	check(t, n.KafkaAddr())

	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	n2 := startNode(t, cfg)
	check(t, n2.KafkaAddr())
}

// consumeAll reads want records from every partition of topic from the start.
func consumeAll(t *testing.T, addr, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(got), want, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != want {
		t.Fatalf("read %d records, want %d", len(got), want)
	}
	return got
}

func TestListOffsetsAndDeleteRecords(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsetOf := func(list kadm.ListedOffsets, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		o, ok := list.Lookup("t", 0)
		if !ok || o.Err != nil {
			t.Fatalf("list offsets: %+v", o)
		}
		return o.Offset
	}
	if got := offsetOf(adm.ListStartOffsets(ctx, "t")); got != 0 {
		t.Fatalf("start offset %d, want 0", got)
	}
	if got := offsetOf(adm.ListEndOffsets(ctx, "t")); got != 10 {
		t.Fatalf("end offset %d, want 10", got)
	}
	if got := offsetOf(adm.ListOffsetsAfterMilli(ctx, base.Add(3500*time.Millisecond).UnixMilli(), "t")); got != 4 {
		t.Fatalf("offset after t+3.5s = %d, want 4", got)
	}
	if got := offsetOf(adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), "t")); got != 10 {
		t.Fatalf("offset after the last timestamp = %d, want the end offset 10", got)
	}

	res, err := adm.DeleteRecords(ctx, kadm.Offsets{"t": {0: {At: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("t", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete records: %+v", r)
	}
	if got := offsetOf(adm.ListStartOffsets(ctx, "t")); got != 6 {
		t.Fatalf("start offset after DeleteRecords = %d, want 6", got)
	}
	got := consumeAll(t, n.KafkaAddr(), "t", 4)
	if got[0].Offset != 6 {
		t.Fatalf("first record read at offset %d, want 6", got[0].Offset)
	}
}

func TestConfigsRoundTrip(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	_, adm := n.client(t)
	retention := "3600000"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &retention}, "c"); err != nil {
		t.Fatal(err)
	}
	describe := func(key string) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("c", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c
			}
		}
		t.Fatalf("config %q not described", key)
		return kadm.Config{}
	}
	if c := describe("retention.ms"); c.MaybeValue() != retention {
		t.Fatalf("retention.ms = %q, want %q", c.MaybeValue(), retention)
	}
	bytes := "1048576"
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: &bytes}, {Op: kadm.DeleteConfig, Name: "retention.ms"}}, "c")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	if c := describe("retention.bytes"); c.MaybeValue() != bytes {
		t.Fatalf("retention.bytes = %q, want %q", c.MaybeValue(), bytes)
	}
	if c := describe("retention.ms"); c.MaybeValue() != "604800000" {
		t.Fatalf("retention.ms after delete = %q, want the default", c.MaybeValue())
	}
	bad := "banana"
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &bad}}, "c")
	if err != nil || resps[0].Err == nil {
		t.Fatalf("a bad value must be refused: %v %+v", err, resps)
	}
	cps, err := adm.CreatePartitions(ctx, 2, "c")
	if err != nil || cps["c"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cps)
	}
	md, err := adm.Metadata(ctx, "c")
	if err != nil || len(md.Topics["c"].Partitions) != 4 {
		t.Fatalf("after adding 2 partitions: %v %+v", err, md.Topics["c"])
	}
	if _, err := adm.DeleteTopic(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "topic deleted", func() bool {
		md, err := adm.Metadata(ctx, "c")
		return err == nil && md.Topics["c"].Err != nil
	})
}

// TestRetentionBySize: the broker's retention loop deletes whole old segments of a
// topic over retention.bytes and the log start offset moves up.
func TestRetentionBySize(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.LogCleanupInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.DefaultProduceTopic("r"), kgo.ProducerLinger(0))
	segment, retention := "2048", "4096"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"internal.segment.bytes": &segment, "retention.bytes": &retention}, "r"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 500)
	rand.Read(value) // incompressible: kgo compresses with snappy by default
	for i := 0; i < 40; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "retention to move the log start offset", func() bool {
		offs, err := adm.ListStartOffsets(ctx, "r")
		if err != nil {
			return false
		}
		o, _ := offs.Lookup("r", 0)
		return o.Offset > 0
	})
	offs, _ := adm.ListEndOffsets(ctx, "r")
	if o, _ := offs.Lookup("r", 0); o.Offset != 40 {
		t.Fatalf("end offset %d, want 40: retention must not touch the end", o.Offset)
	}
}

// TestCompactedTopic: on a topic with cleanup.policy=compact a reader ends up
// seeing only the latest value per key, in offset order, and tombstones go once
// delete.retention.ms has passed.
func TestCompactedTopic(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.LogCleanupInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.DefaultProduceTopic("changelog"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "internal.segment.bytes": "2048", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"} {
		configs[k] = kmsg.StringPtr(v)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, configs, "changelog"); err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	for i := 0; i < 200; i++ {
		k := fmt.Sprint("key-", i%10)
		v := fmt.Sprint("value-", i)
		if i >= 190 && i%10 == 3 {
			v = "" // key-3's last write is a tombstone
		}
		r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if v == "" {
			r.Value = nil
			delete(latest, k)
		} else {
			latest[k] = v
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Seal the segment holding the records above (only sealed segments are
	// cleaned): three incompressible records of one more key, too big for two of
	// them to share a segment, roll it at least twice.
	for i := 0; i < 3; i++ {
		big := make([]byte, 1500)
		rand.Read(big)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: big}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		latest["filler"] = string(big)
	}
	wait.For(t, "compaction to leave the latest value per key", func() bool {
		got := readTopic(t, n.KafkaAddr(), "changelog")
		seen := map[string]string{}
		var last int64 = -1
		for _, r := range got {
			if r.Offset <= last {
				t.Fatalf("offsets out of order: %d after %d", r.Offset, last)
			}
			last = r.Offset
			if _, dup := seen[string(r.Key)]; dup && string(r.Key) != "filler" {
				// ("filler" may repeat: its latest record is in the active segment,
				// which is never cleaned, so the one before it stays too.)
				return false // not compacted yet
			}
			if r.Value == nil {
				return false // tombstone still there
			}
			seen[string(r.Key)] = string(r.Value)
		}
		if len(seen) != len(latest) {
			return false
		}
		for k, v := range latest {
			if seen[k] != v {
				t.Fatalf("key %s: read %q after compaction, want the latest %q", k, seen[k], v)
			}
		}
		return true
	})
}

// readTopic reads partition 0 of topic from the start to its high-water mark.
func readTopic(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	hwm, _ := end.Lookup(topic, 0)
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(out) == 0 || out[len(out)-1].Offset < hwm.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		out = append(out, fs.Records()...)
	}
	return out
}
