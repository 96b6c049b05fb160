package metrics

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// BenchmarkRequestHooks is the metrics cost of one produce request: its request
// and response hooks, the error scan of its response and the topic counters.
func BenchmarkRequestHooks(b *testing.B) {
	m := New(Config{})
	c := conn(1)
	m.OnConnOpen(c)
	req := &protocol.Request{Key: 0, Size: 1200}
	resp := kmsg.NewPtrProduceResponse()
	resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0}, {Partition: 1}}}}
	h := m.InstrumentHandler(stubHandler{protocol.Response{Msg: resp}})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.OnRequest(c, req)
			h.Handle(ctx, c, req)
			m.Produced("t", 0, 1000, 10)
			m.OnResponse(c, req, protocol.ResponseEvent{Total: 1e6, Bytes: 60})
		}
	})
}

// BenchmarkErrorScan walks a large Metadata response for error codes.
func BenchmarkErrorScan(b *testing.B) {
	resp := kmsg.NewPtrMetadataResponse()
	for range 100 {
		t := kmsg.NewMetadataResponseTopic()
		for p := range 10 {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(p)
			if p == 3 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			t.Partitions = append(t.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		forEachErrorCode(resp, func(int16) { n++ })
	}
	if n == 0 {
		b.Fatal("no error codes found")
	}
}
