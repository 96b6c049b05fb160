package share

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicStoreLoadNeedsOnlyItsPartition: a load reads the key's own partition of
// the state topic, so another state partition without a leader (its only in-sync
// replica died) does not stop it. kfake answers ListOffsets with
// LEADER_NOT_AVAILABLE for every state partition but the key's.
func TestTopicStoreLoadNeedsOnlyItsPartition(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const partitions = 4
	s, err := NewTopicStore(c.ListenAddrs(), partitions)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := Key{Group: "g", TopicID: [16]byte{7}, Partition: 3}
	p := statePartition(k, partitions)
	want := Snapshot{LeaderEpoch: 2, Start: 5, Batches: []StateBatch{{First: 5, Last: 9, State: Acknowledged, DeliveryCount: 1}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produceState(ctx, t, s, k, encodeSnapshot(want))

	c.ControlKey(int16(kmsg.ListOffsets), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ListOffsetsRequest)
		others := false
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				others = others || rt.Topic != StateTopic || rp.Partition != p
			}
		}
		if !others {
			return nil, nil, false // the key's partition alone: kfake answers
		}
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.LeaderNotAvailable.Code
				if rt.Topic == StateTopic && rp.Partition == p {
					sp.ErrorCode, sp.Offset, sp.Timestamp = 0, 1, -1
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	got, found, err := s.Latest(lctx, k)
	if err != nil || !found {
		t.Fatalf("Load: found %v, err %v", found, err)
	}
	if got.LeaderEpoch != want.LeaderEpoch || got.Start != want.Start || len(got.Batches) != 1 || got.Batches[0] != want.Batches[0] {
		t.Fatalf("Load = %+v, want %+v", got, want)
	}
}

// TestTopicStoreCreatesStateTopic: the state topic is created as Kafka creates
// __share_group_state (replication factor 3, min.insync.replicas 2), capped to the
// brokers there are.
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
			if got["min.insync.replicas"] != tc.minISR || got["cleanup.policy"] != "compact" {
				t.Errorf("min.insync.replicas %q, cleanup.policy %q; want %q, compact", got["min.insync.replicas"], got["cleanup.policy"], tc.minISR)
			}
		})
	}
}

// TestTopicStoreLoadFencesOldStateEpoch: Latest reads a state topic written before
// the share coordinator checked writes: after an offset reset, a late snapshot of a
// leader that loaded the state before it does not come back, though written later
// and under a higher leader epoch; a value written before state epochs still loads.
func TestTopicStoreLoadFencesOldStateEpoch(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := NewTopicStore(c.ListenAddrs(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := Key{Group: "g", TopicID: [16]byte{9}, Partition: 0}

	// A version 0 value, as an older Strata wrote it.
	old := Snapshot{LeaderEpoch: 4, Start: 20, Batches: []StateBatch{{First: 20, Last: 21, State: Available, DeliveryCount: 1}}}
	v0 := legacyValue(old, 0)
	produceState(ctx, t, s, k, v0)
	got, found, err := s.Latest(ctx, k)
	if err != nil || !found || !reflect.DeepEqual(got, old) {
		t.Fatalf("load of a version 0 value: %+v %v %v", got, found, err)
	}

	reset := Snapshot{StateEpoch: NextStateEpoch(got, found), LeaderEpoch: 2, Start: 5}
	produceState(ctx, t, s, k, encodeSnapshot(reset))
	stale := old
	stale.LeaderEpoch = 6 // the old leader, moved on, writes what it held
	produceState(ctx, t, s, k, encodeSnapshot(stale))
	got, found, err = s.Latest(ctx, k)
	if err != nil || !found || !reflect.DeepEqual(got, reset) {
		t.Fatalf("load after a reset and a stale write: %+v %v %v, want %+v", got, found, err, reset)
	}
	next := Snapshot{StateEpoch: reset.StateEpoch, LeaderEpoch: 2, Start: 6}
	produceState(ctx, t, s, k, encodeSnapshot(next))
	if got, _, err = s.Latest(ctx, k); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("load after the new state's leader wrote: %+v %v, want %+v", got, err, next)
	}
}

// produceState writes a value of k straight to the state topic of a kfake
// cluster, as Strata wrote it before the share coordinator.
func produceState(ctx context.Context, t *testing.T, s *TopicStore, k Key, value []byte) {
	t.Helper()
	if err := s.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: StateTopic, Partition: statePartition(k, s.partitions), Key: encodeKey(k), Value: value}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
