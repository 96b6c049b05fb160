package group

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// committedMap returns a group's committed offsets.
func committedMap(t testing.TB, c *Coordinator, group string) map[topicPartition]int64 {
	offs, err := c.CommittedOffsets(group)
	if err != nil {
		t.Fatalf("CommittedOffsets(%s): %v", group, err)
	}
	m := make(map[topicPartition]int64, len(offs))
	for _, o := range offs {
		m[topicPartition{o.Topic, o.Partition}] = o.Offset
	}
	return m
}

// lastInLog returns the latest offset of each key of group in partition p's log.
func lastInLog(t testing.TB, store *memStore, p int32, group string) map[topicPartition]int64 {
	r := newReplayed()
	for _, rec := range store.log(p) {
		if err := r.apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	m := map[topicPartition]int64{}
	for tp, o := range r.offsets[group] {
		m[tp] = o.offset
	}
	return m
}

// TestConcurrentCommits races committers on the same key, round after round, while
// readers run. Whatever order the commits land in, what the coordinator serves must
// be what the log says (the per-group write queue keeps apply order = log order),
// and a reload must see the same.
func TestConcurrentCommits(t *testing.T) {
	const group, writers, rounds = "g", 4, 40
	store := newMemStore()
	store.jitter = true
	c := newTestCoordinator(t, store)
	p := PartitionFor(group, 50)

	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = 7, group
			c.OffsetFetch(context.Background(), req)
			c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
			c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{group}})
		}
	})
	for round := range rounds {
		tp := topicPartition{"t", int32(round % 2)}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				resp := simpleCommit(c, group, 9, map[topicPartition]int64{tp: int64(round*writers + w)})
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Errorf("commit: %v", kerr.ErrorForCode(code))
				}
			})
		}
		close(start)
		wg.Wait()
		if mem, log := committedMap(t, c, group), lastInLog(t, store, p, group); !maps.Equal(mem, log) {
			t.Fatalf("round %d: coordinator serves %v, log holds %v", round, mem, log)
		}
	}
	close(stop)
	readers.Wait()

	before := committedMap(t, c, group)
	c.Close()
	c = newTestCoordinator(t, store)
	defer c.Close()
	if after := committedMap(t, c, group); !maps.Equal(before, after) {
		t.Errorf("before reload %v, after %v", before, after)
	}
}

// TestOffsetsModel checks commits, OffsetDelete and DeleteGroups of offsets-only
// groups against a map, across reloads.
func TestOffsetsModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := newMemStore()
		c := newTestCoordinator(t, store)
		defer func() { c.Close() }()
		model := map[string]map[topicPartition]int64{}
		group := rapid.SampledFrom([]string{"a", "b", "c"})
		tpGen := rapid.Custom(func(rt *rapid.T) topicPartition {
			return topicPartition{rapid.SampledFrom([]string{"x", "y"}).Draw(rt, "topic"), rapid.Int32Range(0, 2).Draw(rt, "partition")}
		})
		ctx := context.Background()
		rt.Repeat(map[string]func(*rapid.T){
			"commit": func(rt *rapid.T) {
				g, tp, off := group.Draw(rt, "group"), tpGen.Draw(rt, "tp"), rapid.Int64Range(0, 100).Draw(rt, "offset")
				resp := simpleCommit(c, g, 9, map[topicPartition]int64{tp: off})
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					rt.Fatalf("commit: %v", kerr.ErrorForCode(code))
				}
				if model[g] == nil {
					model[g] = map[topicPartition]int64{}
				}
				model[g][tp] = off
			},
			"offsetDelete": func(rt *rapid.T) {
				g, tp := group.Draw(rt, "group"), tpGen.Draw(rt, "tp")
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Group = g
				req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: tp.topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: tp.partition}}}}
				resp := c.OffsetDelete(ctx, req)
				want := int16(0)
				if model[g] == nil {
					want = kerr.GroupIDNotFound.Code
				}
				if resp.ErrorCode != want {
					rt.Fatalf("OffsetDelete %s: %v, want %v", g, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(want))
				}
				// A group left without offsets stays, Empty, for the
				// retention check.
				delete(model[g], tp)
			},
			"deleteGroup": func(rt *rapid.T) {
				g := group.Draw(rt, "group")
				resp := c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Groups: []string{g}})
				want := int16(0)
				if model[g] == nil {
					want = kerr.GroupIDNotFound.Code
				}
				if code := resp.Groups[0].ErrorCode; code != want {
					rt.Fatalf("DeleteGroups %s: %v, want %v", g, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
				}
				delete(model, g)
			},
			"reload": func(rt *rapid.T) {
				c.Close()
				c = newTestCoordinator(t, store)
				// An offsets-only group without offsets is replayed
				// from its old commits, as in Kafka.
			},
			"": func(rt *rapid.T) {
				for _, g := range []string{"a", "b", "c"} {
					offs, err := c.CommittedOffsets(g)
					got := map[topicPartition]int64{}
					for _, o := range offs {
						got[topicPartition{o.Topic, o.Partition}] = o.Offset
					}
					if (err != nil) != (model[g] == nil) || !maps.Equal(got, model[g]) {
						rt.Fatalf("%s: got %v (err %v), model %v", g, got, err, model[g])
					}
				}
			},
		})
	})
}

func BenchmarkOffsetCommit(b *testing.B) {
	c := newTestCoordinator(b, newMemStore())
	defer c.Close()
	offsets := map[topicPartition]int64{}
	for p := range int32(8) {
		offsets[topicPartition{"topic", p}] = 1
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		simpleCommit(c, fmt.Sprintf("g%d", i%16), 9, offsets)
	}
}

func BenchmarkHeartbeat(b *testing.B) {
	c := newTestCoordinator(b, newMemStore())
	defer c.Close()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jr := c.JoinGroup(context.Background(), join)
	sync := &kmsg.SyncGroupRequest{Group: "g", MemberID: jr.MemberID, Generation: jr.Generation}
	c.SyncGroup(context.Background(), sync)
	hb := &kmsg.HeartbeatRequest{Group: "g", MemberID: jr.MemberID, Generation: jr.Generation}
	b.ReportAllocs()
	for b.Loop() {
		if r := c.Heartbeat(context.Background(), hb); r.ErrorCode != 0 {
			b.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
