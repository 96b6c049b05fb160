package controller

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// TestObserverJoins: a broker-only node starts with no Raft state, is added as
// a non-voter when it registers, receives the metadata log, and never votes.
// A node id held by a voter is refused. Unregistering the broker removes it
// from the configuration again.
func TestObserverJoins(t *testing.T) {
	cl := newCluster(t, 3)
	obs, addr := cl.startObserver(4)
	if obs.LeaderID() >= 0 {
		t.Fatalf("an observer nobody added knows leader %d", obs.LeaderID())
	}

	err := cl.call(func(c *Controller) error {
		_, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 2, Host: "127.0.0.1", Port: 9092, ObserverAddr: string(addr)})
		return err
	})
	if !errors.Is(err, metadata.ErrDuplicateBrokerRegistration) {
		t.Fatalf("registering voter id 2 as an observer = %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}
	cl.registerObserver(obs, addr)
	// A retry (the same registration) does not add a second member.
	l := cl.nodes[cl.leader()]
	if _, err := l.RegisterBroker(ctxT(t), RegisterBroker{ID: 4, Host: "127.0.0.1", Port: 9094, ObserverAddr: string(addr)}); err != nil {
		t.Fatalf("registration retry: %v", err)
	}
	conf := l.raft.GetConfiguration()
	if err := conf.Error(); err != nil {
		t.Fatal(err)
	}
	servers := conf.Configuration().Servers
	if len(servers) != 4 || servers[3].ID != "4" || servers[3].Suffrage != raft.Nonvoter {
		t.Fatalf("configuration = %+v, want voters 1-3 and non-voter 4", servers)
	}

	// Metadata keeps flowing to the observer, and it never leads, even when
	// the leader dies.
	cl.retry(func(c *Controller) error {
		_, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "seen", NumPartitions: 1, ReplicationFactor: 1}}, false)
		return err
	})
	wait.For(t, "the observer to see the topic", func() bool { return obs.Image().Topic("seen") != nil })
	cl.kill(cl.leader())
	newLeader := cl.leader()
	if obs.IsLeader() {
		t.Fatal("the observer leads")
	}
	wait.For(t, "the observer to follow the new leader", func() bool { return obs.LeaderID() == int32(newLeader+1) })
	if _, addr, ok := obs.LeaderAddr(); !ok || addr != string(cl.addrs[newLeader]) {
		t.Fatalf("observer's LeaderAddr = %q %v, want %q", addr, ok, cl.addrs[newLeader])
	}

	// Unregistering the broker also takes it out of the quorum's members.
	cl.retry(func(c *Controller) error { return c.UnregisterBroker(ctxT(t), 4) })
	l = cl.nodes[cl.leader()]
	if l.Image().Broker(4) != nil {
		t.Fatal("broker 4 still registered")
	}
	conf = l.raft.GetConfiguration()
	if err := conf.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range conf.Configuration().Servers {
		if s.ID == "4" {
			t.Fatalf("configuration still has node 4: %+v", conf.Configuration().Servers)
		}
	}
}

// startObserver starts node id as a broker-only node (Config.Observer) that
// the cluster's voters can reach; nobody has added it yet.
func (cl *cluster) startObserver(id int32) (*Controller, raft.ServerAddress) {
	cl.t.Helper()
	addr, tr := raft.NewInmemTransport("")
	for i, other := range cl.trans {
		tr.Connect(cl.addrs[i], other)
		other.Connect(addr, tr)
	}
	obs, err := Start(Config{
		NodeID: id, DataDir: cl.t.TempDir(), Observer: true, Transport: tr,
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 10 * time.Millisecond,
		SessionTimeout: time.Hour, Logger: testLogger(), Rand: testRand(byte(id)),
	})
	if err != nil {
		cl.t.Fatalf("Start observer %d: %v", id, err)
	}
	cl.t.Cleanup(func() { _ = obs.Close() })
	return obs, addr
}

// registerObserver registers obs as a broker at addr, which adds it to the
// quorum as a non-voting member, and waits until it has applied its own
// unfenced registration.
func (cl *cluster) registerObserver(obs *Controller, addr raft.ServerAddress) {
	cl.t.Helper()
	id := obs.cfg.NodeID
	var epoch int64
	cl.retry(func(c *Controller) (err error) {
		epoch, err = c.RegisterBroker(ctxT(cl.t), RegisterBroker{ID: id, Host: "127.0.0.1", Port: 9090 + id, ObserverAddr: string(addr)})
		return err
	})
	if err := obs.WaitReady(ctxT(cl.t)); err != nil {
		cl.t.Fatalf("observer WaitReady: %v", err)
	}
	wait.For(cl.t, "the observer to apply its own registration", func() bool {
		b := obs.Image().Broker(id)
		return b != nil && b.Epoch == epoch && !b.Fenced
	})
}

// TestRegistrationRacingUnregistrationKeepsMembership: a running broker-only
// node whose registration is removed registers again at once (its next
// heartbeat is refused), so its new registration can meet the removal of its
// quorum membership. Whatever the order, a registered broker-only node must
// stay a member (or the metadata log stops reaching it and it is never
// unfenced again: finding 24 in docs/reliability.md) and an unregistered one
// must not be.
func TestRegistrationRacingUnregistrationKeepsMembership(t *testing.T) {
	cl := newCluster(t, 3)
	obs, addr := cl.startObserver(4)
	cl.registerObserver(obs, addr)
	for round := range 10 {
		l := cl.nodes[cl.leader()]
		var wg sync.WaitGroup
		var unregErr, regErr error
		wg.Go(func() { unregErr = l.UnregisterBroker(ctxT(t), 4) })
		wg.Go(func() {
			_, regErr = l.RegisterBroker(ctxT(t), RegisterBroker{ID: 4, Host: "127.0.0.1", Port: 9094, ObserverAddr: string(addr)})
		})
		wg.Wait()
		if unregErr != nil || regErr != nil {
			t.Fatalf("round %d: unregister = %v, register = %v", round, unregErr, regErr)
		}
		registered := l.Image().Broker(4) != nil
		member, err := l.observerKnown(4, string(addr))
		if err != nil {
			t.Fatal(err)
		}
		if registered != member {
			t.Fatalf("round %d: broker 4 registered = %v but a member of the quorum = %v", round, registered, member)
		}
		if !registered {
			cl.registerObserver(obs, addr)
		}
	}
}

// TestUnregisterRetryLeavesQuorum: an unregistration that wrote the broker's
// removal but ended before its membership change (its caller gave up, the
// controller failed over) is retried by the operator; the retry is refused
// with BROKER_ID_NOT_REGISTERED, as Kafka answers it, and still takes the
// broker-only node out of the quorum.
func TestUnregisterRetryLeavesQuorum(t *testing.T) {
	cl := newCluster(t, 3)
	obs, addr := cl.startObserver(4)
	cl.registerObserver(obs, addr)
	cl.retry(func(c *Controller) error {
		return c.run(ctxT(t), func(img *metadata.Image) ([]metadata.Record, error) {
			return PlanUnregisterBroker(img, 4, nil)
		})
	})
	err := cl.call(func(c *Controller) error { return c.UnregisterBroker(ctxT(t), 4) })
	if !errors.Is(err, metadata.ErrBrokerIDNotRegistered) {
		t.Fatalf("unregistering again = %v, want BROKER_ID_NOT_REGISTERED", err)
	}
	if member, err := cl.nodes[cl.leader()].observerKnown(4, string(addr)); err != nil || member {
		t.Fatalf("node 4 a member of the quorum = %v (%v) after its unregistration, want false", member, err)
	}
}
