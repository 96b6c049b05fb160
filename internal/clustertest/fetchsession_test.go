package clustertest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestIdleFollowersFetchInSessions: on an idle three-node cluster the
// followers' fetches are incremental (KIP-227): after the first full fetch a
// request names no partition and its answer carries none, so a request costs
// the same bytes whatever the number of partitions followed. Checked on the
// leaders' side too (Fetch request bytes received), and again after a node is
// killed and restarted: its followers' sessions on it are gone and the
// restarted node's sessions on the others are new. Without sessions each
// request named all of the 20 partitions a node follows from each leader,
// about 30 bytes each.
func TestIdleFollowersFetchInSessions(t *testing.T) {
	const (
		topic      = "idle"
		partitions = 60
	)
	c := testcluster.Start(t, 3)
	var assignment [][]int32
	for i := range partitions {
		l := int32(i%3) + 1
		assignment = append(assignment, []int32{l, l%3 + 1, (l+1)%3 + 1})
	}
	c.CreateTopic(topic, assignment, minISR2)
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range int32(partitions) {
		r := &kgo.Record{Topic: topic, Partition: i, Value: []byte("v")}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("producing to partition %d: %v", i, err)
		}
	}
	// moreFetches waits until every node has received and sent n more
	// replica fetches than in since, and returns the counts then.
	moreFetches := func(since map[int32]fetchCounts, n int64) map[int32]fetchCounts {
		t.Helper()
		var now map[int32]fetchCounts
		testcluster.Eventually(t, 60*time.Second, fmt.Sprintf("%d more replica fetches to and from each node", n), func() error {
			now = scrapeAll(t, c)
			for id := range now {
				if got := now[id].sub(since[id]); got.fetches < n || got.sent < n {
					return fmt.Errorf("node %d: %d fetches received, %d sent", id, got.fetches, got.sent)
				}
			}
			return nil
		})
		return now
	}
	// idle checks that the followers' fetches are an idle session's: small,
	// naming no partition and answered with almost none. The last high-water
	// marks of a restart or a leader move reach the followers in a few
	// rounds, more on a loaded machine, so it polls (with a deadline) for a
	// window of 10 fetches that meets the bounds; the full requests of
	// followers without sessions never do.
	idle := func(when string) {
		t.Helper()
		waitInSync(t, c, topic, assignment, true)
		before := moreFetches(scrapeAll(t, c), 3)
		testcluster.Eventually(t, 60*time.Second, when+": an idle window of follower fetches", func() error {
			after := moreFetches(before, 10)
			defer func() { before = after }()
			for id := range after {
				d := after[id].sub(before[id])
				t.Logf("%s, node %d: %d fetches received, %.0f bytes each; %d sent (%d full), %.2f partitions named and %.2f answered per request",
					when, id, d.fetches, float64(d.fetchBytes)/float64(d.fetches), d.sent, d.full,
					float64(d.named)/float64(d.sent), float64(d.answered)/float64(d.sent))
				// A request naming no partition is under 100 bytes; one naming
				// 20 was over 600.
				if perRequest := d.fetchBytes / d.fetches; perRequest > 150 {
					return fmt.Errorf("node %d received Fetch requests of %d bytes on average; want an idle session's (< 150)", id, perRequest)
				}
				if d.named > d.sent || d.answered > d.sent {
					return fmt.Errorf("node %d's %d follower fetches named %d partitions and were answered with %d; want almost none",
						id, d.sent, d.named, d.answered)
				}
			}
			return nil
		})
	}
	idle("idle")

	// Node 2's partitions move to the others while it is down, and back
	// when it is their preferred leader again: the followers' sessions
	// forget partitions and take them on (and node 2's are new).
	n := c.Node(2)
	n.Kill()
	n.Restart()
	n.WaitReady()
	waitInSync(t, c, topic, assignment, false)
	testcluster.Eventually(t, 60*time.Second, "electing the preferred leaders", func() error {
		set := kadm.TopicsSet{}
		for i := range int32(partitions) {
			set.Add(topic, i)
		}
		if _, err := c.Admin().ElectLeaders(context.Background(), kadm.ElectPreferredReplica, set); err != nil {
			return err
		}
		return inSync(c, topic, assignment, true)
	})
	idle("after node 2 restarted")
}

// waitInSync waits until every partition of topic has all the replicas
// assignment gives it in sync and, if preferred, the first as leader.
func waitInSync(t *testing.T, c *testcluster.Cluster, topic string, assignment [][]int32, preferred bool) {
	t.Helper()
	testcluster.Eventually(t, 60*time.Second, "every ISR full", func() error {
		return inSync(c, topic, assignment, preferred)
	})
}

func inSync(c *testcluster.Cluster, topic string, assignment [][]int32, preferred bool) error {
	for i, replicas := range assignment {
		st, err := c.Partition(context.Background(), topic, int32(i))
		if err != nil {
			return err
		}
		if len(st.ISR) != len(replicas) || preferred && st.Leader != replicas[0] {
			return fmt.Errorf("partition %d: %v", i, st)
		}
	}
	return nil
}

// fetchCounts are a node's Fetch counters: as leader, the Fetch requests
// received and their bytes (replica fetches only: no consumer runs); as
// follower, its replica fetches sent, the full ones, and the partitions named
// and answered.
type fetchCounts struct {
	fetches, fetchBytes, sent, full, named, answered int64
}

func (a fetchCounts) sub(b fetchCounts) fetchCounts {
	return fetchCounts{a.fetches - b.fetches, a.fetchBytes - b.fetchBytes, a.sent - b.sent, a.full - b.full, a.named - b.named, a.answered - b.answered}
}

func scrapeAll(t *testing.T, c *testcluster.Cluster) map[int32]fetchCounts {
	t.Helper()
	out := map[int32]fetchCounts{}
	for _, n := range c.Nodes() {
		out[n.ID] = scrapeFetches(t, n)
	}
	return out
}

func scrapeFetches(t *testing.T, n *testcluster.Node) fetchCounts {
	t.Helper()
	body := metricsOf(t, n)
	// A series not yet exported is 0: a node just restarted may have
	// received no Fetch yet.
	value := func(series string) int64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		return int64(v)
	}
	return fetchCounts{
		fetches:    value(`strata_requests_total{api="Fetch"}`),
		fetchBytes: value(`strata_request_bytes_total{api="Fetch"}`),
		sent:       value("strata_replica_fetch_requests_total"),
		full:       value("strata_replica_fetch_full_requests_total"),
		named:      value("strata_replica_fetch_request_partitions_total"),
		answered:   value("strata_replica_fetch_response_partitions_total"),
	}
}
