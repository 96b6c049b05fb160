package httpapi

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// TestShareMemberFollowsCoordinator: an HTTP share member whose group
// coordinator moves heartbeats the new one. The old coordinator answers
// NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE) and FindCoordinator names the
// new one; franz-go keeps its cached coordinator for a non-leave
// ShareGroupHeartbeat, so a member that let it route its heartbeats kept
// beating the old node until its session expired (campaign seed 5's stall,
// fixed in ea65f5e).
func TestShareMemberFollowsCoordinator(t *testing.T) {
	for _, moved := range []int16{kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code} {
		t.Run(kerr.ErrorForCode(moved).Error(), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "jobs"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			addrs := c.ListenAddrs()

			var mu sync.Mutex
			coordinator := int32(0)
			beats := map[int32]int{} // heartbeats answered by each node
			misdirected := 0         // heartbeats to a node that is no longer the coordinator
			c.ControlKey(int16(kmsg.FindCoordinator), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.FindCoordinatorRequest)
				resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
				mu.Lock()
				id := coordinator
				mu.Unlock()
				host, port, err := net.SplitHostPort(addrs[id])
				if err != nil {
					return nil, err, true
				}
				p, _ := strconv.Atoi(port)
				keys := req.CoordinatorKeys
				if len(keys) == 0 {
					keys = []string{req.CoordinatorKey} // before v4
				}
				for _, key := range keys {
					rc := kmsg.NewFindCoordinatorResponseCoordinator()
					rc.Key, rc.NodeID, rc.Host, rc.Port = key, id, host, int32(p)
					resp.Coordinators = append(resp.Coordinators, rc)
				}
				resp.NodeID, resp.Host, resp.Port = id, host, int32(p)
				return resp, nil, true
			})
			c.ControlKey(int16(kmsg.ShareGroupHeartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ShareGroupHeartbeatRequest)
				resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
				mu.Lock()
				defer mu.Unlock()
				if node := c.CurrentNode(); node != coordinator {
					misdirected++
					resp.ErrorCode = moved
					return resp, nil, true
				}
				beats[coordinator]++
				resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(req.MemberID), 1, 20
				return resp, nil, true
			})

			runShareMember(t, addrs)
			beatsAt := func(node int32) func() error {
				return func() error {
					mu.Lock()
					defer mu.Unlock()
					if beats[node] < 2 {
						return fmt.Errorf("node %d answered %d heartbeats (%d misdirected), want 2", node, beats[node], misdirected)
					}
					return nil
				}
			}
			wait.Eventually(t, 10*time.Second, "heartbeats at the first coordinator", beatsAt(0))
			mu.Lock()
			coordinator = 2 // the group's coordinator moves
			mu.Unlock()
			wait.Eventually(t, 10*time.Second, "heartbeats at the new coordinator", beatsAt(2))
		})
	}
}

// TestShareMemberRejoinsAForgottenGroup: an HTTP share member whose
// coordinator no longer knows its group (the coordinator moved: share-group
// membership is held in memory only), so that a heartbeat at the member's
// epoch is answered GROUP_ID_NOT_FOUND, joins again at epoch 0. It used to
// keep beating at its old epoch forever, keeping its old assignment while the
// group, formed again by other members, assigned nothing to it: campaign seed
// 5's partition 2 stalled for the rest of the run (session 13).
func TestShareMemberRejoinsAForgottenGroup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	known := false // whether the coordinator knows the group
	joins, notFound := 0, 0
	c.ControlKey(int16(kmsg.ShareGroupHeartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ShareGroupHeartbeatRequest)
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case req.MemberEpoch == 0:
			known = true
			joins++
		case !known:
			notFound++
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return resp, nil, true
		}
		resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(req.MemberID), 5, 20
		return resp, nil, true
	})
	runShareMember(t, c.ListenAddrs())
	joined := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if joins < n {
				return fmt.Errorf("%d joins, want %d (%d heartbeats answered GROUP_ID_NOT_FOUND)", joins, n, notFound)
			}
			return nil
		}
	}
	wait.Eventually(t, 10*time.Second, "the first join", joined(1))
	mu.Lock()
	known = false // the coordinator moved and forgot the group
	mu.Unlock()
	wait.Eventually(t, 10*time.Second, "a join after GROUP_ID_NOT_FOUND", joined(2))
}

// runShareMember starts the HTTP share member c1 of group workers on topic
// jobs, with a client of addrs; both stop when the test ends (before a
// cluster the test registered for cleanup earlier).
func runShareMember(t *testing.T, addrs []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	m := newShareMember(instanceKey{"workers", "c1"}, "jobs", cl, func(int32) (int32, bool) { return 0, false },
		func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
	t.Cleanup(func() {
		close(m.stop)
		<-m.done
		cl.Close()
	})
}

// TestShareMemberCloseHonoursContext: closing an HTTP share member whose
// coordinator does not answer its leave returns once the close's context is
// done. The leave used its own 10 s timeout, so a node's Abort (closing its
// HTTP consumers with a context already done) waited that long for the
// members it hosted when a power loss cut it off (the scripted share chaos
// run, session 14).
func TestShareMemberCloseHonoursContext(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	unanswered := make(chan struct{}) // the leave's answer waits for the test's end
	t.Cleanup(func() { close(unanswered) })
	var mu sync.Mutex
	joined := false
	c.ControlKey(int16(kmsg.ShareGroupHeartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ShareGroupHeartbeatRequest)
		if req.MemberEpoch == shareLeaveEpoch {
			c.SleepControl(func() { <-unanswered })
		}
		mu.Lock()
		joined = true
		mu.Unlock()
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(req.MemberID), 1, 20
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	m := newShareMember(instanceKey{"workers", "c1"}, "jobs", cl, func(int32) (int32, bool) { return 0, false },
		func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
	wait.Eventually(t, 10*time.Second, "the member joined", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !joined {
			return fmt.Errorf("no heartbeat yet")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	m.close(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("close with a context already done took %v", took)
	}
}
