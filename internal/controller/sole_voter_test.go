package controller

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/wait"
)

func TestSoleVoter(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf raft.Configuration
		want bool
	}{
		{"self", raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1"}}}, true},
		{"self and a nonvoter", raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1"}, {Suffrage: raft.Nonvoter, ID: "4"}}}, true},
		{"another", raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "2"}}}, false},
		{"two voters", raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1"}, {Suffrage: raft.Voter, ID: "2"}}}, false},
		{"self a nonvoter", raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Nonvoter, ID: "1"}}}, false},
		{"empty", raft.Configuration{}, false},
	} {
		if got := soleVoter(tc.conf, "1"); got != tc.want {
			t.Errorf("%s: soleVoter = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSoleVoterElectsAtOnce: a one-voter quorum with a heartbeat timeout of a
// minute leads within seconds (Raft alone would wait a minute or two), and it
// restores the configured timeouts once a second voter joins.
func TestSoleVoterElectsAtOnce(t *testing.T) {
	addr1, tr1 := raft.NewInmemTransport("")
	addr2, tr2 := raft.NewInmemTransport("")
	tr1.Connect(addr2, tr2)
	tr2.Connect(addr1, tr1)
	cfg := func(id int32, tr raft.Transport) Config {
		return Config{
			NodeID: id, DataDir: t.TempDir(), Transport: tr,
			HeartbeatTimeout: time.Minute, ElectionTimeout: time.Minute,
			LeaderLeaseTimeout: 500 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
			SessionTimeout: time.Hour, Logger: testLogger(), Rand: testRand(9),
		}
	}
	began := time.Now()
	c1 := start(t, cfg(1, tr1))
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("a sole voter took %v to lead", took)
	}
	if !c1.IsLeader() || !c1.shortTimeouts.Load() {
		t.Fatalf("leader %v, short timeouts %v; want both", c1.IsLeader(), c1.shortTimeouts.Load())
	}

	c2cfg := cfg(2, tr2)
	c2cfg.Observer = true
	c2, err := Start(c2cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	if c2.shortTimeouts.Load() {
		t.Fatal("a node with no configuration shortened its timeouts")
	}
	if err := c1.raft.AddVoter(serverID(2), addr2, 0, 0).Error(); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	wait.For(t, "the configured timeouts to be restored", func() bool { return !c1.shortTimeouts.Load() })
	if !c1.IsLeader() {
		t.Fatal("node 1 lost leadership when a voter joined")
	}
}

// TestFirstElectionShortened: three voters with a heartbeat timeout of a
// minute elect a leader within seconds (Raft alone would wait a minute or
// two), every voter then restores the configured timeouts, and a voter
// restarted into the running quorum neither disturbs its leader nor keeps
// the short timeouts once it hears from it.
func TestFirstElectionShortened(t *testing.T) {
	began := time.Now()
	cl := newCluster(t, 3, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout = time.Minute, time.Minute
		c.LeaderLeaseTimeout = 500 * time.Millisecond
	})
	lead := cl.leader()
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("three voters took %v to elect a leader", took)
	}
	wait.For(t, "every voter to restore the configured timeouts", func() bool {
		for _, c := range cl.nodes {
			if c.shortTimeouts.Load() || c.raft.ReloadableConfig().HeartbeatTimeout != time.Minute {
				return false
			}
		}
		return true
	})
	term := cl.nodes[lead].raft.CurrentTerm()

	other := (lead + 1) % 3
	cl.kill(other)
	cl.restart(other)
	wait.For(t, "the restarted voter to hear from the leader and restore its timeouts", func() bool {
		return !cl.nodes[other].shortTimeouts.Load()
	})
	if !cl.nodes[lead].IsLeader() || cl.nodes[lead].raft.CurrentTerm() != term {
		t.Fatalf("the leader changed (leading %v, term %d, was %d) when a voter restarted", cl.nodes[lead].IsLeader(), cl.nodes[lead].raft.CurrentTerm(), term)
	}
}
