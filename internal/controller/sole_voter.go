package controller

import (
	"github.com/hashicorp/raft"
)

// A node whose Raft configuration has one voter, itself, needs no election
// timeout: no other voter can lead, so waiting HeartbeatTimeout (up to twice
// that, randomised) before electing itself is only start-up delay. Raft's own
// timeouts are chosen for a quorum of several, so for a sole voter:
//
//  1. After NewRaft, the heartbeat and election timeouts are lowered through
//     ReloadConfig to the leader lease timeout (the least value Raft accepts,
//     since the lease, which cannot be reloaded, must not exceed the heartbeat
//     timeout). Lowering the heartbeat timeout makes a follower re-arm its
//     timer at once; with no leader ever heard from it then elects itself
//     immediately, and a quorum of one wins at once.
//  2. A watcher follows Raft's peer and state observations; once the
//     configuration holds another voter (a voter added at runtime), it
//     restores the configured timeouts, so a quorum of several elects with the
//     usual patience. The lease was never changed, so the leader keeps it.
//
// A configuration of several voters keeps the configured timeouts from the
// start, and so does one whose heartbeat timeout already equals the lease.

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

// maybeElectAlone applies step 1 above when this node is the sole voter and
// starts the watcher of step 2. It runs right after NewRaft.
func (c *Controller) maybeElectAlone(rc *raft.Config) error {
	if c.cfg.Observer || rc.LeaderLeaseTimeout >= rc.HeartbeatTimeout {
		return nil
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	if !soleVoter(f.Configuration(), rc.LocalID) {
		return nil
	}
	normal := reloadable(rc)
	short := normal
	short.HeartbeatTimeout = rc.LeaderLeaseTimeout
	short.ElectionTimeout = min(rc.ElectionTimeout, rc.LeaderLeaseTimeout)
	// The watcher is registered before the change, so no voter added in
	// between goes unseen.
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
	c.soleVoterTimeouts.Store(true)
	c.wg.Add(1)
	go c.restoreTimeoutsWhenJoined(rc.LocalID, normal, obs, observer)
	return nil
}

// restoreTimeoutsWhenJoined is step 2: it waits for a configuration with
// another voter, then restores the configured timeouts.
func (c *Controller) restoreTimeoutsWhenJoined(id raft.ServerID, normal raft.ReloadableConfig, obs <-chan raft.Observation, observer *raft.Observer) {
	defer c.wg.Done()
	defer c.raft.DeregisterObserver(observer)
	for {
		select {
		case <-obs:
		case <-c.done:
			return
		}
		// A dropped observation is harmless: the one in the channel is read
		// after it, and the configuration is read afresh here.
		f := c.raft.GetConfiguration()
		if f.Error() != nil || soleVoter(f.Configuration(), id) {
			continue
		}
		if err := c.raft.ReloadConfig(normal); err != nil {
			c.log.Error("restoring the raft timeouts after a voter joined", "err", err)
			return
		}
		c.soleVoterTimeouts.Store(false)
		c.log.Info("another voter joined: the raft election timeouts are the configured ones again",
			"heartbeat_timeout", normal.HeartbeatTimeout, "election_timeout", normal.ElectionTimeout)
		return
	}
}
