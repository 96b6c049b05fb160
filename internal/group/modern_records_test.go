package group

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// testClock is a Config.Now a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// recordsRig runs a coordinator over a memStore, with a topic catalog and a
// clock a test changes, for tests of group "g"'s streams or share records.
type recordsRig struct {
	rt     *rapid.T
	cfg    Config
	topics *fakeTopics
	clock  *testClock
	store  *memStore
	part   int32
	c      *Coordinator
	old    *wholeGroupWriter
}

func newRecordsRig(rt *rapid.T, cfg Config, topics map[string]int32) *recordsRig {
	r := &recordsRig{rt: rt, cfg: cfg, topics: newFakeTopics(), clock: &testClock{now: time.UnixMilli(1_700_000_000_000)},
		store: newMemStore(), old: &wholeGroupWriter{written: map[string][]byte{}}}
	for name, n := range topics {
		r.topics.set(name, n)
	}
	r.cfg.Topics, r.cfg.Now = r.topics, r.clock.Now
	r.part = PartitionFor("g", r.cfg.withDefaults().OffsetsTopicPartitions)
	r.start()
	return r
}

func (r *recordsRig) start() {
	r.c = New(r.cfg, r.store, nil)
	if err := loadAll(context.Background(), r.c, r.store); err != nil {
		r.rt.Fatal(err)
	}
}

// restart starts the coordinator again from the log.
func (r *recordsRig) restart() {
	r.c.Close()
	r.start()
	r.old.written = replayModernKeys(r.store.log(r.part))
}

func (r *recordsRig) close()      { r.c.Close() }
func (r *recordsRig) logLen() int { return len(r.store.log(r.part)) }

// check fails the test unless the step appended (from log length before)
// what the whole-group writer would have: nothing unless persisted (the
// writer ran); failed: the append failed.
func (r *recordsRig) check(step, before int, persisted, failed bool) {
	appended := r.store.log(r.part)[before:]
	if !persisted {
		if len(appended) > 0 {
			r.rt.Fatalf("step %d: %d records appended without a heartbeat", step, len(appended))
		}
		return
	}
	r.old.check(r.rt, step, r.c, "g", appended, failed)
}

// wholeGroupWriter models the writer before changes were tracked: after every
// change it compared the whole group's records with what it had written, and
// a failed append left its keys unknown.
type wholeGroupWriter struct {
	written map[string][]byte
}

// write returns what that writer appended after a change that left the group
// at want, and keeps its view (failed: the append failed).
func (w *wholeGroupWriter) write(want map[string][]byte, failed bool) []Record {
	recs := diffRecords(want, w.written)
	slices.SortFunc(recs, recordOrder)
	for _, r := range recs {
		switch {
		case failed:
			w.written[string(r.Key)] = unknownValue
		case r.Value == nil:
			delete(w.written, string(r.Key))
		default:
			w.written[string(r.Key)] = r.Value
		}
	}
	return recs
}

// check fails rt unless appended (the records a change appended, failed: or
// tried to) are what the whole-group writer appends after that change.
func (w *wholeGroupWriter) check(rt *rapid.T, step int, c *Coordinator, id string, appended []Record, failed bool) {
	want := map[string][]byte{}
	if p, code := c.partitionOf(id); code == 0 {
		if g := p.lookup(c, id, false); g != nil {
			g.withLock(func() { want = g.wholeRecordsLocked() })
		}
	}
	wantRecs := w.write(want, failed)
	if failed {
		wantRecs = nil
	}
	got := modernRecordsOf(appended)
	if !slices.EqualFunc(got, wantRecs, func(a, b Record) bool {
		return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
	}) {
		rt.Fatalf("step %d: appended %v, the whole-group writer %v", step, got, wantRecs)
	}
}

// TestShareRecordsFollowChanges drives a share group through random joins
// (members joining again from another client among them), heartbeats,
// subscription and rack changes, leaves, topics deleted and created again,
// assignment intervals, failed appends and reloads, and checks that each change
// appends exactly what comparing the whole group would have, byte for byte and
// in order, and that the group's count of subscribers per topic stays what its
// members subscribe to.
func TestShareRecordsFollowChanges(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		topicNames := []string{"a", "b", "c"}
		r := newRecordsRig(rt, DefaultConfig(), map[string]int32{"a": 3, "b": 3, "c": 3})
		defer r.close()
		epochs := map[string]int32{}

		persisted := false // a heartbeat ran, so the writer compared
		heartbeat := func(member string, epoch int32, subscribe []string, edit ...func(*kmsg.ShareGroupHeartbeatRequest)) {
			persisted = true
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", member, epoch, subscribe
			for _, e := range edit {
				e(req)
			}
			client := Client{ID: rapid.SampledFrom([]string{"c0", "c1"}).Draw(rt, "client"), Host: "/127.0.0.1"}
			resp := r.c.ShareGroupHeartbeat(WithClient(context.Background(), client), req)
			switch {
			case resp.ErrorCode != 0 || epoch == leaveEpoch:
				delete(epochs, member)
			default:
				epochs[member] = resp.MemberEpoch
			}
		}
		for step := range 40 {
			before := r.logLen()
			failed := false
			persisted = false
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); op {
			case 0, 1: // a member joins, or heartbeats with a new subscription
				member := fmt.Sprintf("m%d", rapid.IntRange(0, 5).Draw(rt, "member"))
				subscribe := rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 1, 3, rapid.ID[string]).Draw(rt, "subscribe")
				heartbeat(member, epochs[member], subscribe)
			case 2: // a member heartbeats
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					heartbeat(member, epochs[member], nil)
				}
			case 3: // a member leaves
				if len(epochs) > 0 {
					heartbeat(rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member"), leaveEpoch, nil)
				}
			case 4: // time passes; a topic is deleted, created (again) or grows
				r.clock.add(time.Duration(rapid.IntRange(0, 1500).Draw(rt, "ms")) * time.Millisecond)
				r.topics.set(rapid.SampledFrom(topicNames).Draw(rt, "topic"), int32(rapid.IntRange(0, 4).Draw(rt, "partitions")))
			case 5: // a heartbeat whose append fails
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					r.store.setFail(errors.New("injected"))
					heartbeat(member, epochs[member], nil)
					r.store.setFail(nil)
					failed = true
				}
			case 6: // the coordinator restarts from the log; members carry on at their epochs
				r.restart()
				checkShareSubscribers(rt, step, r.c, "g")
				continue
			case 7: // a member's session expires, as its timer removes it
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					expireMember(r.c, "g", func(g *group) { g.removeShareMemberLocked(g.sg.members[member]) })
					persisted = true
					delete(epochs, member)
				}
			case 8: // a member heartbeats from a rack
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					rack := rapid.SampledFrom([]string{"r0", "r1"}).Draw(rt, "rack")
					heartbeat(member, epochs[member], nil, func(req *kmsg.ShareGroupHeartbeatRequest) { req.RackID = &rack })
				}
			case 9: // a member joins again, keeping its subscription
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					var topics []string
					withGroupLocked(r.c, "g", func(g *group) { topics = g.sg.members[member].topicNames })
					heartbeat(member, joinEpoch, topics)
				}
			}
			r.check(step, before, persisted, failed)
			checkShareSubscribers(rt, step, r.c, "g")
		}
	})
}

// checkShareSubscribers fails rt unless share group id's count of subscribers
// per topic, and the topics its classic view lists as subscribed, are what
// its members subscribe to.
func checkShareSubscribers(rt *rapid.T, step int, c *Coordinator, id string) {
	withGroupLocked(c, id, func(g *group) {
		if g.sg == nil {
			return
		}
		counts, topics := map[string]int{}, map[string]struct{}{}
		for _, m := range g.sg.members {
			for _, t := range m.topicNames {
				counts[t]++
				topics[t] = struct{}{}
			}
		}
		if !maps.Equal(g.sg.subscribers, counts) {
			rt.Fatalf("step %d: subscribers per topic %v, the members subscribe %v", step, g.sg.subscribers, counts)
		}
		if !g.subsKnown || !maps.Equal(g.subscribed, topics) {
			rt.Fatalf("step %d: classic view subscribed to %v (known %v), the members to %v", step, g.subscribed, g.subsKnown, topics)
		}
	})
}

// modernRecordsOf returns the consumer, streams and share group records among
// recs.
func modernRecordsOf(recs []Record) []Record {
	var out []Record
	for _, r := range recs {
		if len(r.Key) < 2 {
			continue
		}
		switch typ := int16(binary.BigEndian.Uint16(r.Key)); {
		case typ >= typeShareMember && typ <= typeShareCurrent, typ >= typeStreamsMetadata && typ <= typeStreamsTopology,
			typ >= typeConsumerMetadata && typ <= typeConsumerCurrent, typ == typeConsumerRegex:
			out = append(out, r)
		}
	}
	return out
}

// replayModernKeys is the latest value of each consumer, streams or share
// record key in recs.
func replayModernKeys(recs []Record) map[string][]byte {
	out := map[string][]byte{}
	for _, r := range modernRecordsOf(recs) {
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = r.Value
		}
	}
	return out
}

// TestStreamsRecordsFollowChanges is TestShareRecordsFollowChanges for a
// streams group with standby and warm-up tasks: random joins (static members
// among them, replacing one that left for now; members sharing a process),
// heartbeats reporting the tasks owned and the task offsets, members changing
// their rebalance timeout, rack, process, endpoint or tags, leaves, topics
// changing, failed appends and reloads.
func TestStreamsRecordsFollowChanges(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.GroupConfig = func(string) ConsumerGroupConfig {
			return ConsumerGroupConfig{StreamsStandbyReplicas: 1, StreamsWarmupReplicas: 2, StreamsAcceptableRecoveryLag: 100}
		}
		r := newRecordsRig(rt, cfg, map[string]int32{"in": 3, "app-chg": 3})
		defer r.close()
		epochs := map[string]int32{}
		owned := map[string][]kmsg.TaskIDs{}
		instances := map[string]string{} // member -> its instance id, if static

		persisted := false
		heartbeat := func(member, instance, process string, epoch int32, edit ...func(*kmsg.StreamsGroupHeartbeatRequest)) {
			persisted = true
			if epoch == joinEpoch {
				instances[member] = instance
				delete(owned, member)
			}
			instance = instances[member]
			req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", member, epoch, 60000
			if instance != "" {
				req.InstanceID = &instance
			}
			if epoch == joinEpoch {
				req.ProcessID = &process
				req.Topology = scriptTopology("wordcount", 0)
				req.Topology.Subtopologies[1].RepartitionSourceTopics = nil
				req.Topology.Subtopologies[1].CopartitionGroups = nil
				req.Topology.Subtopologies[1].SourceTopics = []string{"in"}
			}
			req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = owned[member], []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
			if req.ActiveTasks == nil {
				req.ActiveTasks = []kmsg.TaskIDs{}
			}
			for _, e := range edit {
				e(req)
			}
			resp, _ := r.c.StreamsGroupHeartbeat(context.Background(), req)
			switch {
			case resp.ErrorCode != 0 || epoch < 0:
				delete(epochs, member)
				delete(owned, member)
				delete(instances, member)
			default:
				epochs[member] = resp.MemberEpoch
				if resp.ActiveTasks != nil {
					owned[member] = resp.ActiveTasks
				}
			}
		}
		members := func() []string { return slices.Sorted(maps.Keys(epochs)) }
		for step := range 40 {
			before := r.logLen()
			failed := false
			persisted = false
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); op {
			case 0: // a member joins, maybe a static one (taking an instance's place)
				member := fmt.Sprintf("m%d", rapid.IntRange(0, 7).Draw(rt, "member"))
				instance := rapid.SampledFrom([]string{"", "i0", "i1"}).Draw(rt, "instance")
				heartbeat(member, instance, rapid.SampledFrom([]string{"p0", "p1"}).Draw(rt, "process"), joinEpoch)
			case 1, 2: // a member heartbeats with the tasks it owns
				if len(epochs) > 0 {
					member := rapid.SampledFrom(members()).Draw(rt, "member")
					heartbeat(member, "", "", epochs[member])
				}
			case 3: // a member leaves, or leaves for now
				if len(epochs) > 0 {
					member, epoch := rapid.SampledFrom(members()).Draw(rt, "member"), int32(leaveEpoch)
					if instances[member] != "" && rapid.Bool().Draw(rt, "for now") {
						epoch = staticLeaveEpoch
					}
					heartbeat(member, "", "", epoch)
				}
			case 4: // time passes; the input topic changes
				r.clock.add(time.Duration(rapid.IntRange(0, 1500).Draw(rt, "ms")) * time.Millisecond)
				r.topics.set("in", int32(rapid.IntRange(0, 4).Draw(rt, "partitions")))
			case 5: // a heartbeat whose append fails
				if len(epochs) > 0 {
					member := rapid.SampledFrom(members()).Draw(rt, "member")
					r.store.setFail(errors.New("injected"))
					heartbeat(member, "", "", epochs[member])
					r.store.setFail(nil)
					failed = true
				}
			case 6: // the coordinator restarts from the log
				r.restart()
				continue
			case 7: // a member's session expires, as its timer removes it
				if len(epochs) > 0 {
					member := rapid.SampledFrom(members()).Draw(rt, "member")
					expireMember(r.c, "g", func(g *group) { g.removeStreamsMemberLocked(g.st.members[member]) })
					persisted = true
					delete(epochs, member)
				}
			case 8: // a member heartbeats with other metadata
				if len(epochs) > 0 {
					member := rapid.SampledFrom(members()).Draw(rt, "member")
					heartbeat(member, "", "", epochs[member], drawStreamsMetadata(rt))
				}
			case 9: // a member reports its task offsets: the stateful tasks caught up or not
				if len(epochs) > 0 {
					member := rapid.SampledFrom(members()).Draw(rt, "member")
					heartbeat(member, "", "", epochs[member], func(req *kmsg.StreamsGroupHeartbeatRequest) {
						for p := range int32(3) {
							lag := rapid.SampledFrom([]int64{0, 1000}).Draw(rt, "lag")
							req.TaskOffsets = append(req.TaskOffsets, kmsg.TaskOffset{SubtopologyID: "1", Partition: p, Offset: 5000 - lag})
							req.TaskEndOffsets = append(req.TaskEndOffsets, kmsg.TaskOffset{SubtopologyID: "1", Partition: p, Offset: 5000})
						}
					})
				}
			}
			r.check(step, before, persisted, failed)
		}
	})
}

// drawStreamsMetadata draws a change of a streams member's metadata: its
// rebalance timeout, rack, process, endpoint or client tags.
func drawStreamsMetadata(rt *rapid.T) func(*kmsg.StreamsGroupHeartbeatRequest) {
	switch rapid.IntRange(0, 4).Draw(rt, "metadata") {
	case 0:
		timeout := rapid.SampledFrom([]int32{45000, 60000}).Draw(rt, "rebalance timeout")
		return func(req *kmsg.StreamsGroupHeartbeatRequest) { req.RebalanceTimeoutMillis = timeout }
	case 1:
		rack := rapid.SampledFrom([]string{"r0", "r1"}).Draw(rt, "rack")
		return func(req *kmsg.StreamsGroupHeartbeatRequest) { req.RackID = &rack }
	case 2:
		process := rapid.SampledFrom([]string{"p0", "p1", "p2"}).Draw(rt, "process")
		return func(req *kmsg.StreamsGroupHeartbeatRequest) { req.ProcessID = &process }
	case 3:
		port := rapid.SampledFrom([]uint16{8080, 8081}).Draw(rt, "port")
		return func(req *kmsg.StreamsGroupHeartbeatRequest) {
			req.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "localhost", Port: port}
		}
	}
	zone := rapid.SampledFrom([]string{"z0", "z1"}).Draw(rt, "zone")
	return func(req *kmsg.StreamsGroupHeartbeatRequest) {
		req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{{Key: "zone", Value: zone}}
	}
}

// expireMember removes a streams or share member with removeLocked as its
// session timer does and waits for the records.
func expireMember(c *Coordinator, id string, removeLocked func(*group)) {
	p, _ := c.partitionOf(id)
	g := p.lookup(c, id, false)
	done := make(chan error, 1)
	var queued bool
	g.withLock(func() {
		removeLocked(g)
		queued = g.persistRecordsLocked(func(err error) { done <- err })
	})
	c.awaitRecords(context.Background(), g, queued, done)
}

// TestStreamsMemberTakingAnotherInstance: a member of a streams group that
// joins again with the instance id of a static member that left for now is
// refused; it used to replace that member under its own id, leaving its own
// instance naming a member that was gone, and the next join with that
// instance panicked holding the group's lock.
func TestStreamsMemberTakingAnotherInstance(t *testing.T) {
	topics := newFakeTopics()
	topics.set("in", 3)
	c := New(Config{Topics: topics}, newMemStore(), nil)
	defer c.Close()
	if err := loadAll(context.Background(), c, newMemStore()); err != nil {
		t.Fatal(err)
	}
	heartbeat := func(member, instance string, epoch int32) *kmsg.StreamsGroupHeartbeatResponse {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", member, epoch, 60000
		req.InstanceID = &instance
		if epoch == joinEpoch {
			req.ProcessID = ptr(member)
			req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{
				Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"in"}}}}
		}
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		resp, _ := c.StreamsGroupHeartbeat(context.Background(), req)
		return resp
	}
	for _, step := range []struct {
		member, instance string
		epoch            int32
		want             int16
	}{
		{"m0", "i0", joinEpoch, 0},
		{"m1", "i1", joinEpoch, 0},
		{"m0", "i0", staticLeaveEpoch, 0},
		{"m1", "i0", joinEpoch, kerr.UnreleasedInstanceID.Code}, // m1 may not take i0
		{"m1", "i1", leaveEpoch, 0},
		{"m2", "i1", joinEpoch, 0}, // i1 is free again
		{"m3", "i0", joinEpoch, 0}, // and i0 still m0's to hand over
	} {
		if got := heartbeat(step.member, step.instance, step.epoch).ErrorCode; got != step.want {
			t.Fatalf("%s with %s at epoch %d: %v, want %v", step.member, step.instance, step.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(step.want))
		}
	}
}
