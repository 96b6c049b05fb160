package controller

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
)

// A dead active controller is replaced only after a Raft election, and a
// follower voter starts one only when it has heard nothing from the leader
// for its heartbeat timeout (HeartbeatTimeout, up to twice that, randomised:
// 1-2s at the defaults). When the leader's process is gone that wait is
// needless, and the leader watch shortens it, on each follower voter:
//
//  1. When the leader has been silent for 3*HeartbeatTimeout/10 (three of
//     the leader's heartbeat periods), the follower probes the leader's
//     address, as the active controller probes brokers (probe.go).
//  2. If the probe is refused, no process listens there. Once the leader has
//     been silent for LeaderLeaseTimeout (after which a live leader without
//     its quorum steps down anyway) plus a random stagger of up to another
//     LeaderLeaseTimeout, the follower lowers its heartbeat and election
//     timeouts to LeaderLeaseTimeout through ReloadConfig, which re-arms its
//     timer at once: it starts an election straight away. The stagger keeps
//     the followers from standing at the same moment, which splits the vote
//     and costs an election timeout: the first to stand is refused by those
//     that still know the old leader (Raft's pre-vote), who clear it when
//     their turn comes and win with the first's vote.
//  3. When a leader is known and heard from again (or this node leads), the
//     configured timeouts come back.
//
// A paused or cut-off leader is never proven dead (its kernel accepts the
// probe, or the probe times out): the followers wait their usual timeout.
// There is nothing to watch while a sole voter's shortened timeouts are in
// force (sole_voter.go), or when the lease is as long as the heartbeat
// timeout (nothing to lower).

// leaderWatch is one follower's state of the watch. Only step changes it.
type leaderWatch struct {
	// refused is the leader whose address refused a probe while it was
	// silent; empty when none.
	refused raft.ServerID
	// lowered: this node's timeouts are lowered; normal is what to restore.
	lowered bool
	normal  raft.ReloadableConfig
}

// watchInput is what the driver sees of Raft at one tick.
type watchInput struct {
	leader   raft.ServerID // the known leader, or ""
	silent   time.Duration // since the last contact with a leader
	isLeader bool
	voter    bool // this node is a voter in the latest configuration
}

type watchAction int

const (
	watchNothing watchAction = iota
	watchProbe               // probe the leader's address
	watchLower               // lower the timeouts (and remember the normal ones)
	watchRestore             // put back w.normal
)

// step decides the watch's next action; suspectAfter and lowerAfter are steps
// 1 and 2's silences.
func (w *leaderWatch) step(in watchInput, suspectAfter, lowerAfter time.Duration) watchAction {
	if w.lowered {
		if in.isLeader || (in.leader != "" && in.leader != w.refused) || (in.leader != "" && in.silent < lowerAfter) {
			w.lowered, w.refused = false, ""
			return watchRestore
		}
		return watchNothing
	}
	if !in.voter || in.isLeader || in.leader == "" || in.silent < suspectAfter {
		w.refused = ""
		return watchNothing
	}
	if w.refused != in.leader {
		return watchProbe
	}
	if in.silent >= lowerAfter {
		w.lowered = true
		return watchLower
	}
	return watchNothing
}

// refusedBy notes that a probe of leader's address was refused (ignored
// while lowered: the election is under way).
func (w *leaderWatch) refusedBy(leader raft.ServerID) {
	if !w.lowered {
		w.refused = leader
	}
}

// watchLeader runs one tick of the leader watch (the supervisor's).
func (c *Controller) watchLeader() {
	if c.shortTimeouts.Load() || c.cfg.LeaderLeaseTimeout >= c.cfg.HeartbeatTimeout {
		return
	}
	addr, id := c.raft.LeaderWithID()
	in := watchInput{leader: id, isLeader: c.IsLeader(), silent: time.Since(c.raft.LastContact())}
	if id != "" && !in.isLeader {
		in.voter = c.isVoter()
	}
	c.lw.Lock()
	if c.lw.stagger == 0 {
		c.lw.stagger = rand.N(c.cfg.LeaderLeaseTimeout) + 1
	}
	act := c.lw.w.step(in, c.cfg.HeartbeatTimeout*3/10, c.cfg.LeaderLeaseTimeout+c.lw.stagger)
	if act == watchLower {
		c.lw.w.normal = c.raft.ReloadableConfig()
	}
	normal := c.lw.w.normal
	c.lw.Unlock()
	switch act {
	case watchProbe:
		c.probeLeader(id, string(addr))
	case watchLower:
		short := normal
		short.HeartbeatTimeout = c.cfg.LeaderLeaseTimeout
		short.ElectionTimeout = min(normal.ElectionTimeout, c.cfg.LeaderLeaseTimeout)
		if err := c.raft.ReloadConfig(short); err != nil {
			c.log.Warn("could not shorten the election after the leader died", "err", err)
			c.lw.Lock()
			c.lw.w.lowered = false
			c.lw.Unlock()
			return
		}
		c.log.Info("the active controller's address refuses connections: electing a new one now",
			"leader", id, "silent_for", in.silent.Round(time.Millisecond))
	case watchRestore:
		if err := c.raft.ReloadConfig(normal); err != nil {
			c.log.Warn("could not restore the election timeouts", "err", err)
		}
	}
}

// probeLeader probes the leader's address in the background, once at a time.
func (c *Controller) probeLeader(id raft.ServerID, addr string) {
	c.lw.Lock()
	if c.lw.probing || addr == "" {
		c.lw.Unlock()
		return
	}
	c.lw.probing = true
	c.lw.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := c.cfg.probe(ctx, addr)
		cancel()
		c.lw.Lock()
		c.lw.probing = false
		if isRefused(err) {
			c.lw.w.refusedBy(id)
		}
		c.lw.Unlock()
	}()
}

// isVoter reports whether this node is a voter in the latest Raft
// configuration.
func (c *Controller) isVoter() bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == serverID(c.cfg.NodeID) {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}
