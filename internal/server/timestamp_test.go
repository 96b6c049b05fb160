package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/wait"
)

// TestProduceInvalidTimestamp: a franz-go producer whose record is stamped two
// hours ahead gets INVALID_TIMESTAMP under Kafka 4's default
// message.timestamp.after.max.ms (one hour), with Kafka's messages, and
// nothing is stored; once the topic allows a day ahead, the same record is
// taken. Before the check existed the first record was stored.
func TestProduceInvalidTimestamp(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.AutoCreateTopics = false
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.RecordRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ts"); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(2 * time.Hour)
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ts", Value: []byte("v"), Timestamp: ahead}).FirstErr()
	if !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("produce two hours ahead: %v, want INVALID_TIMESTAMP", err)
	}

	// The raw answer carries Kafka's summary and one record error.
	req := produceRequestOf("ts", 1, batchtest.Build(batchtest.Options{FirstTimestamp: ahead.UnixMilli(), Records: batchtest.Values(1, 1)}))
	req.SetVersion(11)
	sp := rawRequest(t, n.KafkaAddr(), req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.InvalidTimestamp.Code || sp.ErrorMessage == nil ||
		*sp.ErrorMessage != "One or more records have been rejected due to invalid timestamp" {
		t.Fatalf("raw produce: code %d, message %v", sp.ErrorCode, sp.ErrorMessage)
	}
	if len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 0 || sp.ErrorRecords[0].ErrorMessage == nil ||
		!strings.HasPrefix(*sp.ErrorRecords[0].ErrorMessage, "Timestamp ") ||
		!strings.Contains(*sp.ErrorRecords[0].ErrorMessage, " of message with offset 0 is out of range. The timestamp should be within [") {
		t.Fatalf("raw produce: record errors %+v", sp.ErrorRecords)
	}

	offsets, err := adm.ListEndOffsets(ctx, "ts")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offsets.Lookup("ts", 0); o.Offset != 0 {
		t.Fatalf("end offset %d after the refusals, want 0", o.Offset)
	}

	day := "86400000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.after.max.ms", Value: &day}}, "ts"); err != nil {
		t.Fatal(err)
	}
	// The new config reaches the partition once the metadata is applied.
	wait.Eventually(t, 20*time.Second, "a record two hours ahead taken with a day allowed", func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "ts", Value: []byte("v"), Timestamp: ahead}).FirstErr()
	})
}
