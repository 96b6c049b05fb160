package controller

import (
	"github.com/hashicorp/raft"
)

// Raft's election timeouts are chosen for a running quorum: a follower waits
// HeartbeatTimeout (up to twice that, randomised: 1-2s at the defaults)
// without hearing from a leader before it stands. At start-up there is no
// leader to wait for, so that wait is only start-up delay:
//
//   - A node whose configuration has one voter, itself, needs no timeout at
//     all: no other voter can lead, and a quorum of one wins at once.
//   - A voter of several has not heard from any leader since its process
//     started: a fresh cluster has none yet, and a restarted voter hears from
//     the running leader within one of its heartbeats (HeartbeatTimeout/10).
//
// So, right after NewRaft:
//
//  1. A voter lowers its heartbeat and election timeouts through ReloadConfig
//     to the leader lease timeout (the least value Raft accepts, since the
//     lease, which cannot be reloaded, must not exceed the heartbeat timeout).
//     Lowering the heartbeat timeout makes a follower re-arm its timer at
//     once. A sole voter then elects itself immediately; a voter of several
//     stands after 1-2 leases (0.5-1s at the defaults) instead of 1-2s.
//  2. A watcher follows Raft's peer, state and leader observations; once the
//     configuration holds another voter and a leader is known (this node
//     included), it restores the configured timeouts, so later elections use
//     the usual patience. The lease was never changed, so a leader keeps it.
//
// A restarted voter that stands early in a running cluster disturbs nothing:
// Raft's pre-vote is refused by every voter that knows a leader, and the
// pre-vote does not raise the term. A node that is not a voter, or whose
// heartbeat timeout already equals the lease, keeps the configured timeouts.

// soleVoter reports whether conf has exactly one voter, id.
func soleVoter(conf raft.Configuration, id raft.ServerID) bool {
	voters := 0
	self := false
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == id
		}
	}
	return voters == 1 && self
}

// reloadable is the part of rc that ReloadConfig can change.
func reloadable(rc *raft.Config) raft.ReloadableConfig {
	return raft.ReloadableConfig{
		TrailingLogs:      rc.TrailingLogs,
		SnapshotInterval:  rc.SnapshotInterval,
		SnapshotThreshold: rc.SnapshotThreshold,
		HeartbeatTimeout:  rc.HeartbeatTimeout,
		ElectionTimeout:   rc.ElectionTimeout,
	}
}

// voter reports whether conf has id among its voters.
func voter(conf raft.Configuration, id raft.ServerID) bool {
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter && s.ID == id {
			return true
		}
	}
	return false
}

// maybeShortenElection applies step 1 above when this node is a voter and
// starts the watcher of step 2. It runs right after NewRaft.
func (c *Controller) maybeShortenElection(rc *raft.Config) error {
	if c.cfg.Observer || rc.LeaderLeaseTimeout >= rc.HeartbeatTimeout {
		return nil
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	if !voter(f.Configuration(), rc.LocalID) {
		return nil
	}
	normal := reloadable(rc)
	short := normal
	short.HeartbeatTimeout = rc.LeaderLeaseTimeout
	short.ElectionTimeout = min(rc.ElectionTimeout, rc.LeaderLeaseTimeout)
	// The watcher is registered before the change, so no voter added and no
	// leader elected in between goes unseen.
	obs := make(chan raft.Observation, 1)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.PeerObservation, raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	})
	c.raft.RegisterObserver(observer)
	if err := c.raft.ReloadConfig(short); err != nil {
		c.raft.DeregisterObserver(observer)
		return err
	}
	c.shortTimeouts.Store(true)
	c.wg.Add(1)
	go c.restoreTimeouts(rc.LocalID, normal, obs, observer)
	return nil
}

// restoreTimeouts is step 2: it waits for a configuration with another voter
// and a known leader, then restores the configured timeouts.
func (c *Controller) restoreTimeouts(id raft.ServerID, normal raft.ReloadableConfig, obs <-chan raft.Observation, observer *raft.Observer) {
	defer c.wg.Done()
	defer c.raft.DeregisterObserver(observer)
	// Observations only wake the check, which reads the state afresh: a
	// dropped one is harmless, and a leader elected before the observer was
	// registered is found by the first check.
	for {
		f := c.raft.GetConfiguration()
		_, leader := c.raft.LeaderWithID()
		if f.Error() == nil && !soleVoter(f.Configuration(), id) && leader != "" {
			break
		}
		select {
		case <-obs:
		case <-c.done:
			return
		}
	}
	if err := c.raft.ReloadConfig(normal); err != nil {
		c.log.Error("restoring the raft timeouts", "err", err)
		return
	}
	c.shortTimeouts.Store(false)
	c.log.Info("a leader is known: the raft election timeouts are the configured ones again",
		"heartbeat_timeout", normal.HeartbeatTimeout, "election_timeout", normal.ElectionTimeout)
}
