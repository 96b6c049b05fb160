package httpapi

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recovered runs f and returns what it panicked with, as net/http recovers a
// handler's panic.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestPanicUnderShareMemberLockReleasesIt makes a share poll panic in the
// partition-leader lookup, which runs with the instance's poll lock and the
// member's lock held, and checks that the next poll of the instance is
// answered: a panicking poll must leave both unlocked.
func TestPanicUnderShareMemberLockReleasesIt(t *testing.T) {
	const answerWithin = 15 * time.Second
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.ShareGroupHeartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ShareGroupHeartbeatRequest)
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(req.MemberID), 1, 1000
		resp.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{
			TopicPartitions: []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{{TopicID: [16]byte{1}, Partitions: []int32{0}}}}
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var armed atomic.Bool
	leaders := func(int32) (int32, bool) {
		if armed.Load() {
			panic("leader lookup failed")
		}
		return 0, false // no leader: the poll sends nothing
	}
	m := newShareMember(instanceKey{"workers", "c1"}, "jobs", cl, leaders,
		func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
	inst := &instance{share: m}
	call := pollCall{maxRecords: 1, assignmentWait: answerWithin}

	armed.Store(true)
	if p := recovered(func() { _, _ = inst.sharePoll(context.Background(), call) }); p == nil {
		t.Fatal("the poll did not panic")
	}
	armed.Store(false)

	polled := make(chan error, 1)
	go func() {
		_, err := inst.sharePoll(context.Background(), call)
		polled <- err
	}()
	select {
	case err := <-polled:
		if err != nil {
			t.Errorf("polling after the panic: %v", err)
		}
	case <-time.After(answerWithin):
		// The member stays locked: closing it would hang too.
		t.Fatalf("the instance's next poll was not answered in %v: the panic left it locked", answerWithin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	m.close(ctx)
}
