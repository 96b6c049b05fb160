package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// fakeClock is the broker-session clock of a test cluster: it moves only when
// the test advances it, so session expiry does not depend on how loaded the
// machine is. Raft keeps real time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

const testSessionTimeout = 2 * time.Second

// sessionCluster is three voters whose broker sessions run on clock.
func sessionCluster(t *testing.T, clock *fakeClock, configure func(*Config)) *cluster {
	return newCluster(t, 3, func(c *Config) {
		c.SessionTimeout = testSessionTimeout
		c.clock = clock.Now
		if configure != nil {
			configure(c)
		}
	})
}

func (cl *cluster) image() *metadata.Image { return cl.nodes[cl.leader()].Image() }

func (cl *cluster) register(id int32, incarnation byte) error {
	return cl.call(func(c *Controller) error {
		_, err := c.RegisterBroker(ctxT(cl.t), RegisterBroker{
			ID: id, Incarnation: metadata.UUID{incarnation}, Host: "127.0.0.1", Port: 9090 + id,
		})
		return err
	})
}

// heartbeat sends one heartbeat to the active controller as broker id would:
// with its current epoch and, as the metadata offset it has applied, the
// active controller's.
func (cl *cluster) heartbeat(id int32, wantShutdown bool) HeartbeatResult {
	cl.t.Helper()
	var res HeartbeatResult
	cl.retry(func(c *Controller) (err error) {
		img := c.Image()
		res, err = c.BrokerHeartbeat(ctxT(cl.t), HeartbeatRequest{
			BrokerID: id, BrokerEpoch: img.Broker(id).Epoch, MetadataOffset: int64(img.Offset()), WantShutdown: wantShutdown,
		})
		return err
	})
	return res
}

// advance moves clock on by d in steps of a quarter session timeout, with a
// heartbeat of each of ids after every step, so that the active controller
// observes its sessions often enough to see no pause of its own (a jump of
// more than half a session timeout is one, see liveness).
func (cl *cluster) advance(clock *fakeClock, d time.Duration, ids ...int32) {
	cl.t.Helper()
	for d > 0 {
		step := min(d, testSessionTimeout/4)
		clock.Advance(step)
		d -= step
		for _, id := range ids {
			cl.heartbeat(id, false)
		}
	}
}

// checkSessions runs the active controller's session check now, as its
// background loop also does.
func (cl *cluster) checkSessions() {
	cl.t.Helper()
	cl.retry(func(c *Controller) error { return c.fenceExpired() })
}

func (cl *cluster) alterPartition(topic string, index int32, mutate func(*AlterPartitionRequest)) (*metadata.Partition, error) {
	var part *metadata.Partition
	err := cl.call(func(c *Controller) (err error) {
		img := c.Image()
		p := img.Partition(topic, index)
		req := AlterPartitionRequest{
			BrokerID: p.Leader, TopicID: p.TopicID, Partition: index,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: p.ISR,
		}
		mutate(&req)
		if b := img.Broker(req.BrokerID); b != nil {
			req.BrokerEpoch = b.Epoch
		}
		res, err := c.AlterPartitions(ctxT(cl.t), []AlterPartitionRequest{req})
		if err != nil {
			return err
		}
		part = res[0].Partition
		return res[0].Err
	})
	return part, err
}

func addReplica(id int32) func(*AlterPartitionRequest) {
	return func(r *AlterPartitionRequest) { r.NewISR = append(slices.Clone(r.NewISR), id) }
}

// setupBrokers registers brokers 1-3 and creates "orders" (three partitions
// on all three, preferred leaders 1, 2, 3) and "solo" (one partition on
// broker soloOn alone).
func setupBrokers(t *testing.T, cl *cluster, soloOn int32) {
	t.Helper()
	for id := int32(1); id <= 3; id++ {
		if err := cl.register(id, byte(id)); err != nil {
			t.Fatalf("register %d: %v", id, err)
		}
	}
	cl.retry(func(c *Controller) error {
		res, err := c.CreateTopics(ctxT(t), []CreateTopic{
			{Name: "orders", NumPartitions: 3, ReplicationFactor: 3},
			{Name: "solo", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{soloOn})},
		}, false)
		for _, r := range res {
			// A retry may find the topics an earlier attempt created.
			if r.Err != nil && !errors.Is(r.Err, metadata.ErrTopicExists) {
				t.Fatalf("CreateTopics %s: %v", r.Name, r.Err)
			}
		}
		return err
	})
	if p := cl.image().Partition("orders", 1); p.Replicas[0] != 2 {
		t.Fatalf("orders-1 replicas %v: the test expects broker 2 preferred", p.Replicas)
	}
}

func TestSessionExpiryFencesAndHeartbeatUnfences(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	setupBrokers(t, cl, 2)
	before := cl.image()

	// While broker 2 heartbeats, another process cannot take its id.
	cl.heartbeat(2, false)
	if err := cl.register(2, 99); !errors.Is(err, metadata.ErrDuplicateBrokerRegistration) {
		t.Fatalf("registering a second incarnation of a live broker = %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}

	// Broker 2 goes silent while 1 and 3 keep heartbeating.
	wait.For(t, "broker 2 to be fenced", func() bool {
		cl.heartbeat(1, false)
		cl.heartbeat(3, false)
		clock.Advance(testSessionTimeout / 4)
		cl.checkSessions()
		return !cl.image().IsLive(2)
	})
	img := cl.image()
	if !img.IsLive(1) || !img.IsLive(3) {
		t.Fatalf("heartbeating brokers fenced: 1 live %v, 3 live %v", img.IsLive(1), img.IsLive(3))
	}
	for _, topic := range []string{"orders", "solo"} {
		for i, old := range before.Topic(topic).Partitions {
			p := img.Partition(topic, int32(i))
			switch {
			case len(old.Replicas) == 1:
				// Its only replica: no leader, but it stays in the ISR.
				if p.Leader != metadata.NoLeader || p.LeaderEpoch != old.LeaderEpoch+1 || !slices.Equal(p.ISR, []int32{2}) {
					t.Errorf("%s-%d = %+v, want no leader, epoch %d, isr [2]", topic, i, p, old.LeaderEpoch+1)
				}
			case old.Leader == 2:
				if p.Leader == 2 || !slices.Contains(old.ISR, p.Leader) || p.LeaderEpoch != old.LeaderEpoch+1 || slices.Contains(p.ISR, 2) {
					t.Errorf("%s-%d = %+v after fencing its leader (was %+v)", topic, i, p, old)
				}
			default:
				if p.Leader != old.Leader || p.LeaderEpoch != old.LeaderEpoch || slices.Contains(p.ISR, 2) {
					t.Errorf("%s-%d = %+v, was %+v: only broker 2 should have left", topic, i, p, old)
				}
			}
		}
	}

	// AlterPartition from orders-1's new leader.
	errCases := []struct {
		name   string
		mutate func(*AlterPartitionRequest)
		want   error
	}{
		{"adding the fenced broker", addReplica(2), metadata.ErrIneligibleReplica},
		{"stale leader epoch", func(r *AlterPartitionRequest) { r.LeaderEpoch-- }, metadata.ErrFencedLeaderEpoch},
		{"stale partition epoch", func(r *AlterPartitionRequest) { r.PartitionEpoch-- }, metadata.ErrStalePartitionEpoch},
		{"not the leader", func(r *AlterPartitionRequest) { r.BrokerID = 1 }, metadata.ErrInvalidRequest},
	}
	for _, tt := range errCases {
		if _, err := cl.alterPartition("orders", 1, tt.mutate); !errors.Is(err, tt.want) {
			t.Errorf("AlterPartition, %s = %v, want %v", tt.name, err, tt.want)
		}
	}

	// Broker 2 is back and has caught up: unfenced; "solo" has its leader back.
	wait.For(t, "broker 2 to be unfenced", func() bool { return !cl.heartbeat(2, false).Fenced })
	img = cl.image()
	if p := img.Partition("solo", 0); !img.IsLive(2) || p.Leader != 2 || p.LeaderEpoch != before.Partition("solo", 0).LeaderEpoch+2 {
		t.Errorf("after unfencing: live %v, solo-0 = %+v", img.IsLive(2), p)
	}

	// The leader lets it back into orders-1's ISR; a preferred election then
	// returns leadership to it.
	old := img.Partition("orders", 1)
	p, err := cl.alterPartition("orders", 1, addReplica(2))
	if err != nil || !slices.Contains(p.ISR, 2) || p.PartitionEpoch != old.PartitionEpoch+1 || p.LeaderEpoch != old.LeaderEpoch {
		t.Fatalf("AlterPartition adding broker 2 = %+v, %v (was %+v)", p, err, old)
	}
	var results []ElectResult
	cl.retry(func(c *Controller) (err error) {
		results, err = c.ElectLeaders(ctxT(t), []TopicPartitionRef{{Topic: "orders", Partition: 1}}, ElectPreferred)
		return err
	})
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("ElectLeaders = %+v", results)
	}
	if p := cl.image().Partition("orders", 1); p.Leader != 2 || p.LeaderEpoch != old.LeaderEpoch+1 {
		t.Errorf("after the preferred election orders-1 = %+v", p)
	}
}

func TestControlledShutdown(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, func(c *Config) { c.LeaderImbalanceCheckInterval = 50 * time.Millisecond })
	setupBrokers(t, cl, 1)

	// Broker 1 asks to shut down but has not applied the hand-off yet
	// (metadata offset 0). One heartbeat marks it in controlled shutdown, for
	// every broker to see, and then moves orders-0 away from it; solo-0
	// cannot move.
	var handedOff *metadata.Image
	cl.retry(func(c *Controller) error {
		_, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, WantShutdown: true})
		handedOff = c.Image()
		return err
	})
	if p := handedOff.Partition("orders", 0); !handedOff.InControlledShutdown(1) || p.Leader == 1 || slices.Contains(p.ISR, 1) {
		t.Fatalf("after one heartbeat asking for a controlled shutdown: broker 1 marked %v, orders-0 = %+v; want marked, handed off",
			handedOff.InControlledShutdown(1), p)
	}
	// Shutting down, it may not rejoin an ISR.
	if _, err := cl.alterPartition("orders", 0, addReplica(1)); !errors.Is(err, metadata.ErrIneligibleReplica) {
		t.Errorf("AlterPartition adding a broker in controlled shutdown = %v, want INELIGIBLE_REPLICA", err)
	}

	// Once it has applied the hand-off it is fenced and told to stop.
	wait.For(t, "the controlled shutdown to complete", func() bool { return cl.heartbeat(1, true).ShouldShutdown })
	img := cl.image()
	if img.IsLive(1) {
		t.Error("broker 1 is live after its controlled shutdown")
	}
	for _, topic := range img.Topics() {
		for _, p := range topic.Partitions {
			if p.Leader == 1 || len(p.Replicas) > 1 && slices.Contains(p.ISR, 1) {
				t.Errorf("%s-%d = %+v after broker 1's controlled shutdown", topic.Name, p.Index, p)
			}
		}
	}
	checkPartitions(t, img, []partState{{"solo", 0, metadata.NoLeader, 1, []int32{1}}})

	// A new process of broker 1 registers (its old registration is fenced, so
	// this is no duplicate) and leads solo-0 again.
	if err := cl.register(1, 42); err != nil {
		t.Fatalf("re-registering after the shutdown: %v", err)
	}
	checkPartitions(t, cl.image(), []partState{{"solo", 0, 1, 2, []int32{1}}})

	// Back in orders-0's ISR, the periodic preferred election returns
	// leadership of orders-0 to it.
	if _, err := cl.alterPartition("orders", 0, addReplica(1)); err != nil {
		t.Fatalf("AlterPartition adding broker 1 back: %v", err)
	}
	wait.For(t, "the leader rebalance to move orders-0 back to broker 1", func() bool {
		return cl.image().Partition("orders", 0).Leader == 1
	})
}

func TestFailoverGracePeriod(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	for id := int32(1); id <= 3; id++ {
		if err := cl.register(id, byte(id)); err != nil {
			t.Fatal(err)
		}
		cl.heartbeat(id, false)
	}

	// The active controller fails. Brokers 1 and 2 heartbeat to the next
	// one; broker 3 is silent from now on.
	cl.kill(cl.leader())
	cl.heartbeat(1, false)
	cl.heartbeat(2, false)
	cl.advance(clock, testSessionTimeout-100*time.Millisecond, 1, 2)
	cl.checkSessions()
	if img := cl.image(); !img.IsLive(3) {
		t.Fatal("broker 3 fenced within one session timeout of the failover: no grace period")
	}

	wait.For(t, "broker 3 to be fenced after the grace period", func() bool {
		cl.heartbeat(1, false)
		cl.heartbeat(2, false)
		clock.Advance(testSessionTimeout / 4)
		cl.checkSessions()
		return !cl.image().IsLive(3)
	})
	if img := cl.image(); !img.IsLive(1) || !img.IsLive(2) {
		t.Errorf("heartbeating brokers fenced after the failover: 1 %v, 2 %v", img.IsLive(1), img.IsLive(2))
	}

	// Broker 3's session is over, so a new process may take its id; broker
	// 1's is live on the new controller, so another process may not.
	if err := cl.register(3, 33); err != nil {
		t.Errorf("registering a new incarnation of the fenced broker: %v", err)
	}
	if err := cl.register(1, 11); !errors.Is(err, metadata.ErrDuplicateBrokerRegistration) {
		t.Errorf("registering a new incarnation of a live broker = %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}
}

// fakeProbe answers the controllers' probes of broker addresses: refused for
// the addresses marked dead, accepted otherwise.
type fakeProbe struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (p *fakeProbe) setDead(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = map[string]bool{}
	}
	p.dead[addr] = true
}

func (p *fakeProbe) probe(_ context.Context, addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead[addr] {
		return fmt.Errorf("dial tcp %s: %w", addr, syscall.ECONNREFUSED)
	}
	return nil
}

// probedCluster is a sessionCluster whose probes fakeProbe answers, with
// brokers 1-3 registered, heartbeating and holding the topics of setupBrokers.
func probedCluster(t *testing.T) (*fakeClock, *fakeProbe, *cluster) {
	clock := newFakeClock()
	probes := &fakeProbe{}
	cl := sessionCluster(t, clock, func(c *Config) { c.probe = probes.probe })
	setupBrokers(t, cl, 2)
	for id := int32(1); id <= 3; id++ {
		cl.heartbeat(id, false)
	}
	return clock, probes, cl
}

// TestDeadBrokerFencedAtOnce: a broker whose link closed is fenced as soon as
// a probe of its address is refused, with the session clock standing still;
// one whose probe is accepted (a paused process) waits for its session
// timeout.
func TestDeadBrokerFencedAtOnce(t *testing.T) {
	clock, probes, cl := probedCluster(t)
	ctrl := cl.nodes[cl.leader()]
	var alive int32 = 1
	if ctrl.cfg.NodeID == alive {
		alive = 3
	}
	var dead int32 = 2
	if ctrl.cfg.NodeID == dead {
		dead = 3
	}
	before := cl.image()

	// The paused broker's link closes (say, a proxy dropped it), but its
	// address accepts connections: no fencing within the session.
	ctrl.BrokerLinkClosed(alive, before.Broker(alive).Epoch)
	// The dead one's link closes and its address refuses connections.
	probes.setDead(string(cl.addrs[dead-1]))
	ctrl.BrokerLinkClosed(dead, before.Broker(dead).Epoch)
	wait.For(t, fmt.Sprintf("broker %d to be fenced without a session timeout", dead), func() bool {
		return !cl.image().IsLive(dead)
	})
	img := cl.image()
	if !img.IsLive(alive) || !img.IsLive(ctrl.cfg.NodeID) {
		t.Errorf("brokers fenced with the dead one: %d live %v, %d live %v", alive, img.IsLive(alive), ctrl.cfg.NodeID, img.IsLive(ctrl.cfg.NodeID))
	}
	for i, old := range before.Topic("orders").Partitions {
		if p := img.Partition("orders", int32(i)); old.Leader == dead && (p.Leader == dead || p.LeaderEpoch != old.LeaderEpoch+1) {
			t.Errorf("orders-%d = %+v after its leader %d was proven dead", i, p, dead)
		}
	}

	// The paused broker resumes and heartbeats: still live. Had it stayed
	// silent, the session timeout would fence it.
	cl.heartbeat(alive, false)
	if !cl.image().IsLive(alive) {
		t.Errorf("broker %d fenced while its address accepted connections", alive)
	}
	cl.advance(clock, testSessionTimeout+time.Millisecond, ctrl.cfg.NodeID)
	cl.checkSessions()
	if cl.image().IsLive(alive) {
		t.Errorf("broker %d still live after a silent session timeout", alive)
	}
}

// TestControllerFailoverFencesDeadBrokerAtOnce: the active controller's node
// dies. Its successor has heard from no broker yet; it probes them all, fences
// the dead node's broker as soon as its address refuses connections, and no
// live broker, although none has heartbeated to it yet.
func TestControllerFailoverFencesDeadBrokerAtOnce(t *testing.T) {
	_, probes, cl := probedCluster(t)
	old := cl.leader()
	dead := int32(old + 1)
	probes.setDead(string(cl.addrs[old]))
	cl.kill(old)
	wait.For(t, fmt.Sprintf("broker %d (the old active controller) to be fenced without a session timeout", dead), func() bool {
		return !cl.image().IsLive(dead)
	})
	img := cl.image()
	for id := int32(1); id <= 3; id++ {
		if id != dead && !img.IsLive(id) {
			t.Errorf("live broker %d fenced after the controller failover", id)
		}
	}
	for i, p := range img.Topic("orders").Partitions {
		if p.Leader == dead {
			t.Errorf("orders-%d still led by the dead broker %d", i, dead)
		}
	}
}

// TestNewPartitionsSkipBrokersInControlledShutdown: a broker in controlled
// shutdown neither leads nor joins the ISR of a partition created while it
// shuts down (it joins once back and caught up), as Kafka's controller builds
// a new partition's ISR from the brokers registered, unfenced and not
// shutting down. CreateTopics and CreatePartitions used to plan with every
// live broker, so a new partition could be led by a broker about to stop.
func TestNewPartitionsSkipBrokersInControlledShutdown(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	setupBrokers(t, cl, 1)

	// Broker 1 asks to shut down and has not applied the hand-off yet
	// (metadata offset 0), so it stays in controlled shutdown.
	wait.For(t, "orders-0 to be handed off", func() bool {
		cl.retry(func(c *Controller) error {
			_, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, WantShutdown: true})
			return err
		})
		p := cl.image().Partition("orders", 0)
		return p.Leader != 1 && !slices.Contains(p.ISR, 1)
	})

	cl.retry(func(c *Controller) error {
		res, err := c.CreateTopics(ctxT(t), []CreateTopic{
			{Name: "fresh", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{1, 2, 3})},
		}, false)
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, metadata.ErrTopicExists) {
				t.Fatalf("CreateTopics %s: %v", r.Name, r.Err)
			}
		}
		return err
	})
	cl.retry(func(c *Controller) error {
		res, err := c.CreatePartitions(ctxT(t), []CreatePartitions{
			{Topic: "orders", Count: 4, Assignment: [][]int32{{1, 3, 2}}},
		}, false)
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, metadata.ErrInvalidPartitions) {
				t.Fatalf("CreatePartitions %s: %v", r.Topic, r.Err)
			}
		}
		return err
	})

	img := cl.image()
	for _, p := range []*metadata.Partition{img.Partition("fresh", 0), img.Partition("orders", 3)} {
		if p == nil {
			t.Fatal("partition not created")
		}
		if p.Leader == 1 || slices.Contains(p.ISR, 1) {
			t.Errorf("new partition with replicas %v: leader %d isr %v; broker 1 is in controlled shutdown "+
				"(Kafka: leader %d, isr without 1)", p.Replicas, p.Leader, p.ISR, p.Replicas[1])
		}
	}
}

// TestRegistrationNotFencedBeforeItsSession: a registration is in the image,
// unfenced, before RegisterBroker has finished its other steps (here the
// proposal of its features) and started its session. A session check in
// between, more than a session timeout into the term, must not take the new
// registration for a silent broker: it counts from the registration.
func TestRegistrationNotFencedBeforeItsSession(t *testing.T) {
	clock := newFakeClock()
	cfg := singleConfig(t.TempDir())
	cfg.SessionTimeout, cfg.clock = testSessionTimeout, clock.Now
	c := start(t, cfg)
	for range 6 { // 1.5 session timeouts into the term, observed all along
		clock.Advance(testSessionTimeout / 4)
		if err := c.fenceExpired(); err != nil {
			t.Fatal(err)
		}
	}
	images, stop := c.Watch()
	defer stop()
	expired := make(chan []int32, 1)
	go func() {
		for img := range images {
			if img.Broker(1) != nil {
				// The check fenceExpired makes, as soon as the image holds the
				// registration.
				expired <- c.sessions(clock.Now()).expired(img, clock.Now())
				return
			}
		}
	}()
	epoch := mustRegister(t, c, RegisterBroker{ID: 1, Incarnation: metadata.UUID{1}, Host: "127.0.0.1", Port: 9091, Features: metadata.SupportedFeatures})
	if ids := <-expired; len(ids) > 0 {
		t.Fatalf("brokers %v expired as the registration was applied", ids)
	}
	if err := c.fenceExpired(); err != nil {
		t.Fatal(err)
	}
	if b := c.Image().Broker(1); b.Epoch != epoch || b.Fenced {
		t.Fatalf("broker 1 after its registration and a session check: %+v, want epoch %d unfenced", b, epoch)
	}
}
