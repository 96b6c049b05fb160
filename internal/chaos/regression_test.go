package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/chaos/history"
	"github.com/strata-stream/strata/internal/config"
)

// TestDeposedLeaderRejoinsISR: a broker made leader and deposed before it
// appended anything must be able to follow again.
//
// The bug it caught: becomeLeader (internal/replica) assigns the new epoch at
// the log end at once, so such a broker's latest epoch has no records. As a
// follower it fetched with that epoch as LastFetchedEpoch; the new leader did
// not know it and answered DivergingEpoch(the epoch before, the new epoch's
// start offset), the follower's own log end; truncation at the log end did
// nothing, so the epoch entry stayed and the next fetch got the same answer,
// forever: the replica never rejoined the ISR. Truncating at or past the log
// end now drops the epochs that start there, as Kafka's does.
func TestDeposedLeaderRejoinsISR(t *testing.T) {
	const topic = "deposed"
	c, _, ps := startRegression(t, topic, 1, 3)
	produceSome(t, c.seeds(), topic, 20)

	// Isolate the leader; once another node leads, heal: the old leader follows.
	l1, e1 := leaderSeenBy(t, ps, topic, 0, -1, -1)
	c.cn.net.Isolate(name(l1))
	l2, e2 := leaderSeenBy(t, ps, topic, 0, l1, e1)
	c.cn.net.Heal(true)
	if _, err := ps.waitHealthy(topic, 3, 1, healthyTimeout); err != nil {
		t.Fatalf("node %d after its isolation: %v", l1, err)
	}
	// Nothing is written at epoch e2. Depose node l2 the same way.
	c.cn.net.Isolate(name(l2))
	l3, e3 := leaderSeenBy(t, ps, topic, 0, l2, e2)
	c.cn.net.Heal(true)
	t.Logf("leaders: node %d (epoch %d), node %d (epoch %d, nothing written), node %d (epoch %d)", l1, e1, l2, e2, l3, e3)
	if _, err := ps.waitHealthy(topic, 3, 1, 30*time.Second); err != nil {
		t.Fatalf("node %d, leader at epoch %d without writing, did not rejoin the ISR: %v", l2, e2, err)
	}
}

// TestFollowerFsyncFailureIsNotCounted: a follower whose fsync failed must not
// count towards acks=all, or an acknowledged record can be lost.
//
// The bug it caught: after a failed fsync the fetcher (internal/replica) fetched
// again from its log end, not its durable end; the leader took that as what the
// follower held durably, so the high-water mark, and acks=all, covered records
// the follower never made durable. Now a failed log stops fetching, and a fetch
// reports an offset only once everything below it is fsynced. Here: a
// partition on L and F (two replicas, min.insync.replicas=2), F's fsyncs fail
// mid-stream; L shuts down cleanly (leadership moves to F, still in the ISR:
// the replica lag limit is 30s here); F loses power and comes back on what it
// had fsynced, still the leader; L comes back as F's follower and truncates to
// F's log. Every acknowledged record must still be there.
func TestFollowerFsyncFailureIsNotCounted(t *testing.T) {
	const topic = "unsynced"
	c, adm, ps := startRegression(t, topic, 2, 2, func(cfg *config.Config) { cfg.ReplicaLagTimeMax = 30 * time.Second })
	_, parts, err := ps.metadata(0, topic)
	if err != nil {
		t.Fatal(err)
	}
	p := parts[0]
	l := c.nodes[p.leader-1]
	f := c.nodes[slices.DeleteFunc(slices.Clone(p.replicas), func(id int32) bool { return id == p.leader })[0]-1]

	// Records flow while F's fsyncs start failing, so that the first to fail is
	// one that follows an append.
	// They keep flowing until half a second after the first fsync failed: on a
	// busy machine a fixed span could end before the fault begins.
	var acked []string
	produce, stopProducing := context.WithCancel(context.Background())
	defer stopProducing()
	done := make(chan struct{})
	go func() {
		defer close(done)
		acked = produceUntil(t, produce, c.seeds(), topic)
	}()
	// The fault begins mid-stream: once the partition holds some records.
	if err := waitFor(10*time.Second, func() error {
		ends, err := adm.ListEndOffsets(context.Background(), topic)
		if err != nil {
			return err
		}
		if o, ok := ends.Lookup(topic, 0); !ok || o.Err != nil || o.Offset < 50 {
			return fmt.Errorf("partition 0 not yet 50 records long: %+v", o)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.syncs.Enable()
	if err := waitFor(10*time.Second, func() error {
		if f.syncs.Fired() == 0 {
			return errors.New("no fsync failed yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, stopProducing)
	<-done
	failedAt := len(acked)
	t.Logf("replicas %v, leader %d; node %d's fsyncs failing from mid-stream: %d records acknowledged (%d fsyncs failed)",
		p.replicas, l.cfg.NodeID, f.cfg.NodeID, failedAt, f.syncs.Fired())

	// L shuts down cleanly: its controlled shutdown hands leadership to F.
	l.stop()
	if _, err := leaderSeenByNode(ps, topic, f, f.cfg.NodeID); err != nil {
		t.Fatalf("leadership did not move to node %d: %v", f.cfg.NodeID, err)
	}
	// F loses power and comes back on what it had fsynced; then L.
	c.powerOff(f)
	f.crash()
	f.stop()
	c.cn.net.Heal(true)
	f.syncs.Disable()
	if err := c.startAll([]*memNode{f, l}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.waitHealthy(topic, 3, 1, healthyTimeout); err != nil {
		t.Fatal(err)
	}
	requireAll(t, c, adm, topic, acked)
}

// produceUntil sends a record to topic every 5ms until ctx is done, with
// acks=all, and returns the values acknowledged.
func produceUntil(t *testing.T, ctx context.Context, seeds brokers, topic string) []string {
	cl, err := kgo.NewClient(append(clientOpts(seeds, "chaos-known"), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(10*time.Second))...)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer cl.Close()
	var mu sync.Mutex
	var acked []string
	for ; ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		r := &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", topic, time.Now().UnixNano())}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				acked = append(acked, string(r.Value))
				mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(acked)
}

// leaderSeenByNode waits until node nd reports want as topic's partition 0
// leader.
func leaderSeenByNode(ps probes, topic string, nd *memNode, want int32) (int32, error) {
	var epoch int32
	err := waitFor(healthyTimeout, func() error {
		_, parts, err := ps.metadata(int(nd.cfg.NodeID-1), topic)
		if err != nil {
			return err
		}
		if parts[0].leader != want {
			return fmt.Errorf("node %d sees leader %d", nd.cfg.NodeID, parts[0].leader)
		}
		epoch = parts[0].epoch
		return nil
	})
	return epoch, err
}

// produceSome sends n records to topic, each with acks=all and a 10s bound,
// and returns the values acknowledged.
func produceSome(t *testing.T, seeds brokers, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(append(clientOpts(seeds, "chaos-known"), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d-%d", topic, time.Now().UnixNano(), i)})
	}
	var acked []string
	for _, r := range cl.ProduceSync(context.Background(), recs...) {
		if r.Err == nil {
			acked = append(acked, string(r.Record.Value))
		}
	}
	return acked
}

// leaderSeenBy waits until a node other than not reports a leader of
// topic-partition other than not, at an epoch above after, and returns it.
func leaderSeenBy(t *testing.T, ps probes, topic string, partition, not, after int32) (leader, epoch int32) {
	t.Helper()
	leader, epoch, err := leaderSeenWithin(ps, topic, partition, not, after, healthyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return leader, epoch
}

// leaderSeenWithin is leaderSeenBy with its own time limit and an error.
func leaderSeenWithin(ps probes, topic string, partition, not, after int32, timeout time.Duration) (leader, epoch int32, err error) {
	err = waitFor(timeout, func() error {
		for i := range ps {
			if int32(i+1) == not {
				continue
			}
			_, parts, err := ps.metadata(i, topic)
			if err != nil {
				continue
			}
			if v := parts[partition]; v.leader > 0 && v.leader != not && v.epoch > after {
				leader, epoch = v.leader, v.epoch
				return nil
			}
		}
		return fmt.Errorf("no node reports a leader other than %d above epoch %d", not, after)
	})
	return leader, epoch, err
}

// startRegression starts a 3-node in-process cluster with a one-partition
// topic of rf replicas (min.insync.replicas=2) and waits until it is healthy.
func startRegression(t *testing.T, topic string, seed uint64, rf int16, opts ...func(*config.Config)) (*memCluster, *kadm.Client, probes) {
	t.Helper()
	c := startMemCluster(t, 3, topic, seed, nil, opts...)
	adm := newAdmin(t, c.seeds())
	if err := createTopic(adm, topic, 1, rf, nil); err != nil {
		t.Fatal(err)
	}
	ps := newProbes(t, c.seeds())
	if _, err := ps.waitHealthy(topic, 3, 1, healthyTimeout); err != nil {
		t.Fatal(err)
	}
	return c, adm, ps
}

// requireAll reads topic's partition 0 whole and fails t unless it holds every
// acknowledged value.
func requireAll(t *testing.T, c *memCluster, adm *kadm.Client, topic string, acked []string) {
	t.Helper()
	end, err := endOffsets(adm, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	final, err := finalRead(c.seeds(), topic, end, drainTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, v := range acked {
		if !slices.ContainsFunc(final[0], func(r history.Record) bool { return r.Value == v }) {
			lost = append(lost, v)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged records lost (first %s); the partition now ends at %d", len(lost), len(acked), lost[0], end[0])
	}
}

// TestFailedLeaderLogResigns: a leader whose log fails (its fsyncs fail, and a
// failed log is fail-stop until the broker restarts) hands leadership to an
// in-sync follower at once instead of answering KAFKA_STORAGE_ERROR until an
// operator steps in, and nothing acknowledged is lost. The replica lag limit is
// 30s here, so neither an ISR shrink nor the periodic retry can be what moves it.
func TestFailedLeaderLogResigns(t *testing.T) {
	const topic = "resign"
	c, adm, ps := startRegression(t, topic, 4, 3, func(cfg *config.Config) { cfg.ReplicaLagTimeMax = 30 * time.Second })
	acked := produceSome(t, c.seeds(), topic, 20)
	l1, e1 := leaderSeenBy(t, ps, topic, 0, -1, -1)

	c.nodes[l1-1].syncs.Enable()
	failedAt := time.Now()
	var during []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		during = produceUntil(t, ctx, c.seeds(), topic)
	}()
	l2, e2, err := leaderSeenWithin(ps, topic, 0, l1, e1, 10*time.Second)
	if err != nil {
		t.Fatalf("node %d's log failed (%d fsyncs failed) and it kept the leadership: %v", l1, c.nodes[l1-1].syncs.Fired(), err)
	}
	t.Logf("node %d (epoch %d) failed its log; node %d leads at epoch %d %v later", l1, e1, l2, e2, time.Since(failedAt).Round(time.Millisecond))
	<-done
	acked = append(acked, during...)
	after := produceSome(t, c.seeds(), topic, 20)
	if len(after) != 20 {
		t.Fatalf("only %d of 20 writes acknowledged under the new leader", len(after))
	}
	requireAll(t, c, adm, topic, append(acked, after...))
}

// TestControllerFailoverFencesNoHealthyBroker: cutting the active controller
// off must fence that node alone.
//
// The bug it caught: every broker heartbeats every 100ms, so when the active
// controller was cut off each broker had a heartbeat in flight to it, and
// that request hung for the controller link's 10s timeout. The controller
// elected next grants every broker one session timeout (2s here) from its
// election, heard nothing, and fenced all three brokers, itself included; each
// partition's ISR collapsed to one replica, often the one cut off, and stayed
// leaderless until that node came back (TestDeposedLeaderRejoinsISR hung on
// it). A heartbeat now gives up after half a session timeout, and waiting for
// a busy link connection respects that deadline.
func TestControllerFailoverFencesNoHealthyBroker(t *testing.T) {
	const topic = "ctrl-failover"
	c, _, ps := startRegression(t, topic, 5, 3)
	// Two failovers: whether a heartbeat is stuck when the next controller's
	// sessions run out is a race, which the old code lost about half the time.
	cut := map[int32]bool{}
	for range 2 {
		old := activeController(t, ps, -1)
		c.cn.net.Isolate(name(old))
		cut[old] = true
		next := activeController(t, ps, old)
		t.Logf("active controller: node %d, cut off; then node %d", old, next)
		others := slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == old })
		if err := waitFor(healthyTimeout, func() error {
			_, parts, err := ps.metadata(int(next-1), topic)
			if err != nil {
				return err
			}
			if p := parts[0]; !slices.Equal(p.isr, others) || !slices.Contains(others, p.leader) {
				return fmt.Errorf("partition 0: leader %d, isr %v", p.leader, p.isr)
			}
			return nil
		}); err != nil {
			t.Fatalf("node %d cut off, node %d controls: the partition should be led by one of %v with both in sync: %v", old, next, others, err)
		}
		c.cn.net.Heal(true)
		if _, err := ps.waitHealthy(topic, 3, 1, healthyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	for i, path := range c.logs() {
		for _, fenced := range fencedBrokers(t, path) {
			if !cut[fenced] {
				t.Errorf("node %d's controller fenced broker %d, which was never cut off", i+1, fenced)
			}
		}
	}
}

// activeController waits until a node other than not names an active
// controller other than not, and returns it.
func activeController(t *testing.T, ps probes, not int32) int32 {
	t.Helper()
	var id int32
	err := waitFor(healthyTimeout, func() error {
		for i := range ps {
			if int32(i+1) == not {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := ps[i].SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			cancel()
			if err != nil {
				continue
			}
			if md := resp.(*kmsg.MetadataResponse); md.ControllerID > 0 && md.ControllerID != not {
				id = md.ControllerID
				return nil
			}
		}
		return fmt.Errorf("no node names an active controller other than %d", not)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fencedBrokers lists the brokers a node's controller fenced, from its log.
func fencedBrokers(t *testing.T, path string) []int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, m := range fencedLine.FindAllSubmatch(b, -1) {
		id, _ := strconv.Atoi(string(m[1]))
		ids = append(ids, int32(id))
	}
	return ids
}

var fencedLine = regexp.MustCompile(`msg="fenced broker[^"]*" .*? broker=(\d+) `)
