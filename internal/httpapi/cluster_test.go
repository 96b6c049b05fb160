package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/freeport"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// freeAddr returns a loopback address free now, outside the ephemeral range
// (for the controller quorum, whose voters must know each other's addresses up
// front).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startCluster starts size in-process nodes, each a controller voter and a broker.
func startCluster(t *testing.T, size int) []*testNode {
	t.Helper()
	cfgs := make([]config.Config, size)
	var voters []string
	for i := range cfgs {
		cfg := nodeConfig(t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.ControllerAddr = freeAddr(t)
		cfg.ClusterID = "httpapi-test-cluster"
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.BrokerSessionTimeout = 2 * time.Second
		cfg.ReplicaLagTimeMax = 2 * time.Second
		voters = append(voters, fmt.Sprintf("%d@%s", cfg.NodeID, cfg.ControllerAddr))
		cfgs[i] = cfg
	}
	nodes := make([]*testNode, size)
	errs := make(chan error, size)
	for i := range cfgs {
		cfgs[i].Controllers = strings.Join(voters, ",")
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			n, err := server.Start(ctx, cfgs[i], testLogger().With("node", i+1), vfs.Default)
			if err == nil {
				nodes[i] = &testNode{Node: n, t: t, base: "http://" + n.HTTPAddr()}
			}
			errs <- err
		}()
	}
	var failed error
	for range size {
		if err := <-errs; err != nil {
			failed = err
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	return nodes
}

// TestCluster: on a three-node cluster every node's API reaches every partition
// and group: a topic created on one node is used on another, produce reaches
// partitions led elsewhere, a group is polled, committed and described from
// different nodes, and a partition without a leader answers 503 at once.
func TestCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	const topic, parts = "spread", 3
	nodes[2].must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": topic, "partitions": parts, "replication_factor": 1})

	leaders := make([]int32, parts)
	wait.For(t, "every node to see the topic with leaders", func() bool {
		for _, n := range nodes {
			var tv topicView
			r := n.do("GET", "/topics/"+topic, nil)
			if r.status != http.StatusOK {
				return false
			}
			r.json(t, &tv)
			for i, p := range tv.Partitions {
				if p.Leader < 1 || p.HighWatermark == nil {
					return false
				}
				leaders[i] = p.Leader
			}
		}
		return true
	})
	remote := -1 // a partition node 1 does not lead
	for p, l := range leaders {
		if l != 1 {
			remote = p
		}
	}
	if remote < 0 {
		t.Fatalf("node 1 leads every partition (%v): no remote produce to test", leaders)
	}

	for p := range parts {
		var res struct{ Partition, Offset int64 }
		nodes[0].must(http.StatusOK, "POST", "/produce", map[string]any{"topic": topic, "partition": p, "value": p}).json(t, &res)
		if res.Partition != int64(p) || res.Offset != 0 {
			t.Fatalf("produce to partition %d (leader %d) via node 1: %+v", p, leaders[p], res)
		}
	}
	var batch struct {
		Results []struct {
			Partition int32
			Offset    *int64
		}
	}
	nodes[0].must(http.StatusOK, "POST", "/topics/"+topic+"/records", map[string]any{"records": []map[string]any{
		{"partition": 0, "value": "b0"}, {"partition": 1, "value": "b1"}, {"partition": 2, "value": "b2"},
	}}).json(t, &batch)
	for _, r := range batch.Results {
		if r.Offset == nil || *r.Offset != 1 {
			t.Fatalf("batch via node 1: %+v", batch.Results)
		}
	}

	recs := nodes[1].pollN(map[string]any{"group": "cluster-group", "topic": topic}, 2*parts)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
	}
	if len(seen) != 2*parts {
		t.Fatalf("polled via node 2: %+v", recs)
	}
	nodes[1].must(http.StatusOK, "POST", "/commit", map[string]any{"group": "cluster-group"})
	g := nodes[2].group("cluster-group")
	for p := range int32(parts) {
		if c := g.committed(topic, p); c != 2 {
			t.Fatalf("node 3 sees commit %d for partition %d, want 2: %+v", c, p, g)
		}
	}
	var groups struct{ Groups []struct{ Group string } }
	nodes[0].must(http.StatusOK, "GET", "/groups", nil).json(t, &groups)
	if !strings.Contains(fmt.Sprint(groups), "cluster-group") {
		t.Fatalf("node 1 does not list the group: %+v", groups)
	}

	// A share-group member on node 1 acquires from every partition's leader, and
	// an acknowledgement sent to node 3 is forwarded to node 1, which holds it.
	nodes[0].must(http.StatusOK, "POST", "/groups/cluster-share/configs", map[string]any{"configs": map[string]string{"share.auto.offset.reset": "earliest"}})
	var shared sharePolled
	wait.For(t, "a share poll via node 1 to acquire every record", func() bool {
		var got sharePolled
		nodes[0].must(http.StatusOK, "POST", "/poll", map[string]any{"group": "cluster-share", "topic": topic, "share": true, "timeout_ms": 5000}).json(t, &got)
		shared.Records = append(shared.Records, got.Records...)
		return len(shared.Records) >= 2*parts
	})
	if len(shared.Records) != 2*parts {
		t.Fatalf("share polls via node 1: %+v", shared)
	}
	for _, r := range shared.Records {
		nodes[2].must(http.StatusOK, "POST", "/ack", map[string]any{"group": "cluster-share", "topic": topic, "partition": r.Partition, "offset": r.Offset, "result": "accept"})
	}

	// Stop the leader of the remote partition: with one replica it has no leader.
	down := leaders[remote] - 1
	nodes[down].Close()
	nodes[down] = nil
	wait.For(t, "the partition to lose its leader", func() bool {
		var tv topicView
		nodes[0].must(http.StatusOK, "GET", "/topics/"+topic, nil).json(t, &tv)
		return tv.Partitions[remote].Leader == -1 && tv.Partitions[remote].HighWatermark == nil
	})
	start := time.Now()
	r := nodes[0].do("POST", "/produce", map[string]any{"topic": topic, "partition": remote, "value": "lost"})
	if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "LEADER_NOT_AVAILABLE" || time.Since(start) > 5*time.Second {
		t.Fatalf("produce to a leaderless partition: %d %s after %v", r.status, r.body, time.Since(start))
	}
}
