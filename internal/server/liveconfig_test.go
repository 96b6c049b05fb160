package server

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// TestTopicConfigChangeReachesLiveLog: a topic config altered through the
// Kafka API applies to the partition's open log, not only after a restart.
// Each case produces under the config the topic was created with, alters it
// and checks that what follows obeys the new value.
func TestTopicConfigChangeReachesLiveLog(t *testing.T) {
	value := make([]byte, 500)
	rand.Read(value) // incompressible: kgo compresses with snappy by default
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		create map[string]string
		alter  map[string]string
		before int // records produced before the alter; as many after
		// stamp is the records' own timestamp; zero: the producer's clock.
		stamp time.Time
		check func(t *testing.T, adm *kadm.Client, addr, topic string)
	}{
		{
			name:   "retention.bytes",
			create: map[string]string{"internal.segment.bytes": "2048"},
			alter:  map[string]string{"retention.bytes": "4096"},
			before: 20,
			check:  logStartMoves,
		},
		{
			// One 1 GiB segment holds everything until the new size rolls it,
			// which is when retention.bytes (set from the start) can delete.
			name:   "segment.bytes",
			create: map[string]string{"retention.bytes": "4096"},
			alter:  map[string]string{"internal.segment.bytes": "2048"},
			before: 20,
			check:  logStartMoves,
		},
		{
			// A record stamped in 2001 is past the default retention.ms: once
			// the next append rolls its segment (segment.ms, from that stamp),
			// the 50 ms cleanup could delete it before the read.
			name:   "message.timestamp.type",
			create: map[string]string{"retention.ms": "-1"},
			alter:  map[string]string{"message.timestamp.type": "LogAppendTime"},
			before: 1,
			stamp:  old,
			check: func(t *testing.T, _ *kadm.Client, addr, topic string) {
				recs := consumeAll(t, addr, topic, 2)
				if !recs[0].Timestamp.Equal(old) {
					t.Fatalf("record before the alter has timestamp %v, want its own %v", recs[0].Timestamp, old)
				}
				if recs[1].Timestamp.Equal(old) || recs[1].Attrs.TimestampType() != 1 {
					t.Fatalf("record after the alter has timestamp %v (type %d), want the broker's (LogAppendTime)", recs[1].Timestamp, recs[1].Attrs.TimestampType())
				}
			},
		},
	}
	cfg := nodeConfig(t.TempDir())
	cfg.LogCleanupInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topic := "live-" + tc.name
			cl, adm := n.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
			create := map[string]*string{}
			for k, v := range tc.create {
				create[k] = &v
			}
			if r, err := adm.CreateTopic(ctx, 1, 1, create, topic); err != nil || r.Err != nil {
				t.Fatalf("create: %v %v", err, r.Err)
			}
			produce := func(count int) {
				for range count {
					if err := cl.ProduceSync(ctx, &kgo.Record{Value: value, Timestamp: tc.stamp}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			produce(tc.before)
			p, err := n.replicas.Partition(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			before := *p.Config()
			if start := p.LogStartOffset(); start != 0 {
				t.Fatalf("log start %d before the alter", start)
			}
			var alter []kadm.AlterConfig
			for k, v := range tc.alter {
				alter = append(alter, kadm.AlterConfig{Name: k, Value: &v})
			}
			if resps, err := adm.AlterTopicConfigs(ctx, alter, topic); err != nil || resps[0].Err != nil {
				t.Fatalf("alter: %v %+v", err, resps)
			}
			// The alter returns once the controller committed it; the broker
			// applies it to its partitions from its metadata image after.
			wait.For(t, "the broker to apply the new config", func() bool {
				return *p.Config() != before
			})
			produce(tc.before)
			tc.check(t, adm, n.KafkaAddr(), topic)
		})
	}
}

// logStartMoves waits for retention to move the topic's log start offset.
func logStartMoves(t *testing.T, adm *kadm.Client, _, topic string) {
	wait.For(t, "retention to move the log start offset", func() bool {
		offs, err := adm.ListStartOffsets(context.Background(), topic)
		if err != nil {
			return false
		}
		o, _ := offs.Lookup(topic, 0)
		return o.Offset > 0
	})
}
