package group

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// panicTopic is the topic panickyTopics fails on.
const panicTopic = "boom"

// panickyTopics is a topic catalog that panics when asked about panicTopic
// while armed. Heartbeats consult the catalog with their group locked, so it
// is a fault under the lock that the public API can cause.
type panickyTopics struct {
	*fakeTopics
	armed atomic.Bool
}

func (p *panickyTopics) Topic(name string) ([16]byte, int32, bool) {
	if name == panicTopic && p.armed.Load() {
		panic("topic catalog failed")
	}
	return p.fakeTopics.Topic(name)
}

// recovered runs f and returns what it panicked with, as the broker's
// connection recovers a handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderGroupLockReleasesIt makes a heartbeat panic with its group
// locked and checks that the next request to the group is still answered: a
// panicking request must not leave its group locked.
func TestPanicUnderGroupLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// panics sends a request that asks the catalog about panicTopic.
		panics func(c *Coordinator)
		// next describes the group, returning the group's error code.
		next func(c *Coordinator) int16
	}{{
		name: "share heartbeat",
		panics: func(c *Coordinator) {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", "m", []string{panicTopic}
			c.ShareGroupHeartbeat(ctx, req)
		},
		next: func(c *Coordinator) int16 {
			return c.ShareGroupDescribe(ctx, &kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"g"}}).Groups[0].ErrorCode
		},
	}, {
		name: "streams heartbeat",
		panics: func(c *Coordinator) {
			req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.ProcessID = "g", "m", 60000, ptr("p")
			req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{
				Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{panicTopic}}}}
			req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
			c.StreamsGroupHeartbeat(ctx, req)
		},
		next: func(c *Coordinator) int16 {
			return c.StreamsGroupDescribe(ctx, &kmsg.StreamsGroupDescribeRequest{Groups: []string{"g"}}).Groups[0].ErrorCode
		},
	}, {
		name: "consumer heartbeat",
		panics: func(c *Coordinator) {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.RebalanceTimeoutMillis = "g", "m", 10000
			req.SubscribedTopicNames, req.Topics = []string{panicTopic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			c.ConsumerGroupHeartbeat(ctx, req)
		},
		next: func(c *Coordinator) int16 {
			return c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).Groups[0].ErrorCode
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			topics := &panickyTopics{fakeTopics: newFakeTopics()}
			topics.set(panicTopic, 4)
			cfg := DefaultConfig()
			cfg.Topics = topics
			store := newMemStore()
			c := New(cfg, store, nil)
			if err := loadAll(ctx, c, store); err != nil {
				t.Fatal(err)
			}

			topics.armed.Store(true)
			if p := recovered(func() { tc.panics(c) }); p == nil {
				t.Fatal("the request did not panic")
			}
			topics.armed.Store(false)

			answered := make(chan int16, 1)
			go func() { answered <- tc.next(c) }()
			select {
			case code := <-answered:
				if code != 0 {
					t.Errorf("describing the group after the panic: %v", kerr.ErrorForCode(code))
				}
			case <-time.After(answerWithin):
				// The group stays locked: Close would hang on it too.
				t.Fatalf("the group's next request was not answered in %v: the panic left it locked", answerWithin)
			}
			c.Close()
		})
	}
}
