package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/wait"
)

// TestCommitPush: with Raft's idle AppendEntries an hour apart (CommitTimeout),
// a follower learns that the leader committed an entry only from the leader's
// next one. The commit push is that entry: every follower's image holds an
// acknowledged topic although nothing is proposed after it.
func TestCommitPush(t *testing.T) {
	cl := newCluster(t, 3, func(c *Config) { c.CommitTimeout = time.Hour })
	cl.retry(func(c *Controller) error {
		_, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 1, Host: "127.0.0.1", Port: 9091})
		return err
	})
	cl.retry(func(c *Controller) error {
		res, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "pushed", NumPartitions: 1, ReplicationFactor: 1}}, false)
		if err == nil {
			err = res[0].Err
		}
		return err
	})
	acked := cl.nodes[cl.leader()].Image()
	if acked.Topic("pushed") == nil {
		t.Fatal("the leader has not applied the acknowledged topic")
	}
	for i, c := range cl.nodes {
		wait.For(t, fmt.Sprintf("node %d to apply the acknowledged topic (offset %d)", i+1, acked.Offset()), func() bool {
			return c.Image().Topic("pushed") != nil
		})
	}
}
