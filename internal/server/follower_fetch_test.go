package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/wait"
)

// servedBy counts the record batches a consumer read, by the broker that
// served them (kgo's HookFetchBatchRead).
type servedBy struct {
	mu sync.Mutex
	n  map[int32]int
}

func (s *servedBy) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, _ kgo.FetchBatchMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[meta.NodeID]++
}

func (s *servedBy) counts() map[int32]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]int{}
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

// TestFollowerFetching (KIP-392): three brokers on racks a, b and c, with
// --replica-selector-class RackAwareReplicaSelector. A consumer with
// kgo.Rack("b") is pointed by the leader (broker 1) at the in-sync follower
// on rack b and reads every record from broker 2, including records written
// after it started (the follower serves up to its high-water mark and wakes
// long polls when it moves); a consumer without a rack reads from the leader.
// On a cluster without the selector, a rack-b consumer reads from the leader.
func TestFollowerFetching(t *testing.T) {
	for _, selector := range []bool{true, false} {
		t.Run(fmt.Sprintf("selector=%v", selector), func(t *testing.T) {
			racks := []string{"a", "b", "c"}
			c := startCluster(t, 3, func(i int, cfg *config.Config) {
				cfg.Rack = racks[i]
				if selector {
					cfg.ReplicaSelectorClass = config.RackAwareReplicaSelector
				}
			})
			cl, adm := c.client(kgo.DefaultProduceTopic("near"), kgo.RequiredAcks(kgo.AllISRAcks()))
			ctx := context.Background()
			if _, err := adm.CreateTopic(ctx, 1, 3, nil, "near"); err != nil {
				t.Fatal(err)
			}
			if err := assign(t, adm, "near", []int32{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "broker 1 to lead near-0", func() bool {
				_, _ = adm.ElectLeaders(ctx, 0, nil)
				return c.leaderOf(adm, "near", 0) == 0
			})
			produce := func(from, n int) {
				var recs []*kgo.Record
				for i := from; i < from+n; i++ {
					recs = append(recs, &kgo.Record{Value: fmt.Append(nil, i)})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			produce(0, 50)

			consume := func(rack string, want int) map[int32]int {
				hook := &servedBy{n: map[int32]int{}}
				opts := []kgo.Opt{kgo.ConsumeTopics("near"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.WithHooks(hook), kgo.FetchMaxWait(time.Second)}
				if rack != "" {
					opts = append(opts, kgo.Rack(rack))
				}
				read, _ := c.client(opts...)
				seen := map[string]bool{}
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				for len(seen) < want {
					fs := read.PollFetches(pctx)
					if pctx.Err() != nil {
						t.Fatalf("rack %q: read %d of %d records (served by %v)", rack, len(seen), want, hook.counts())
					}
					fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
					if len(seen) == 50 && want > 50 {
						produce(50, want-50) // read at the tip: the follower's long poll wakes
					}
				}
				return hook.counts()
			}

			got := consume("b", 80)
			if selector && (got[2] == 0 || got[1] != 0 || got[3] != 0) {
				t.Errorf("rack b consumer: batches served by %v, want all by broker 2", got)
			}
			if !selector && (got[1] == 0 || got[2] != 0) {
				t.Errorf("rack b consumer without a selector: batches served by %v, want all by leader 1", got)
			}
			if got := consume("", 80); got[1] == 0 || got[2] != 0 || got[3] != 0 {
				t.Errorf("consumer without a rack: batches served by %v, want all by leader 1", got)
			}
		})
	}
}
