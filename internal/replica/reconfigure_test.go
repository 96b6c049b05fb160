package replica

import (
	"io"
	"log/slog"
	"testing"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestApplyReconfiguresOpenLog: a topic config change applied to an open log
// reaches it (LogAppendTime here), also when the change sets or removes
// flush.messages and flush.ms, whose switch of flush mode waits for the next
// open: the rest of the change must not be refused with it.
func TestApplyReconfiguresOpenLog(t *testing.T) {
	tests := []struct {
		name   string
		create map[string]string // the topic's config before the change
		change map[string]string
	}{
		{"timestamp type", nil, map[string]string{"message.timestamp.type": "LogAppendTime"}},
		{"with flush.messages on a group-commit log", nil,
			map[string]string{"message.timestamp.type": "LogAppendTime", "flush.messages": "1"}},
		{"with flush.ms removed from an interval log", map[string]string{"flush.ms": "1000"},
			map[string]string{"message.timestamp.type": "LogAppendTime", "flush.ms": "9223372036854775807"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(vfs.NewMem(), "/logs", 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			id := metadata.UUID{7}
			recs := []metadata.Record{
				&metadata.TopicRecord{Name: "t", ID: id},
				&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
			}
			for k, v := range tc.create {
				recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: k, Value: v})
			}
			recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
			img, err := metadata.ApplyAll(metadata.NewImage(), recs)
			if err != nil {
				t.Fatal(err)
			}
			img = img.WithOffset(1)
			if err := m.Apply(img); err != nil {
				t.Fatal(err)
			}
			var change []metadata.Record
			for k, v := range tc.change {
				change = append(change, &metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: k, Value: v})
			}
			next, err := metadata.ApplyAll(img, change)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Apply(next.WithOffset(2)); err != nil {
				t.Fatal(err)
			}
			p, err := m.Partition("t", 0)
			if err != nil {
				t.Fatal(err)
			}
			info, err := p.Log().Append(batchtest.Build(batchtest.Options{FirstTimestamp: 5, Records: batchtest.Values(1, 10)}), 0)
			if err != nil {
				t.Fatal(err)
			}
			if info.LogAppendTime < 0 {
				t.Fatal("the append kept its own timestamp: the change did not reach the log")
			}
		})
	}
}
