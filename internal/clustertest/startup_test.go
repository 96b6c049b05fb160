package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestClusterStartupTime measures, and logs, how long a fresh three-node
// cluster at the default broker heartbeat and session timeout takes from the
// exec of its last process to the first acks=all produce to a topic of
// replication factor 3 (docs/cluster.md, "Start-up"). It asserts no timing
// (the machine may be busy); it fails only if the cluster never gets there.
func TestClusterStartupTime(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithFlags(
		"--broker-heartbeat-interval", "1s", "--broker-session-timeout", "9s"))
	var last time.Time
	for _, n := range c.Nodes() {
		if s := n.StartedAt(); s.After(last) {
			last = s
		}
	}
	ready := time.Since(last)

	c.CreateTopic("startup", [][]int32{{1, 2, 3}}, minISR2)
	created := time.Since(last)
	cl := c.Client(kgo.DefaultProduceTopic("startup"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	testcluster.Eventually(t, 60*time.Second, "the first acks=all produce", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr()
	})
	t.Logf("from the last process's exec: every node ready (GET /readyz) after %v, topic created and its leader known everywhere after %v, first acks=all produce acknowledged after %v",
		ready.Round(time.Millisecond), created.Round(time.Millisecond), time.Since(last).Round(time.Millisecond))
}
