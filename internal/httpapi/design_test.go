package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/wait"
)

// TestDesignAPIOnCluster sends the design's four requests exactly as the design
// writes them to a three-node cluster and checks the fields the design promises,
// then drives one HTTP consumer through all three nodes, as a client behind a load
// balancer would.
func TestDesignAPIOnCluster(t *testing.T) {
	cluster := startCluster(t, 3)
	// on gives the cluster's nodes to a subtest, failing that subtest.
	on := func(t *testing.T) []*testNode {
		out := make([]*testNode, len(cluster))
		for i, n := range cluster {
			out[i] = &testNode{Node: n.Node, t: t, base: n.base}
		}
		return out
	}

	t.Run("design requests", func(t *testing.T) {
		nodes := on(t)
		// POST /topics: {topic, partitions}; with three replicas and no
		// min_insync_replicas the answer says what applies and why it matters.
		var created struct {
			Topic             string
			Partitions        int32
			MinInsyncReplicas int32 `json:"min_insync_replicas"`
			Warning           string
		}
		nodes[0].must(http.StatusCreated, "POST", "/topics",
			`{ "topic": "orders", "partitions": 12, "replication_factor": 3, "retention": "7d" }`).json(t, &created)
		if created.Topic != "orders" || created.Partitions != 12 || created.MinInsyncReplicas != 1 ||
			!strings.Contains(created.Warning, "min_insync_replicas") {
			t.Fatalf("POST /topics: %+v", created)
		}

		// POST /produce: {partition, offset}.
		var produced struct{ Partition, Offset *int64 }
		nodes[1].must(http.StatusOK, "POST", "/produce",
			`{ "topic": "orders", "key": "order_123", "value": { "item": "book" }, "acks": "all" }`).json(t, &produced)
		if produced.Partition == nil || produced.Offset == nil || *produced.Offset != 0 {
			t.Fatalf("POST /produce: %s", fmt.Sprint(produced))
		}

		// GET /poll with a JSON body: a new group's first poll returns the record,
		// with no timeout_ms (it waits for the member's assignment).
		var polled struct {
			Records []struct {
				Partition *int64
				Offset    *int64
				Key       string
				Value     map[string]string
			}
		}
		nodes[2].must(http.StatusOK, "GET", "/poll", `{ "group": "billing", "topic": "orders", "max_records": 500 }`).json(t, &polled)
		if len(polled.Records) != 1 {
			t.Fatalf("GET /poll: %d records, want 1", len(polled.Records))
		}
		r := polled.Records[0]
		if *r.Partition != *produced.Partition || *r.Offset != 0 || r.Key != "order_123" || r.Value["item"] != "book" {
			t.Fatalf("GET /poll: %+v", r)
		}

		// POST /commit: {committed: true}, and the group resumes there.
		var committed struct{ Committed bool }
		body := fmt.Sprintf(`{ "group": "billing", "topic": "orders", "partition": %d, "offset": 84510 }`, *produced.Partition)
		nodes[0].must(http.StatusOK, "POST", "/commit", body).json(t, &committed)
		if !committed.Committed {
			t.Fatal("POST /commit: committed false")
		}
		if c := nodes[1].group("billing").committed("orders", int32(*produced.Partition)); c != 84510 {
			t.Fatalf("committed offset %d, want 84510", c)
		}
		// The design's other reading: processed up to 84510 commits 84511.
		body = fmt.Sprintf(`{ "group": "billing", "topic": "orders", "partition": %d, "processed": 84510 }`, *produced.Partition)
		nodes[1].must(http.StatusOK, "POST", "/commit", body)
		if c := nodes[2].group("billing").committed("orders", int32(*produced.Partition)); c != 84511 {
			t.Fatalf("committed offset %d after processed 84510, want 84511", c)
		}
		nodes[0].must(http.StatusOK, "DELETE", "/groups/billing/consumers/default", nil)
	})

	t.Run("one member over three nodes", func(t *testing.T) {
		nodes := on(t)
		const topic, parts, perPart = "lb", 3, 10
		nodes[0].must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": topic, "partitions": parts, "replication_factor": 3, "min_insync_replicas": 2})
		for p := range parts {
			nodes[p].produceN(topic, p, 0, perPart)
		}
		member := map[string]any{"group": "lb-group", "topic": topic, "consumer": "worker", "max_records": 4, "timeout_ms": 5000}
		seen := map[string]int{}
		owner := nodes[0].HTTPAddr() // the first poll's node holds the member
		for i := 0; len(seen) < parts*perPart; i++ {
			if i > 100 {
				t.Fatalf("read %d of %d records in 100 polls", len(seen), parts*perPart)
			}
			n := nodes[i%3]
			r := n.must(http.StatusOK, "POST", "/poll", member)
			if got := r.header.Get("Strata-Consumer-Node"); got != owner {
				t.Fatalf("poll %d via node %d: Strata-Consumer-Node %q, want %q", i, i%3+1, got, owner)
			}
			var ans struct{ Records []polledRecord }
			r.json(t, &ans)
			for _, rec := range ans.Records {
				seen[fmt.Sprintf("%d/%d", rec.Partition, rec.Offset)]++
			}
			// Commit the member's positions through the next node.
			nodes[(i+1)%3].must(http.StatusOK, "POST", "/commit", map[string]any{"group": "lb-group", "consumer": "worker"})
		}
		for k, c := range seen {
			if c != 1 {
				t.Errorf("record %s polled %d times", k, c)
			}
		}
		g := nodes[2].group("lb-group")
		if len(g.Members) != 1 {
			t.Fatalf("group has %d members, want the one worker: %+v", len(g.Members), g.Members)
		}
		for p := range int32(parts) {
			if c := g.committed(topic, p); c != perPart {
				t.Errorf("partition %d: committed %d, want %d", p, c, perPart)
			}
		}
		// Closing through another node closes the member where it lives.
		nodes[1].must(http.StatusOK, "DELETE", "/groups/lb-group/consumers/worker", nil)
		wait.For(t, "the group to empty", func() bool { return len(nodes[2].group("lb-group").Members) == 0 })
	})
}
