package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/wait"
)

// produceRaw sends one Produce request for partition 0 of topic and returns the
// partition's answer.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequestOf(topic, acks, records)
	id, err := txntest.TopicID(context.Background(), cl, topic)
	if acks != -1 && acks != 1 || err != nil {
		// kgo rewrites acks to its own setting, and sends v13, which names a
		// topic by id (a topic without one is UNKNOWN_TOPIC_ID): send this
		// one raw, by name.
		req.Version = 9
		return rawRequest(t, cl.OptValue(kgo.SeedBrokers).([]string)[0], req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	req.Topics[0].TopicID = id
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// produceRequestOf is a Produce of records to partition 0 of topic.
func produceRequestOf(topic string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestIdempotentRetryIsDeduplicated(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	n := startNode(t, cfg)
	cl, adm := n.client(t)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	pid := kmsg.NewPtrInitProducerIDRequest()
	pidResp, err := pid.RequestWith(context.Background(), cl)
	if err != nil || pidResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, pidResp)
	}
	mk := func(seq int32, n int) []byte {
		return batchtest.Build(batchtest.Options{
			Idempotent: true, ProducerID: pidResp.ProducerID, ProducerEpoch: pidResp.ProducerEpoch,
			BaseSequence: seq, Records: batchtest.Values(n, 10),
		})
	}
	first := produceRaw(t, cl, "idem", -1, mk(0, 3))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", first)
	}
	second := produceRaw(t, cl, "idem", -1, mk(3, 2))
	if second.ErrorCode != 0 || second.BaseOffset != 3 {
		t.Fatalf("second batch: %+v", second)
	}
	retry := produceRaw(t, cl, "idem", -1, mk(0, 3))
	if retry.ErrorCode != 0 || retry.BaseOffset != 0 {
		t.Fatalf("retried first batch must answer its original offset 0: %+v", retry)
	}
	gap := produceRaw(t, cl, "idem", -1, mk(7, 1))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("a sequence gap must be OUT_OF_ORDER_SEQUENCE_NUMBER, got %v", kerr.ErrorForCode(gap.ErrorCode))
	}

	// Producer state is rebuilt from the log after a restart.
	n.Close()
	n2 := startNode(t, cfg)
	cl2, _ := n2.client(t)
	wait.For(t, "partition led after restart", func() bool {
		r := produceRaw(t, cl2, "idem", -1, mk(3, 2))
		if r.ErrorCode == kerr.NotLeaderForPartition.Code || r.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			return false
		}
		if r.ErrorCode != 0 || r.BaseOffset != 3 {
			t.Fatalf("retry after restart must answer offset 3: %+v", r)
		}
		return true
	})
	if next := produceRaw(t, cl2, "idem", -1, mk(5, 1)); next.ErrorCode != 0 || next.BaseOffset != 5 {
		t.Fatalf("next batch after restart: %+v", next)
	}
	if got := consumeAll(t, n2.KafkaAddr(), "idem", 6); len(got) != 6 {
		t.Fatalf("read %d records, want 6 (no duplicates)", len(got))
	}
	pid2, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(context.Background(), cl2)
	if err != nil || pid2.ProducerID == pidResp.ProducerID {
		t.Fatalf("producer ids must never repeat across restarts: %d then %d (%v)", pidResp.ProducerID, pid2.ProducerID, err)
	}
}

func TestProduceErrors(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.AutoCreateTopics = false
	n := startNode(t, cfg)
	cl, adm := n.client(t)
	small := "200"
	if _, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &small}, "e"); err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	if _, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"cleanup.policy": &compact}, "ce"); err != nil {
		t.Fatal(err)
	}
	good := batchtest.Build(batchtest.Options{Records: batchtest.Values(2, 10)})
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	tests := []struct {
		name    string
		topic   string
		acks    int16
		records []byte
		want    *kerr.Error
	}{
		{"unknown topic", "nope", 1, good, kerr.UnknownTopicOrPartition},
		{"too large", "e", 1, batchtest.Build(batchtest.Options{Records: batchtest.Values(1, 500)}), kerr.MessageTooLarge},
		{"bad crc", "e", 1, badCRC, kerr.CorruptMessage},
		{"truncated", "e", 1, good[:len(good)-3], kerr.InvalidRecord}, // no whole batch, as Kafka finds
		{"acks 2", "e", 2, good, kerr.InvalidRequiredAcks},
		{"control batch", "e", 1, batchtest.Build(batchtest.Options{Attributes: 0x20}), kerr.InvalidRecord},
		{"no key on a compacted topic", "ce", 1, good, kerr.InvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := produceRaw(t, cl, tt.topic, tt.acks, tt.records)
			if got.ErrorCode != tt.want.Code {
				t.Fatalf("error %v, want %v", kerr.ErrorForCode(got.ErrorCode), tt.want)
			}
		})
	}
	// Nothing was stored by the failures; a good batch still lands at offset 0.
	if r := produceRaw(t, cl, "e", 1, good); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("good batch after failures: %+v", r)
	}
	md, err := adm.Metadata(context.Background(), "nope")
	if err != nil || md.Topics["nope"].Err == nil {
		t.Fatalf("with auto-create off an unknown topic stays unknown: %v %+v", err, md.Topics["nope"])
	}
}

func TestFetchOutOfRangeAndLongPoll(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "f")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(offset int64, wait time.Duration, minBytes int32) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(wait.Milliseconds()), minBytes, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "f", created.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch(5, 0, 0); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// A long poll at the end returns as soon as a record is produced.
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { done <- fetch(0, 10*time.Second, 1) }()
	start := time.Now()
	if r := produceRaw(t, cl, "f", -1, batchtest.Build(batchtest.Options{})); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	p := <-done
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
		t.Fatalf("long poll answer: err %v, %d bytes, hwm %d", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), p.HighWatermark)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("long poll waited %v: it must be woken by the append, not by max_wait", waited)
	}
}

// TestCompressedBatchesStoredAsProduced: every codec round-trips through a real
// client, and the stored batch is byte-for-byte the produced one (only base offset
// and leader epoch differ, which lie outside the CRC).
func TestCompressedBatches(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			cl, _ := n.client(t, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("z-"+name), kgo.AllowAutoTopicCreation())
			var rs []*kgo.Record
			for i := 0; i < 50; i++ {
				rs = append(rs, &kgo.Record{Value: []byte("compressible compressible compressible")})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			got := consumeAll(t, n.KafkaAddr(), "z-"+name, 50)
			for _, r := range got {
				if string(r.Value) != "compressible compressible compressible" {
					t.Fatalf("value %q", r.Value)
				}
			}
		})
	}
}
