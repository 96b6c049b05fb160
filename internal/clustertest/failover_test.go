package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/testcluster"
)

// minISR2 is the topic config of the acks=all scenarios.
var minISR2 = map[string]string{"min.insync.replicas": "2"}

// crash is one killed leader.
type crash struct {
	node       int32
	epoch      int32     // the leader epoch it led at
	at         time.Time // when SIGKILL was sent
	controller bool      // it was the active controller too
}

// killLeader kills the leader of topic-0 once its ISR is full, and returns once
// metadata shows another leader.
func killLeader(t testing.TB, c *testcluster.Cluster, topic string) crash {
	t.Helper()
	st := c.WaitPartition(topic, 0, 30*time.Second, "a full ISR", func(st testcluster.PartitionState) error {
		if len(st.ISR) != len(st.Replicas) || st.Err != nil {
			return errors.New("ISR not full")
		}
		return nil
	})
	ctrl, _, err := c.ActiveController(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cr := crash{node: st.Leader, epoch: st.LeaderEpoch, at: time.Now(), controller: ctrl == st.Leader}
	c.Node(st.Leader).Kill()
	c.WaitPartition(topic, 0, 30*time.Second, "a new leader", func(st testcluster.PartitionState) error {
		if st.Leader == cr.node || st.Leader < 0 {
			return errors.New("no new leader yet")
		}
		return nil
	})
	return cr
}

// failoverTime is the time from a crash to the first acknowledgement of a
// record that was written under a later leader epoch (so by a new leader), or
// -1 if there is none.
func failoverTime(cr crash, epochs map[string]int32, ps ...*producer) time.Duration {
	first := time.Duration(-1)
	for _, p := range ps {
		for _, a := range p.acks() {
			if a.at.After(cr.at) && epochs[string(a.Value)] > cr.epoch {
				if d := a.at.Sub(cr.at); first < 0 || d < first {
					first = d
				}
				break // acks of one producer arrive in order
			}
		}
	}
	return first
}

// stall is the longest wait between two acknowledgements (of any producer)
// around a crash: from the last acknowledged write before the leader died to
// the first acknowledged after, which the new leader wrote. It looks at the
// acknowledgements from a second before the crash to until, and is -1 if none
// arrived after the crash.
func stall(cr crash, until time.Time, ps ...*producer) time.Duration {
	var times []time.Time
	for _, p := range ps {
		for _, a := range p.acks() {
			if a.at.After(cr.at.Add(-time.Second)) && !a.at.After(until) {
				times = append(times, a.at)
			}
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	longest := time.Duration(-1)
	for i := 1; i < len(times); i++ {
		if times[i].After(cr.at) {
			longest = max(longest, times[i].Sub(times[i-1]))
		}
	}
	return longest
}

// defaultTimeouts are the flags that put back the server's defaults for the
// broker session and ISR timeouts, which testcluster shortens.
func defaultTimeouts() []string {
	d := config.Default()
	return []string{
		"--broker-heartbeat-interval", d.BrokerHeartbeatInterval.String(),
		"--broker-session-timeout", d.BrokerSessionTimeout.String(),
		"--replica-lag-time-max", d.ReplicaLagTimeMax.String(),
	}
}

// maxFailoverAtDefaults guards the failover time at the server's default
// settings against regressions; a kill is typically over in well under two
// seconds (docs/cluster.md), and the bound leaves room for a loaded machine.
const maxFailoverAtDefaults = 6 * time.Second

// leaderCrashes is one failover scenario: a three-node cluster, the topic's
// preferred leader order chosen so that the killed leader is (or is not) the
// active controller.
type leaderCrashes struct {
	runs            int
	controllerLeads bool
	flags           []string
}

// start starts the cluster.
func (lc leaderCrashes) start(t testing.TB) *testcluster.Cluster {
	return testcluster.Start(t, 3, testcluster.WithFlags(lc.flags...))
}

// topic creates a topic of one partition on the three nodes, led by the
// active controller or not as the scenario wants, and starts two producers
// of it.
func (lc leaderCrashes) topic(t testing.TB, c *testcluster.Cluster, topic string) []*producer {
	ctrl, _, err := c.ActiveController(context.Background())
	if err != nil || ctrl < 1 {
		t.Fatalf("active controller: %d, %v", ctrl, err)
	}
	var order []int32
	for _, n := range c.Nodes() {
		if n.ID != ctrl {
			order = append(order, n.ID)
		}
	}
	if lc.controllerLeads {
		order = append([]int32{ctrl}, order...)
	} else {
		order = append(order, ctrl)
	}
	c.CreateTopic(topic, [][]int32{order}, minISR2)
	return []*producer{startProducer(t, c, topic+"-a", topic), startProducer(t, c, topic+"-b", topic)}
}

// crashOnce kills the leader once the producers are going, waits for writes
// to resume, measures the stall and restarts the killed node.
func (lc leaderCrashes) crashOnce(t testing.TB, c *testcluster.Cluster, topic string, ps []*producer) (crash, time.Duration) {
	waitAcks(t, time.Now(), 100, ps...)
	cr := killLeader(t, c, topic)
	if cr.controller != lc.controllerLeads {
		t.Fatalf("killed leader %d: active controller %v, want %v", cr.node, cr.controller, lc.controllerLeads)
	}
	waitAcks(t, time.Now(), 50, ps...)
	d := stall(cr, time.Now(), ps...)
	restartAt := time.Now()
	c.Node(cr.node).Restart()
	t.Logf("node %d restarted: ready after %v", cr.node, time.Since(restartAt).Round(time.Millisecond))
	return cr, d
}

// TestLeaderCrashKeepsAcknowledgedWrites: two idempotent producers write with
// acks=all to a topic with three replicas and min.insync.replicas=2 while the
// partition's leader is killed with SIGKILL (and restarted after each
// failover). Every acknowledged record is read back afterwards exactly once,
// in order per key, at its acknowledged offset, and the replicas' logs end up
// byte-identical. It logs each failover time (from SIGKILL to the first
// acknowledgement of a record written by the new leader) and stall (from the
// last acknowledgement before the crash to the first after).
//
// "leader" kills a leader that is not the active controller, three times (the
// controller comes last in the preferred replica order, so it never leads);
// "leader-and-controller" kills, once, a leader that is also the active
// controller, so a controller election comes first. Each runs with
// testcluster's short session timeouts and with the server's defaults; at the
// defaults a failover must take at most maxFailoverAtDefaults (the dead
// leader is fenced when its controller address refuses connections, not
// after the 9s session timeout).
func TestLeaderCrashKeepsAcknowledgedWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		leaderCrashes
		bound time.Duration
	}{
		{"leader", leaderCrashes{runs: 3}, 0},
		{"leader-and-controller", leaderCrashes{runs: 1, controllerLeads: true}, 0},
		{"leader-default-timeouts", leaderCrashes{runs: 2, flags: defaultTimeouts()}, maxFailoverAtDefaults},
		{"leader-and-controller-default-timeouts", leaderCrashes{runs: 1, controllerLeads: true, flags: defaultTimeouts()}, maxFailoverAtDefaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "failover"
			c := tc.start(t)
			ps := tc.topic(t, c, topic)
			var (
				crashes []crash
				stalls  []time.Duration
			)
			for range tc.runs {
				cr, d := tc.crashOnce(t, c, topic, ps)
				crashes, stalls = append(crashes, cr), append(stalls, d)
			}
			waitAcks(t, time.Now(), 100, ps...)
			for _, p := range ps {
				p.finish(t)
			}
			got := readAll(t, c, topic)
			check(t, produced(ps...), got.records)

			for i, cr := range crashes {
				d := failoverTime(cr, got.epochs, ps...)
				if d < 0 {
					t.Errorf("failover %d: no acknowledged write from a later leader epoch than %d", i+1, cr.epoch)
					continue
				}
				t.Logf("failover %d: leader node %d (epoch %d, active controller: %v) killed; first write acknowledged by the new leader after %v; acknowledgements stalled for %v",
					i+1, cr.node, cr.epoch, cr.controller, d.Round(time.Millisecond), stalls[i].Round(time.Millisecond))
				if tc.bound > 0 && d > tc.bound {
					t.Errorf("failover %d took %v at the default timeouts, more than %v", i+1, d.Round(time.Millisecond), tc.bound)
				}
			}

			c.WaitPartition(topic, 0, 30*time.Second, "a full ISR", func(st testcluster.PartitionState) error {
				if len(st.ISR) != 3 {
					return errors.New("ISR not full")
				}
				return nil
			})
			crashAll(t, c)
			checkReplicasAgree(t, topic, c.Nodes()...)
		})
	}
}

// BenchmarkFailover measures, at the server's default settings, how long
// acknowledged writes stop when a partition leader is killed with SIGKILL:
// the stall from the last acknowledgement before the kill to the first
// after, over b.N kills (run it with -benchtime=Nx), with two idempotent
// acks=all producers sending a record every 2ms each. "leader" kills a leader
// that is not the active controller, "leader-and-controller" one that is.
// It reports the median (the lower middle one of an even number) and the
// longest stall; correctness is TestLeaderCrashKeepsAcknowledgedWrites's job.
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 5x ./internal/clustertest/
func BenchmarkFailover(b *testing.B) {
	for _, bc := range []struct {
		name string
		leaderCrashes
	}{
		{"leader", leaderCrashes{flags: defaultTimeouts()}},
		{"leader-and-controller", leaderCrashes{controllerLeads: true, flags: defaultTimeouts()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := bc.start(b)
			var stalls []time.Duration
			for b.Loop() {
				// A topic per kill, so that its leader can be the active
				// controller of the moment.
				topic := fmt.Sprintf("failover-%d", len(stalls))
				ps := bc.topic(b, c, topic)
				_, d := bc.crashOnce(b, c, topic, ps)
				for _, p := range ps {
					p.finish(b)
				}
				if d < 0 {
					b.Fatal("no acknowledgement after the kill")
				}
				stalls = append(stalls, d)
				b.Logf("kill %d: acknowledgements stalled for %v", len(stalls), d.Round(time.Millisecond))
			}
			slices.Sort(stalls)
			b.ReportMetric(float64(stalls[(len(stalls)-1)/2].Milliseconds()), "median-stall-ms")
			b.ReportMetric(float64(stalls[len(stalls)-1].Milliseconds()), "max-stall-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// crashAll kills every running node, so that its data dir can be read. The page
// cache survives a SIGKILL, so this loses nothing written; a clean stop would
// be nicer but cannot be relied on yet (see TestClusterStopsCleanly).
func crashAll(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.Running() {
			n.Kill()
		}
	}
}

// tailer is a direct-partition consumer (no group) of partition 0, reading in
// the background from the start and recording every record in read order.
type tailer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		read   read
		errors []error
	}
}

// startTailer starts a tailer on a client of c; it stops at the latest when the
// test ends.
func startTailer(t *testing.T, c *testcluster.Cluster, topic string) *tailer {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &tailer{
		cl: c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(200*time.Millisecond)),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(tl.done)
		for ctx.Err() == nil {
			fs := tl.cl.PollFetches(ctx)
			tl.mu.Lock()
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					tl.mu.errors = append(tl.mu.errors, err)
				}
			})
			fs.EachRecord(tl.mu.read.add)
			tl.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-tl.done
	})
	return tl
}

// next is the offset after the last record read.
func (tl *tailer) next() int64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if n := len(tl.mu.read.records); n > 0 {
		return tl.mu.read.records[n-1].Offset + 1
	}
	return 0
}

func (tl *tailer) stop() (*read, []error) {
	tl.cancel()
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return &tl.mu.read, tl.mu.errors
}

// TestClientsAcrossLeaderFailover: an idempotent acks=all producer and a
// direct-partition consumer (manual assignment, no group) run while the
// partition's leader is killed with SIGKILL. Both carry on with the new leader:
// the consumer's own reads, in the order it made them, contain every
// acknowledged record exactly once, at dense increasing offsets (no skip, no
// going back), in order per key, and it read records of the new leader's epoch.
func TestClientsAcrossLeaderFailover(t *testing.T) {
	const topic = "clients"
	c := testcluster.Start(t, 3)
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, minISR2)
	p := startProducer(t, c, "f", topic)
	tl := startTailer(t, c, topic)

	waitAcks(t, time.Now(), 200, p)
	cr := killLeader(t, c, topic)
	waitAcks(t, time.Now(), 200, p)
	c.Node(cr.node).Restart()
	waitAcks(t, time.Now(), 200, p)
	p.finish(t)

	acked := p.acks()
	last := acked[len(acked)-1].Offset
	testcluster.Eventually(t, 30*time.Second, "the consumer reading every acknowledged write", func() error {
		if n := tl.next(); n <= last {
			return fmt.Errorf("consumer at offset %d, last acknowledged %d", n, last)
		}
		return nil
	})
	got, errs := tl.stop()
	for _, err := range errs {
		t.Logf("consumer saw a fetch error (retried by the client): %v", err)
	}
	check(t, produced(p), got.records)
	newEpoch := 0
	for _, r := range got.records {
		if got.epochs[string(r.Value)] > cr.epoch {
			newEpoch++
		}
	}
	if newEpoch == 0 {
		t.Fatalf("the consumer read nothing written after the failover (epoch > %d)", cr.epoch)
	}
	t.Logf("consumer read %d records, %d of them written by leaders after epoch %d; failover after %v (killed leader was the active controller: %v)",
		len(got.records), newEpoch, cr.epoch, failoverTime(cr, got.epochs, p).Round(time.Millisecond), cr.controller)
}
