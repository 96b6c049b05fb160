package group

import (
	"context"
	"fmt"
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
		topics := newFakeTopics()
		topics.set("t", 64)
		clock := &testClock{now: time.UnixMilli(1_700_000_000_000)}
		cfg := DefaultConfig()
		cfg.Topics, cfg.Now = topics, clock.Now
		store := newMemStore()
		c := New(cfg, store, nil)
		if err := loadAll(context.Background(), c, store); err != nil {
			b.Fatal(err)
		}
		heartbeat := func(b *testing.B, member string, epoch int32) int32 {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
			if epoch == joinEpoch {
				req.SubscribedTopicNames = []string{"t"}
			}
			r := c.ShareGroupHeartbeat(context.Background(), req)
			if r.ErrorCode != 0 {
				b.Fatalf("%s at %d: %v", member, epoch, kerr.ErrorForCode(r.ErrorCode))
			}
			return r.MemberEpoch
		}
		epochs := make([]int32, n)
		for i := range n {
			epochs[i] = heartbeat(b, fmt.Sprintf("m%d", i), joinEpoch)
		}
		clock.add(2 * cfg.withDefaults().ShareAssignmentInterval) // the next heartbeat computes the target
		for i := range n {
			epochs[i] = heartbeat(b, fmt.Sprintf("m%d", i), epochs[i])
		}
		b.Run(fmt.Sprintf("steady/members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				m := i % n
				epochs[m] = heartbeat(b, fmt.Sprintf("m%d", m), epochs[m])
			}
		})
		b.Run(fmt.Sprintf("churn/members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				heartbeat(b, "extra", joinEpoch)
				heartbeat(b, "extra", leaveEpoch)
			}
		})
		c.Close()
	}
}
