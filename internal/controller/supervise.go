package controller

import (
	"context"
	"errors"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// minSessionCheck bounds how often the session check runs.
const minSessionCheck = 10 * time.Millisecond

// sessions returns the broker sessions after noting that this node acts as
// the active controller in Raft's current term at now (a new term starts
// every broker's clock afresh). Call it as the leader: inside a plan, or
// after IsLeader.
func (c *Controller) sessions(now time.Time) *liveness {
	if paused := c.live.observe(c.raft.CurrentTerm(), now); paused > 0 {
		c.log.Warn("the active controller was paused and heard no heartbeat: every broker's session starts afresh",
			"paused", paused.Round(time.Millisecond), "session_timeout", c.cfg.SessionTimeout)
	}
	return c.live
}

// superviseBrokers runs for the controller's lifetime. Every probeInterval
// (and whenever woken) it runs the leader watch of a follower voter
// (leader_watch.go) and, while this node is the active controller, probes
// suspect brokers (probe.go), fences brokers whose session is over, elects
// leaders for leaderless partitions of topics that allow unclean election and
// records the voters' directories (voter_directory.go). Every
// Tokens.ExpiryCheckInterval it removes expired delegation tokens. Every
// LeaderImbalanceCheckInterval (if set) the active controller moves
// leadership back to preferred replicas.
func (c *Controller) superviseBrokers() {
	defer c.wg.Done()
	check := time.NewTicker(min(max(c.cfg.SessionTimeout/8, minSessionCheck), probeInterval))
	defer check.Stop()
	var rebalance <-chan time.Time
	if iv := c.cfg.LeaderImbalanceCheckInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		rebalance = t.C
	}
	var sweepTokens <-chan time.Time
	if c.cfg.Tokens.SecretKey != "" {
		t := time.NewTicker(c.cfg.Tokens.withDefaults().ExpiryCheckInterval)
		defer t.Stop()
		sweepTokens = t.C
	}
	for {
		select {
		case <-c.done:
			return
		case <-check.C:
		case <-c.wake:
		case <-sweepTokens:
			if c.IsLeader() {
				c.logDutyError("removing expired delegation tokens", c.sweepExpiredTokens())
			}
			continue
		case <-rebalance:
			if c.IsLeader() {
				c.logDutyError("preferred leader election", c.rebalanceLeaders())
			}
			continue
		}
		c.watchLeader()
		if c.IsLeader() {
			c.probeSuspects()
			c.logDutyError("fencing expired brokers", c.fenceExpired())
			c.logDutyError("unclean leader election", c.electUnclean())
			c.logDutyError("recording voter directories", c.recordVoterDirectories())
		}
	}
}

func (c *Controller) logDutyError(duty string, err error) {
	if err != nil && !errors.Is(err, ErrNotController) && !errors.Is(err, ErrClosed) {
		c.log.Warn(duty+" failed", "err", err)
	}
}

// fenceExpired fences, in one proposal, every unfenced broker whose session
// is over (expired, or proven dead by a probe): each leaves the ISRs it is not the last member of, and the
// partitions it led elect new leaders (see PlanFenceBroker).
func (c *Controller) fenceExpired() error {
	now := c.cfg.clock()
	if len(c.sessions(now).expired(c.Image(), now)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	var fenced []*metadata.Broker
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		now := c.cfg.clock()
		live := c.sessions(now)
		recs, ids, err := planFenceBrokers(img, live.expired(img, now), live.shuttingDown())
		fenced = fenced[:0]
		for _, id := range ids {
			fenced = append(fenced, img.Broker(id))
		}
		return recs, err
	})
	if err != nil {
		return err
	}
	off := int64(c.Image().Offset())
	for _, b := range fenced {
		proven := c.live.proven(b.ID, b.Epoch)
		c.live.fenced(b.ID, b.Epoch, off)
		if proven {
			c.log.Info("fenced broker: its controller address refuses connections after its link closed",
				"broker", b.ID, "epoch", b.Epoch)
			continue
		}
		c.log.Info("fenced broker: no heartbeat within the session timeout",
			"broker", b.ID, "epoch", b.Epoch, "session_timeout", c.cfg.SessionTimeout)
	}
	return nil
}

// electUnclean proposes PlanUncleanElections when the applied image has a
// partition it would elect a leader for (a partition whose whole ISR was lost
// before its topic allowed unclean election), so that the check costs no
// proposal otherwise.
func (c *Controller) electUnclean() error {
	down := c.sessions(c.cfg.clock()).shuttingDown()
	if len(PlanUncleanElections(c.Image(), down)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	n := 0
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		recs := PlanUncleanElections(img, c.sessions(c.cfg.clock()).shuttingDown())
		n = len(recs)
		return recs, nil
	})
	if err == nil && n > 0 {
		c.log.Warn("unclean leader election: elected leaders outside the ISR (records only the lost ISR held are gone)",
			"partitions", n)
	}
	return err
}

// rebalanceLeaders runs a preferred-replica election over every partition.
func (c *Controller) rebalanceLeaders() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	results, err := c.ElectLeaders(ctx, nil, ElectPreferred)
	moved := 0
	for _, r := range results {
		if r.Err == nil {
			moved++
		}
	}
	if moved > 0 {
		c.log.Info("moved leadership back to preferred replicas", "partitions", moved)
	}
	return err
}
