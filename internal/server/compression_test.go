package server

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicCompressionType: a topic's compression.type decides the codec its
// batches are stored with, from creation and after an IncrementalAlterConfigs,
// and consumers read the records unchanged.
func TestTopicCompressionType(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("squeezed"),
		kgo.ConsumeTopics("squeezed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zstd := "zstd"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": &zstd}, "squeezed"); err != nil {
		t.Fatal(err)
	}
	produce := func(v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("first")
	alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kadm.StringPtr("lz4")}}
	if _, err := adm.AlterTopicConfigs(ctx, alter, "squeezed"); err != nil {
		t.Fatal(err)
	}
	// The new value reaches the partition through the metadata log: produce
	// until a batch is stored with lz4.
	codecs := func() []int16 {
		details, err := adm.ListTopics(ctx, "squeezed")
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, "squeezed")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup("squeezed", 0)
		var out []int16
		for b := fetchBatches(t, ctx, cl, "squeezed", details["squeezed"].ID, end.Offset); len(b) > 0; {
			size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b[:size]); err != nil {
				t.Fatal(err)
			}
			out = append(out, rb.Attributes&7)
			b = b[size:]
		}
		return out
	}
	values := []string{"first"}
	for deadline := time.Now().Add(10 * time.Second); ; {
		v := "after " + time.Now().String()
		produce(v)
		values = append(values, v)
		got := codecs()
		if got[0] != 4 {
			t.Fatalf("first batch stored with codec %d, want zstd (4)", got[0])
		}
		if got[len(got)-1] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("codecs %v: no batch stored with lz4 (3) after the change", got)
		}
	}
	for i := 0; i < len(values); {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) != values[i] {
				t.Fatalf("record %d = %q, want %q", i, r.Value, values[i])
			}
			i++
		}
	}
}
