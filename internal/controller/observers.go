package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
)

// Observers are broker-only nodes: non-voting members of the Raft
// configuration, so the metadata log reaches them as it reaches voters, but they
// never vote, never lead and do not count towards a quorum. A broker-only node
// starts its Controller with Config.Observer and asks the active controller to
// add it when it registers (RegisterBroker.ObserverAddr).

// LeaderAddr returns the active controller's node id and Raft address as this
// node knows them (the controller link shares that address), or ok=false.
func (c *Controller) LeaderAddr() (id int32, addr string, ok bool) {
	a, _ := c.raft.LeaderWithID()
	id = c.LeaderID()
	return id, string(a), id >= 0 && a != ""
}

// MetadataLastHeard is when this node last heard from the Raft leader (now on
// the leader; zero if never): a broker that hears nothing gets no metadata.
func (c *Controller) MetadataLastHeard(now time.Time) time.Time {
	if c.IsLeader() {
		return now
	}
	return c.raft.LastContact()
}

// InQuorum reports whether this node is a member, voter or not, of the Raft
// configuration it knows. A controller-only voter removed from the quorum is
// not: no leader replicates to it any more, so it never learns who leads.
func (c *Controller) InQuorum() bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == serverID(c.cfg.NodeID) {
			return true
		}
	}
	return false
}

// observerKnown reports whether node id is a member at addr already: a
// non-voting one, or a voter promoted from one (AddVoter). A node id held by
// a voter at another address is refused: Raft would keep the voter and only
// change its address, handing a controller's vote to another process.
func (c *Controller) observerKnown(id int32, addr string) (bool, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, c.translate(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID != serverID(id) {
			continue
		}
		switch {
		case s.Suffrage == raft.Nonvoter:
			return string(s.Address) == addr, nil
		case string(s.Address) != addr:
			return false, fmt.Errorf("%w: node %d is a controller voter", metadata.ErrDuplicateBrokerRegistration, id)
		}
		return true, nil
	}
	return false, nil
}

// addObserver makes node id, reachable at addr, a non-voting member, or moves
// it to addr. Only the active controller can change the membership.
func (c *Controller) addObserver(ctx context.Context, id int32, addr string) error {
	return c.awaitMembership(ctx, c.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, c.cfg.ApplyTimeout))
}

// removeObserver takes node id out of the Raft configuration if it is a
// non-voting member there; voters and unknown ids are left alone.
func (c *Controller) removeObserver(ctx context.Context, id int32) error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return c.translate(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID != serverID(id) || s.Suffrage != raft.Nonvoter {
			continue
		}
		return c.awaitMembership(ctx, c.raft.RemoveServer(s.ID, 0, c.cfg.ApplyTimeout))
	}
	return nil
}

// lockObservers takes c.observers for a registration, an unregistration or a
// voter's removal, once the membership change of an earlier one whose caller
// gave up waiting is over: until then the configuration does not show whether
// it happens.
func (c *Controller) lockObservers(ctx context.Context) error {
	c.observers.Lock()
	if p := c.observerChange; p != nil {
		select {
		case <-p:
			c.observerChange = nil
		case <-ctx.Done():
			c.observers.Unlock()
			return ctx.Err()
		}
	}
	return nil
}

// awaitMembership waits for the membership change f, with c.observers held.
// If ctx ends first the change may still commit; lockObservers then waits for
// it before the next holder checks the membership.
func (c *Controller) awaitMembership(ctx context.Context, f raft.Future) error {
	return c.waitOrKeep(ctx, resolve(f.Error), &c.observerChange)
}
