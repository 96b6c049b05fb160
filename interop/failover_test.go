package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/report"
)

// Failover run parameters: the Java client produces for streamFor at streamRate
// records a second, and a partition leader is killed once killAfter records are in,
// about a third of the way.
const (
	streamFor  = 12 * time.Second
	streamRate = 100
	killAfter  = 400
)

// TestFailover runs the Java client against a 3-node Strata cluster (one process per
// node) while the leader of a partition it writes and reads is killed with SIGKILL:
//
//  1. Start the cluster; create a topic of 3 partitions, replication factor 3,
//     min.insync.replicas=2; wait until every partition has all three in sync.
//  2. Run the Java client in stream mode: an idempotent acks=all producer at a steady
//     rate and, meanwhile, a consumer in a group (classic protocol, commitSync after
//     each poll).
//  3. Once killAfter records are in, kill -9 the leader of one partition, chosen to be
//     the group's coordinator as well where it can (pickVictim), and wait for a new
//     leader of that partition.
//  4. When the client has read everything acknowledged, check its history
//     (report.CheckAtLeastOnce: every acknowledged record read, in order per key, no
//     value at two offsets), that no send failed, that the log holds exactly the
//     acknowledged records (no duplicate writes from retries), that partition 0 took
//     writes after the failover, and that the group committed the end offsets.
func TestFailover(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("failover runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	java := clientNamed(t, "java")
	requireClient(t, java)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	adm := newAdmin(t, c.Bootstrap()...)

	const topic, group = "interop-failover", "interop-failover"
	createReplicatedTopic(t, c, adm, topic)

	run := startClient(t, java, job{
		bootstrap: strings.Join(c.Bootstrap(), ","),
		topic:     topic,
		mode:      "stream",
		args: []string{"--group", group, "--duration-ms", fmt.Sprint(streamFor.Milliseconds()),
			"--rate", fmt.Sprint(streamRate)},
		timeout: 2 * time.Minute,
	})
	atKill := waitForRecords(t, adm, topic, killAfter, run)
	victim, part := pickVictim(t, c, adm, topic, group)
	t.Logf("killing node %d, leader of %s-%d; %s", victim.ID, topic, part, roles(c, adm, group))
	victim.Kill()
	killed := time.Now()
	st := c.WaitPartition(topic, part, time.Minute, "a new leader", func(st testcluster.PartitionState) error {
		if st.Leader < 1 || st.Leader == victim.ID {
			return errors.New("no new leader yet")
		}
		return nil
	})
	t.Logf("killed node %d with end offsets %v; node %d leads %s-%d (epoch %d, ISR %v) %v later",
		victim.ID, atKill, st.Leader, topic, part, st.LeaderEpoch, st.ISR, time.Since(killed).Round(time.Millisecond))

	s := run.wait(t)
	for i, f := range s.Failed {
		if i == 5 {
			t.Errorf("... and %d more failed sends", len(s.Failed)-i)
			break
		}
		t.Errorf("send of %q (key %q) failed: %s", f.Value, f.Key, f.Error)
	}
	for _, err := range report.CheckAtLeastOnce(partitions, s.Produced, s.Consumed) {
		t.Error(err)
	}
	end, committed, err := endAndCommitted(adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range end {
		total += e
	}
	if len(s.Failed) == 0 && total != int64(len(s.Produced)) {
		t.Errorf("the log holds %d records but %d sends were acknowledged and none failed: duplicate or lost writes", total, len(s.Produced))
	}
	after := 0
	for _, p := range s.Produced {
		if p.Partition == part && p.Offset >= atKill[part] {
			after++
		}
	}
	if after == 0 {
		t.Errorf("no acknowledged write to partition %d after the failover (it held %d records at the kill)", part, atKill[part])
	}
	if !maps.Equal(committed, end) {
		t.Errorf("group %s committed %v, want the end offsets %v", group, committed, end)
	}
	reads := map[[2]int64]bool{}
	for _, r := range s.Consumed {
		reads[[2]int64{int64(r.Partition), r.Offset}] = true
	}
	t.Logf("%d acknowledged (%d to partition %d after the failover), %d failed; %d reads of %d positions; assignments %v",
		len(s.Produced), after, part, len(s.Failed), len(s.Consumed), len(reads), s.Assignments)
}

// pickVictim returns the node to kill and the partition of topic it leads: the group's
// coordinator when it leads one (with three partitions on three nodes it usually does),
// so that the group coordinator fails over too, else the leader of partition 0.
func pickVictim(t *testing.T, c *testcluster.Cluster, adm *kadm.Client, topic, group string) (*testcluster.Node, int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ds, err := adm.DescribeGroups(ctx, group); err == nil {
		coordinator := ds[group].Coordinator.NodeID
		for p := range int32(partitions) {
			if n := c.Leader(topic, p); n.ID == coordinator {
				return n, p
			}
		}
	}
	return c.Leader(topic, 0), 0
}

// roles names the active controller and the group's coordinator, for the log.
func roles(c *testcluster.Cluster, adm *kadm.Client, group string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	controller, _, err := c.ActiveController(ctx)
	if err != nil {
		return fmt.Sprintf("active controller unknown (%v)", err)
	}
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Sprintf("node %d is the active controller; group coordinator unknown (%v)", controller, err)
	}
	return fmt.Sprintf("node %d is the active controller, node %d coordinates group %s", controller, ds[group].Coordinator.NodeID, group)
}

// createReplicatedTopic creates topic with 3 partitions on all three nodes and
// min.insync.replicas=2, and waits until every partition has all three in sync.
func createReplicatedTopic(t *testing.T, c *testcluster.Cluster, adm *kadm.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	minISR := "2"
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v (%s)", topic, err, resp.ErrMessage)
	}
	for p := range int32(partitions) {
		c.WaitPartition(topic, p, time.Minute, "three in-sync replicas", func(st testcluster.PartitionState) error {
			if st.Leader < 1 || len(st.ISR) != 3 {
				return errors.New("not all in sync")
			}
			return nil
		})
	}
}

// waitForRecords waits until topic holds at least n records and returns its end
// offsets; it fails the test if run exits first.
func waitForRecords(t *testing.T, adm *kadm.Client, topic string, n int64, run *clientRun) map[int32]int64 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if !run.running() {
			run.wait(t)
			t.Fatalf("%s exited before %s held %d records", run.c.name, topic, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		listed, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = listed.Error()
		}
		end := map[int32]int64{}
		var total int64
		listed.Each(func(l kadm.ListedOffset) {
			end[l.Partition] = l.Offset
			total += l.Offset
		})
		if err == nil && total >= n {
			return end
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d records: %d (%v)", topic, n, total, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
