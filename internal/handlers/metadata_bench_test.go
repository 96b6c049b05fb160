package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// metadataImage has topics topics of partitions partitions each, their
// replicas spread over brokers 1-3.
func metadataImage(tb testing.TB, topics, partitions int) *metadata.Image {
	tb.Helper()
	recs := []metadata.Record{}
	for b := int32(1); b <= 3; b++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: b, Epoch: 1, Host: "127.0.0.1", Port: 9091 + b})
	}
	for i := range topics {
		id := metadata.UUID{byte(i), byte(i >> 8), byte(i >> 16), 7}
		recs = append(recs, &metadata.TopicRecord{Name: fmt.Sprintf("topic-%05d", i), ID: id})
		for p := range int32(partitions) {
			r := []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1}
			recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: r, ISR: r, Leader: r[0]})
		}
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// BenchmarkMetadataAll answers and encodes a Metadata v12 request for every
// topic of 10,000 partitions (one topic, and 2,500 topics of four): the
// allocations per request are what a client's metadata refresh costs the
// broker beyond the encoding itself.
func BenchmarkMetadataAll(b *testing.B) {
	for _, shape := range []struct{ topics, partitions int }{{1, 10000}, {2500, 4}} {
		b.Run(fmt.Sprintf("%dx%d", shape.topics, shape.partitions), func(b *testing.B) {
			img := metadataImage(b, shape.topics, shape.partitions)
			h := New(Config{NodeID: 1, ClusterID: "c"}, fakeCluster{img: img}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			preq := &protocol.Request{Key: req.Key(), Version: 12, Msg: req}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				resp := h.metadata(context.Background(), &protocol.ConnInfo{}, preq)
				resp.Msg.SetVersion(12)
				buf = resp.Msg.AppendTo(buf[:0])
			}
			b.ReportMetric(float64(len(buf)), "resp-B")
		})
	}
}

// TestMetadataAllocsIndependentOfTopics: answering a Metadata request for
// every topic allocates a bounded number of times, however many topics and
// partitions the image holds (topicDescriber), and every partition is there.
func TestMetadataAllocsIndependentOfTopics(t *testing.T) {
	for _, shape := range []struct{ topics, partitions int }{{1, 2000}, {500, 4}} {
		img := metadataImage(t, shape.topics, shape.partitions)
		h := New(Config{NodeID: 1, ClusterID: "c"}, fakeCluster{img: img}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		preq := &protocol.Request{Key: req.Key(), Version: 12, Msg: req}
		var resp *kmsg.MetadataResponse
		allocs := testing.AllocsPerRun(10, func() {
			resp = h.metadata(context.Background(), &protocol.ConnInfo{}, preq).Msg.(*kmsg.MetadataResponse)
		})
		if allocs > 20 {
			t.Errorf("%d topics of %d partitions: %.0f allocations per answer, want at most 20", shape.topics, shape.partitions, allocs)
		}
		if len(resp.Topics) != shape.topics {
			t.Fatalf("%d topics answered, want %d", len(resp.Topics), shape.topics)
		}
		for _, mt := range resp.Topics {
			want := img.Topic(*mt.Topic)
			if len(mt.Partitions) != shape.partitions || mt.TopicID != want.ID {
				t.Fatalf("topic %s: %d partitions, id %v", *mt.Topic, len(mt.Partitions), mt.TopicID)
			}
			for i, mp := range mt.Partitions {
				if p := want.Partitions[i]; mp.Partition != p.Index || mp.Leader != p.Leader || len(mp.ISR) != len(p.ISR) {
					t.Fatalf("topic %s partition %d: %+v", *mt.Topic, i, mp)
				}
			}
		}
	}
}
