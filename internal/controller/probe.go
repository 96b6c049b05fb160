package controller

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"
)

// Proving a broker dead (see liveness): when the link connection a broker
// heartbeats on closes, or when this node becomes the active controller and
// has not heard from a broker yet, the broker is a suspect, and the
// supervisor connects to its controller address (the Raft address the quorum
// knows it by, where its controller listener is) every probeInterval until
// it heartbeats again. A refused connection means no process listens there:
// the incarnation that registered is gone (a SIGKILL closes its sockets at
// once), and it is fenced without waiting for the session timeout. An
// accepted connection, a timeout or any other error proves nothing, and the
// session timeout stays the rule: a paused process's kernel still accepts
// connections, and a cut link times out.
const (
	// probeInterval is how often a suspect is probed again (the first probe
	// goes out at once).
	probeInterval = 100 * time.Millisecond
	// probeTimeout bounds one probe.
	probeTimeout = time.Second
)

// dialProbe is the default probe: a TCP connect, closed at once.
func dialProbe(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// isRefused reports whether a probe's error proves that nothing listens at
// the address.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// BrokerLinkClosed tells the active controller that the controller-link
// connection on which broker id's registration epoch (-1: its current one)
// last heartbeated or registered has closed. The broker becomes a suspect: it
// is probed until it heartbeats again, and fenced at once if the probe is
// refused. Any node may be told; only the active controller acts.
func (c *Controller) BrokerLinkClosed(id int32, epoch int64) {
	if !c.IsLeader() {
		return
	}
	b := c.Image().Broker(id)
	if b == nil || b.Fenced || (epoch != -1 && b.Epoch != epoch) {
		return
	}
	epoch = b.Epoch
	now := c.cfg.clock()
	c.sessions(now).linkClosed(id, epoch, now)
	c.wakeSupervisor()
}

// wakeSupervisor makes the supervisor check broker sessions now.
func (c *Controller) wakeSupervisor() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// probeSuspects starts a probe of every suspect broker that has a controller
// address and no probe under way. A refused probe marks the broker dead and
// wakes the supervisor, which fences it.
func (c *Controller) probeSuspects() {
	now := c.cfg.clock()
	img := c.Image()
	ids := c.sessions(now).suspects(img)
	if len(ids) == 0 {
		return
	}
	addrs := c.raftAddrs()
	for _, id := range ids {
		addr := addrs[id]
		if addr == "" || !c.startProbe(id) {
			continue
		}
		epoch := img.Broker(id).Epoch
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.endProbe(id)
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			err := c.cfg.probe(ctx, addr)
			cancel()
			if isRefused(err) {
				c.live.refused(id, epoch, c.cfg.clock())
				c.wakeSupervisor()
			}
		}()
	}
}

func (c *Controller) startProbe(id int32) bool {
	c.probes.Lock()
	defer c.probes.Unlock()
	if c.probes.inFlight[id] {
		return false
	}
	if c.probes.inFlight == nil {
		c.probes.inFlight = make(map[int32]bool)
	}
	c.probes.inFlight[id] = true
	return true
}

func (c *Controller) endProbe(id int32) {
	c.probes.Lock()
	defer c.probes.Unlock()
	delete(c.probes.inFlight, id)
}

// raftAddrs maps node ids to their addresses in the latest Raft
// configuration: voters' and broker-only observers' controller listeners.
func (c *Controller) raftAddrs() map[int32]string {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	addrs := make(map[int32]string)
	for _, s := range f.Configuration().Servers {
		if id, err := strconv.ParseInt(string(s.ID), 10, 32); err == nil {
			addrs[int32(id)] = string(s.Address)
		}
	}
	return addrs
}
