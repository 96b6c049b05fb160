package share

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTopicStoreCreatesStateTopic: the state topic is created as Kafka creates
// __share_group_state (replication factor 3, min.insync.replicas 2, capped to the
// brokers there are; 100 MiB segments, the producer's compression) but
// compacted.
func TestTopicStoreCreatesStateTopic(t *testing.T) {
	for _, tc := range []struct {
		brokers int
		rf      int
		minISR  string
	}{{1, 1, "1"}, {2, 2, "2"}, {3, 3, "2"}, {4, 3, "2"}} {
		t.Run(fmt.Sprintf("%d brokers", tc.brokers), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(tc.brokers))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := NewTopicStore(c.ListenAddrs(), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.ensure(ctx); err != nil {
				t.Fatalf("ensure: %v", err)
			}
			adm := kadm.NewClient(s.cl)
			td, err := adm.ListTopics(ctx, StateTopic)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(td[StateTopic].Partitions[0].Replicas); got != tc.rf {
				t.Errorf("replication factor %d, want %d", got, tc.rf)
			}
			rc, err := adm.DescribeTopicConfigs(ctx, StateTopic)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := rc.On(StateTopic, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, c := range cfg.Configs {
				got[c.Key] = c.MaybeValue()
			}
			for k, want := range map[string]string{"min.insync.replicas": tc.minISR, "cleanup.policy": "compact",
				"segment.bytes": "104857600", "compression.type": "producer"} {
				if got[k] != want {
					t.Errorf("%s %q, want %q", k, got[k], want)
				}
			}
		})
	}
}
