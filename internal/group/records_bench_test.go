package group

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkShareHeartbeat measures one share heartbeat in a settled group of
// n members (steady: the member's state does not change), and a member
// joining and leaving it (churn: two changes, each bumping the group epoch).
// The clock stands still, so no new target is computed.
func BenchmarkShareHeartbeat(b *testing.B) {
	for _, n := range []int{16, 256, 1000} {
		r := newShareBenchRig(b, n)
		b.Run(fmt.Sprintf("steady/members=%d", n), func(b *testing.B) {
			defer checkNothingWritten(b, r.c, r.store)()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.heartbeat(b, i%n)
			}
		})
		b.Run(fmt.Sprintf("churn/members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.send(b, shareHeartbeatRequest("extra", joinEpoch))
				r.send(b, shareHeartbeatRequest("extra", leaveEpoch))
			}
		})
		r.c.Close()
	}
}

// shareBenchRig is a coordinator holding share group "g", settled: n members
// subscribed to topic t, at the epoch of their target.
type shareBenchRig struct {
	c      *Coordinator
	store  *memStore
	topics *fakeTopics
	epochs []int32
}

func newShareBenchRig(b testing.TB, n int) *shareBenchRig {
	r := &shareBenchRig{store: newMemStore(), topics: newFakeTopics(), epochs: make([]int32, n)}
	r.topics.set("t", 64)
	clock := &testClock{now: time.UnixMilli(1_700_000_000_000)}
	cfg := DefaultConfig()
	cfg.Topics, cfg.Now = r.topics, clock.Now
	r.c = New(cfg, r.store, nil)
	if err := loadAll(context.Background(), r.c, r.store); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		r.heartbeat(b, i)
	}
	clock.add(2 * cfg.withDefaults().ShareAssignmentInterval) // the next heartbeat computes the target
	for i := range n {
		r.heartbeat(b, i)
	}
	return r
}

// shareHeartbeatRequest is member's heartbeat at epoch, subscribing to t
// when it joins.
func shareHeartbeatRequest(member string, epoch int32) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
	if epoch == joinEpoch {
		req.SubscribedTopicNames = []string{"t"}
	}
	return req
}

// heartbeat sends member i's heartbeat at its epoch and takes the answer's.
func (r *shareBenchRig) heartbeat(b testing.TB, i int) {
	r.epochs[i] = r.send(b, shareHeartbeatRequest(fmt.Sprintf("m%d", i), r.epochs[i]))
}

// send sends req and returns the member's epoch it answers.
func (r *shareBenchRig) send(b testing.TB, req *kmsg.ShareGroupHeartbeatRequest) int32 {
	resp := r.c.ShareGroupHeartbeat(context.Background(), req)
	if resp.ErrorCode != 0 {
		b.Fatalf("%s at %d: %v", req.MemberID, req.MemberEpoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.MemberEpoch
}

// BenchmarkStreamsHeartbeat measures one streams heartbeat, reporting the
// tasks the member owns, in a settled group of n members (nothing changes).
func BenchmarkStreamsHeartbeat(b *testing.B) {
	for _, n := range []int{16, 256, 1000} {
		r := newStreamsBenchRig(b, n)
		b.Run(fmt.Sprintf("steady/members=%d", n), func(b *testing.B) {
			defer checkNothingWritten(b, r.c, r.store)()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.heartbeat(b, i%n)
			}
		})
		r.c.Close()
	}
}

// streamsBenchRig is a coordinator holding streams group "g", settled: n
// members, each a process of its own, owning the tasks of topic in's 64
// partitions.
type streamsBenchRig struct {
	c      *Coordinator
	store  *memStore
	topics *fakeTopics
	epochs []int32
	owned  [][]kmsg.TaskIDs
}

func newStreamsBenchRig(b testing.TB, n int) *streamsBenchRig {
	r := &streamsBenchRig{store: newMemStore(), topics: newFakeTopics(), epochs: make([]int32, n), owned: make([][]kmsg.TaskIDs, n)}
	r.topics.set("in", 64)
	r.c = New(Config{Topics: r.topics}, r.store, nil)
	if err := loadAll(context.Background(), r.c, r.store); err != nil {
		b.Fatal(err)
	}
	for range 3 { // join, then take the tasks the others released
		for i := range n {
			r.heartbeat(b, i)
		}
	}
	return r
}

// request is member i's heartbeat at its epoch, with the tasks it owns (and
// its process and the topology when it joins), a value so that a benchmark's
// stays on the stack.
func (r *streamsBenchRig) request(i int) kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", fmt.Sprintf("m%d", i), r.epochs[i], 60000
	if r.epochs[i] == joinEpoch {
		req.ProcessID = ptr(fmt.Sprintf("p%d", i))
		req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{
			Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"in"}}}}
	}
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = r.owned[i], []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	if req.ActiveTasks == nil {
		req.ActiveTasks = []kmsg.TaskIDs{}
	}
	return req
}

// heartbeat sends member i's heartbeat and takes the answer.
func (r *streamsBenchRig) heartbeat(b testing.TB, i int) {
	req := r.request(i)
	r.send(b, i, &req)
}

// send sends req, member i's, and takes the answer.
func (r *streamsBenchRig) send(b testing.TB, i int, req *kmsg.StreamsGroupHeartbeatRequest) {
	resp, _ := r.c.StreamsGroupHeartbeat(context.Background(), req)
	if resp.ErrorCode != 0 {
		b.Fatalf("m%d at %d: %v", i, r.epochs[i], kerr.ErrorForCode(resp.ErrorCode))
	}
	r.epochs[i] = resp.MemberEpoch
	if resp.ActiveTasks != nil {
		r.owned[i] = resp.ActiveTasks
	}
}

// checkNothingWritten returns what fails b if group "g"'s partition took a
// record since: a steady heartbeat has nothing to write.
func checkNothingWritten(b testing.TB, c *Coordinator, store *memStore) func() {
	part := PartitionFor("g", c.cfg.OffsetsTopicPartitions)
	before := len(store.log(part))
	return func() {
		if n := len(store.log(part)) - before; n != 0 {
			b.Fatalf("steady heartbeats wrote %d records", n)
		}
	}
}

// BenchmarkConsumerHeartbeat measures one KIP-848 heartbeat in a settled
// consumer group of n members (steady: nothing changes, so nothing is
// written), and a member joining and leaving it (churn: two new group epochs;
// the clock stands still, so no new target; records/op counts what both
// wrote). With subs=names every member subscribes to topic t by name;
// with subs=mixed every fourth member, and the joining one, subscribes with
// the pattern t.* instead. The catalog holds t and 32 other topics. Each
// sub-benchmark builds its own group, so one run alone builds only its own.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	for _, subs := range []string{"names", "mixed"} {
		for _, n := range []int{16, 256, 1000} {
			b.Run(fmt.Sprintf("steady/subs=%s/members=%d", subs, n), func(b *testing.B) {
				r := newConsumerBenchRig(b, subs, n)
				defer r.c.Close()
				defer checkNothingWritten(b, r.c, r.store)()
				b.ReportAllocs()
				defer reportCPU(b)()
				for i := 0; b.Loop(); i++ {
					m := &r.members[i%n]
					before := m.epoch
					r.heartbeat(b, m, false)
					if m.epoch != before {
						b.Fatalf("%s moved from epoch %d to %d: the group is not settled", m.id, before, m.epoch)
					}
				}
			})
			b.Run(fmt.Sprintf("churn/subs=%s/members=%d", subs, n), func(b *testing.B) {
				r := newConsumerBenchRig(b, subs, n)
				defer r.c.Close()
				defer reportRecords(b, r.c, r.store)()
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					extra := benchMember{id: "extra", regex: subs == "mixed"}
					r.heartbeat(b, &extra, false)
					extra.epoch = leaveEpoch
					r.heartbeat(b, &extra, false)
				}
			})
		}
	}
}

// reportRecords returns what reports the records group "g"'s partition took
// per op since it was called.
func reportRecords(b *testing.B, c *Coordinator, store *memStore) func() {
	part := PartitionFor("g", c.cfg.OffsetsTopicPartitions)
	before := len(store.log(part))
	return func() { b.ReportMetric(float64(len(store.log(part))-before)/float64(b.N), "records/op") }
}

// reportCPU returns what reports the process's CPU time (user and system, all
// threads, the garbage collector's included) per op since it was called: on a
// loaded machine steadier than wall time.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// consumerBenchRig is a coordinator holding consumer group "g", settled.
type consumerBenchRig struct {
	c       *Coordinator
	cfg     Config
	store   *memStore
	topics  *fakeTopics
	members []benchMember
}

// benchMember is what a benchmark's consumer knows of itself.
type benchMember struct {
	id    string
	regex bool // subscribes with the pattern t.*, not the name t
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func newConsumerBenchRig(b testing.TB, subs string, n int) *consumerBenchRig {
	topics := newFakeTopics()
	topics.set("t", 64)
	for i := range 32 {
		topics.set(fmt.Sprintf("other%d", i), 1)
	}
	clock := &testClock{now: time.UnixMilli(1_700_000_000_000)}
	cfg := DefaultConfig()
	cfg.Topics, cfg.Now = topics, clock.Now
	r := &consumerBenchRig{cfg: cfg, store: newMemStore(), topics: topics, members: make([]benchMember, n)}
	r.c = New(cfg, r.store, nil)
	if err := loadAll(context.Background(), r.c, r.store); err != nil {
		b.Fatal(err)
	}
	for i := range r.members {
		r.members[i] = benchMember{id: fmt.Sprintf("m%d", i), regex: subs == "mixed" && i%4 == 0}
		r.heartbeat(b, &r.members[i], true)
	}
	clock.add(2 * cfg.withDefaults().ConsumerAssignmentInterval) // the next heartbeat computes the target
	for range 3 {                                                // revoke, then take what the others released
		for i := range r.members {
			r.heartbeat(b, &r.members[i], true)
		}
	}
	return r
}

// heartbeat sends m's heartbeat: a join with its subscription at epoch 0, else
// with the partitions it owns when report is set, and takes the answer.
func (r *consumerBenchRig) heartbeat(b testing.TB, m *benchMember, report bool) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", m.id, m.epoch
	switch {
	case m.epoch == joinEpoch && m.regex:
		req.SubscribedTopicRegex, req.RebalanceTimeoutMillis, req.Topics = ptr("t.*"), 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case m.epoch == joinEpoch:
		req.SubscribedTopicNames, req.RebalanceTimeoutMillis, req.Topics = []string{"t"}, 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case report:
		req.Topics = m.owned
	}
	resp := r.c.ConsumerGroupHeartbeat(context.Background(), req)
	if resp.ErrorCode != 0 {
		b.Fatalf("%s at %d: %v", m.id, m.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = m.owned[:0]
		for _, t := range resp.Assignment.Topics {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
			m.owned = append(m.owned, rt)
		}
	}
}
