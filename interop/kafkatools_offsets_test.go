package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaGetOffsetsTiered runs Kafka 4.4's kafka-get-offsets with every
// special --time against a tiered topic whose oldest segments are only in the
// object store: -1 (latest), -2 (earliest: the remote start), -3 (the record
// with the largest timestamp), -4 (earliest local: above the remote start once
// local retention ran), -5 (latest tiered, KIP-1005: the last uploaded offset)
// and -6 (earliest pending upload, KIP-1023: the one after it). Uploads and
// local deletions go on in the background, so -4, -5 and -6 are checked to lie
// between what franz-go lists just before and just after the tool ran, and -5
// against -6.
func TestKafkaGetOffsetsTiered(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("tiered storage runs on Strata; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	tgt := startStrataWith(t, nil, "--remote-storage", "file://"+t.TempDir(), "--remote-upload-interval", "200ms")
	bs := []string{"--bootstrap-server", tgt.bootstrap}
	const topic, records, maxAt = "tiered", 200, 195
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	// Small segments, below segment.bytes' 1 MiB floor (internal.segment.bytes,
	// as Kafka's own tests): a dozen of them, most only remote once local retention ran.
	small := "16384"
	local := "32768"
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{
		"remote.storage.enable": kmsg.StringPtr("true"), "internal.segment.bytes": &small, "local.retention.bytes": &local,
	}, topic); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	value := bytes.Repeat([]byte("x"), 1000)
	for i := range records {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		if i == maxAt { // local (in the last segments): Kafka looks -3 up locally
			ts = base.Add(10 * time.Minute)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value, Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// list asks the leader for one special offset of partition 0.
	list := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, kerr.ErrorForCode(p.ErrorCode)
	}
	testcluster.Eventually(t, 60*time.Second, "segments uploaded and deleted locally", func() error {
		local, err := list(-4)
		if err != nil {
			return err
		}
		tiered, err := list(-5)
		if err != nil {
			return err
		}
		if local <= 0 || tiered <= 0 {
			return fmt.Errorf("earliest local %d, latest tiered %d", local, tiered)
		}
		return nil
	})

	tool := func(t *testing.T, ts int64) int64 {
		t.Helper()
		out := kafkatools.MustRun(t, "kafka-get-offsets", append(bs, "--topic", topic, "--time", strconv.FormatInt(ts, 10))...)
		m := regexp.MustCompile(`(?m)^tiered:0:(-?\d+)\s*$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kafka-get-offsets --time %d prints no offset for tiered-0:\n%s", ts, out)
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		return v
	}
	mustList := func(t *testing.T, ts int64) int64 {
		t.Helper()
		v, err := list(ts)
		if err != nil {
			t.Fatalf("ListOffsets %d: %v", ts, err)
		}
		return v
	}
	for _, tc := range []struct {
		ts   int64
		want int64
	}{{-1, records}, {-2, 0}, {-3, maxAt}} {
		t.Run(fmt.Sprintf("time %d", tc.ts), func(t *testing.T) {
			if got := tool(t, tc.ts); got != tc.want {
				t.Errorf("kafka-get-offsets --time %d = %d, want %d", tc.ts, got, tc.want)
			}
		})
	}
	for _, ts := range []int64{-4, -5, -6} {
		t.Run(fmt.Sprintf("time %d", ts), func(t *testing.T) {
			before := mustList(t, ts)
			got := tool(t, ts)
			after := mustList(t, ts)
			if got < before || got > after || got <= 0 || got >= records {
				t.Errorf("kafka-get-offsets --time %d = %d; franz-go listed %d before and %d after", ts, got, before, after)
			}
			if ts == -5 {
				// The last uploaded offset is one below the first pending upload.
				if pending := mustList(t, -6); got+1 > pending {
					t.Errorf("latest tiered %d, yet the earliest pending upload is %d afterwards", got, pending)
				}
			}
		})
	}
}
