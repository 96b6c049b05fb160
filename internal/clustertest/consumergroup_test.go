package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/report"
)

// groupMember is one franz-go consumer of a KIP-848 group (group.protocol=consumer:
// kgo.ServerSideBalancer), recording what it reads.
type groupMember struct {
	name string
	cl   *kgo.Client
	done chan struct{}
	mu   struct {
		sync.Mutex
		read []report.Consumed
	}
}

func startGroupMember(t *testing.T, c *testcluster.Cluster, name, group, topic string, balancer kgo.GroupBalancer) *groupMember {
	m := &groupMember{name: name, done: make(chan struct{})}
	m.cl = c.Client(
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.Balancers(balancer),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.AutoCommitInterval(500*time.Millisecond),
	)
	go func() {
		defer close(m.done)
		for {
			fs := m.cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				m.mu.read = append(m.mu.read, report.Consumed{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.leave)
	return m
}

// leave closes the client: it commits what it read and leaves the group.
func (m *groupMember) leave() {
	m.cl.Close()
	<-m.done
}

func (m *groupMember) reads() []report.Consumed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.read)
}

// waitGroupSplit waits until ConsumerGroupDescribe shows the group Stable with
// exactly the named members (by client id), every member at the group epoch, and
// the topic's partitions each owned by exactly one of them, as evenly as possible.
// Each attempt asks with a new client: one that cached a killed coordinator keeps
// dialling it.
func waitGroupSplit(t *testing.T, c *testcluster.Cluster, group, topic string, partitions int, clients ...string) kadm.DescribedConsumerGroup {
	t.Helper()
	var got kadm.DescribedConsumerGroup
	testcluster.Eventually(t, 60*time.Second, fmt.Sprintf("group %s split between %v", group, clients), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
		if err != nil {
			return err
		}
		defer cl.Close()
		ds, err := kadm.NewClient(cl).DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		d := ds[group]
		if d.Err != nil {
			return d.Err
		}
		if d.State != "Stable" {
			return fmt.Errorf("state %s", d.State)
		}
		var names []string
		owned := map[int32]string{}
		for _, m := range d.Members {
			names = append(names, m.ClientID)
			if m.MemberEpoch != d.Epoch {
				return fmt.Errorf("member %s at epoch %d, group at %d", m.ClientID, m.MemberEpoch, d.Epoch)
			}
			ps := m.Assignment[topic]
			if n := len(ps); n < partitions/len(clients) || n > (partitions+len(clients)-1)/len(clients) {
				return fmt.Errorf("member %s owns %v", m.ClientID, ps)
			}
			for p := range ps {
				if prev, ok := owned[p]; ok {
					return fmt.Errorf("partition %d owned by %s and %s", p, prev, m.ClientID)
				}
				owned[p] = m.ClientID
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, clients) {
			return fmt.Errorf("members %v", names)
		}
		if len(owned) != partitions {
			return fmt.Errorf("%d of %d partitions owned", len(owned), partitions)
		}
		got = d
		return nil
	})
	return got
}

// TestConsumerProtocolGroup: franz-go consumers with group.protocol=consumer
// (KIP-848: the coordinator assigns) against 3 nodes, while a producer writes. One
// member joins and owns all six partitions; two more join and the partitions are
// split three ways; the first leaves and the other two share them. Every
// acknowledged record is read at least once, each member's view is consistent, the
// group ends with the end offsets committed, and ListGroups reports it as a
// consumer group. Run once with each server assignor.
func TestConsumerProtocolGroup(t *testing.T) {
	c := testcluster.Start(t, 3)
	adm := c.Admin()
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		assignor string
	}{
		{"uniform", kgo.CooperativeStickyBalancer(), "uniform"},
		{"range", kgo.RangeBalancer(), "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "cg-"+tc.name, "kip848-"+tc.name
			const partitions = 6
			c.CreateTopic(topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, minISR2)
			p := startProducer(t, c, "p-"+tc.name, topic)
			waitAcks(t, time.Now().Add(-time.Hour), 100, p)

			a := startGroupMember(t, c, "a", group, topic, tc.balancer)
			d := waitGroupSplit(t, c, group, topic, partitions, "a")
			if d.AssignorName != tc.assignor {
				t.Errorf("assignor %q, want %q", d.AssignorName, tc.assignor)
			}
			b := startGroupMember(t, c, "b", group, topic, tc.balancer)
			cm := startGroupMember(t, c, "c", group, topic, tc.balancer)
			waitGroupSplit(t, c, group, topic, partitions, "a", "b", "c")
			waitAcks(t, time.Now(), 100, p)
			a.leave()
			waitGroupSplit(t, c, group, topic, partitions, "b", "c")
			waitAcks(t, time.Now(), 100, p)
			p.finish(t)

			acked := produced(p)
			members := []*groupMember{a, b, cm}
			waitAllRead(t, acked, members...)
			b.leave()
			cm.leave()
			checkGroupRead(t, adm, group, topic, partitions, acked, members...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			listed, err := adm.ListGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lg, ok := listed[group]
			if !ok || lg.ProtocolType != "consumer" || lg.State != "Empty" {
				t.Errorf("ListGroups shows %s as %+v", group, lg)
			}
			ds, err := adm.DescribeConsumerGroups(ctx, group)
			if err == nil {
				err = ds.Error()
			}
			if err != nil || ds[group].State != "Empty" {
				t.Errorf("describing the empty group: %v %+v", err, ds[group])
			}
		})
	}
}

// TestConsumerProtocolCoordinatorCrash: two franz-go KIP-848 members share a group
// under a producer when the node coordinating the group is killed with SIGKILL (a
// third member joined and left before, so that the group epoch is past what two
// members joining afresh would reach). The new coordinator loads the group from
// __consumer_offsets: the members carry on with their member ids at their epochs,
// and neither the group epoch nor a member's goes back (it would if they had to
// rejoin a group the coordinator forgot). The group must settle again with both
// members, every acknowledged record must be read at least once, and the end
// offsets must end up committed.
func TestConsumerProtocolCoordinatorCrash(t *testing.T) {
	c := testcluster.Start(t, 3)
	adm := c.Admin()
	const topic, group, partitions = "cg-crash", "kip848-crash", 6
	c.CreateTopic(topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, minISR2)
	p := startProducer(t, c, "p-crash", topic)
	waitAcks(t, time.Now().Add(-time.Hour), 100, p)
	a := startGroupMember(t, c, "a", group, topic, kgo.CooperativeStickyBalancer())
	b := startGroupMember(t, c, "b", group, topic, kgo.CooperativeStickyBalancer())
	waitGroupSplit(t, c, group, topic, partitions, "a", "b")
	extra := startGroupMember(t, c, "c", group, topic, kgo.CooperativeStickyBalancer())
	waitGroupSplit(t, c, group, topic, partitions, "a", "b", "c")
	extra.leave()
	d := waitGroupSplit(t, c, group, topic, partitions, "a", "b")
	waitAcks(t, time.Now(), 100, p)

	victim := c.Node(d.Coordinator.NodeID)
	t.Logf("killing node %d, the coordinator of %s at epoch %d", victim.ID, group, d.Epoch)
	victim.Kill()
	after := waitGroupSplit(t, c, group, topic, partitions, "a", "b")
	if after.Coordinator.NodeID == victim.ID {
		t.Fatalf("coordinator still node %d", victim.ID)
	}
	t.Logf("node %d coordinates %s now, at epoch %d", after.Coordinator.NodeID, group, after.Epoch)
	checkEpochsKept(t, d, after)
	waitAcks(t, time.Now(), 100, p)
	p.finish(t)

	acked := produced(p)
	waitAllRead(t, acked, a, b, extra)
	a.leave()
	b.leave()
	checkGroupRead(t, adm, group, topic, partitions, acked, a, b, extra)
}

// checkEpochsKept fails t unless the group after a failover has the members it
// had before, by member id, and neither its epoch nor a member's went back.
func checkEpochsKept(t *testing.T, before, after kadm.DescribedConsumerGroup) {
	t.Helper()
	if after.Epoch < before.Epoch {
		t.Errorf("group epoch went back from %d to %d: the members rejoined a group the new coordinator did not know", before.Epoch, after.Epoch)
	}
	epochs := map[string]int32{}
	for _, m := range before.Members {
		epochs[m.MemberID] = m.MemberEpoch
	}
	for _, m := range after.Members {
		was, ok := epochs[m.MemberID]
		switch {
		case !ok:
			t.Errorf("member %s (%s) is new after the failover", m.MemberID, m.ClientID)
		case m.MemberEpoch < was:
			t.Errorf("member %s (%s) went back from epoch %d to %d", m.MemberID, m.ClientID, was, m.MemberEpoch)
		}
	}
}

// waitAllRead waits until the members between them read every acknowledged record.
func waitAllRead(t *testing.T, acked []report.Produced, members ...*groupMember) {
	t.Helper()
	testcluster.Eventually(t, 60*time.Second, "every acknowledged record read", func() error {
		seen := map[[2]int64]bool{}
		for _, m := range members {
			for _, r := range m.reads() {
				seen[[2]int64{int64(r.Partition), r.Offset}] = true
			}
		}
		for _, ack := range acked {
			if !seen[[2]int64{int64(ack.Partition), ack.Offset}] {
				return fmt.Errorf("%d/%d not read yet", ack.Partition, ack.Offset)
			}
		}
		return nil
	})
}

// checkGroupRead checks, once the members left, that they read every acknowledged
// record at least once (report.CheckAtLeastOnce) and that the group committed the
// end offsets.
func checkGroupRead(t *testing.T, adm *kadm.Client, group, topic string, partitions int32, acked []report.Produced, members ...*groupMember) {
	t.Helper()
	var all []report.Consumed
	for _, m := range members {
		all = append(all, m.reads()...)
	}
	for _, err := range report.CheckAtLeastOnce(partitions, acked, all) {
		t.Error(err)
	}
	end := map[int32]int64{}
	for _, ack := range acked {
		end[ack.Partition] = max(end[ack.Partition], ack.Offset+1)
	}
	testcluster.Eventually(t, 30*time.Second, "the end offsets committed", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for part, want := range end {
			if o, ok := offs.Lookup(topic, part); !ok || o.At != want {
				return fmt.Errorf("partition %d committed %v, end %d", part, o.At, want)
			}
		}
		return nil
	})
}
