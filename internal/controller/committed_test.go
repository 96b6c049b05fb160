package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A follower cut off from the leader has not applied a change the leader
// committed: WaitCommitted on the leader's high watermark does not return
// until the follower has it, and then its image holds the change.
func TestWaitCommittedFollowerLag(t *testing.T) {
	cl := newCluster(t, 3)
	cl.retry(func(c *Controller) error {
		_, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 1, Host: "127.0.0.1", Port: 9091})
		return err
	})
	l := cl.leader()
	f := (l + 1) % 3
	cl.trans[l].Disconnect(cl.addrs[f])
	cl.trans[f].Disconnect(cl.addrs[l])

	var hw int64
	cl.retry(func(c *Controller) error {
		if res, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "late", NumPartitions: 1, ReplicationFactor: 1}}, false); err != nil {
			return err
		} else if res[0].Err != nil {
			return res[0].Err
		}
		q, err := c.Quorum(ctxT(t))
		hw = q.HighWatermark
		return err
	})
	follower := cl.nodes[f]
	if follower.IsLeader() {
		t.Fatalf("the cut-off node %d leads", f+1)
	}
	if follower.Image().Topic("late") != nil {
		t.Fatal("the cut-off follower has the topic created without it")
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := follower.WaitCommitted(short, uint64(hw)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCommitted on the cut-off follower = %v, want the deadline", err)
	}

	cl.connectAll()
	if err := follower.WaitCommitted(ctxT(t), uint64(hw)); err != nil {
		t.Fatalf("WaitCommitted after reconnecting: %v", err)
	}
	if follower.Image().Topic("late") == nil {
		t.Fatal("WaitCommitted returned before the follower applied the topic")
	}
}

// A high watermark that ends in entries that never reach the state machine
// (the bootstrap configuration, a leader's no-op, barriers) is reached by
// every node although no image has that offset.
func TestWaitCommittedRaftEntriesOnly(t *testing.T) {
	cl := newCluster(t, 3)
	var q QuorumState
	cl.retry(func(c *Controller) (err error) {
		q, err = c.Quorum(ctxT(t))
		return err
	})
	for i, c := range cl.nodes {
		if off := c.Image().Offset(); off >= uint64(q.HighWatermark) {
			t.Fatalf("node %d image offset %d >= high watermark %d: nothing to test", i+1, off, q.HighWatermark)
		}
		if err := c.WaitCommitted(ctxT(t), uint64(q.HighWatermark)); err != nil {
			t.Fatal(fmt.Errorf("node %d: %w", i+1, err))
		}
	}
}
