package server

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// brokerLinks watches the controller link's connections for the active
// controller: it remembers the connection each broker last heartbeated on,
// and when that connection closes it tells the controller, which then probes
// the broker and fences it at once if its process is gone (controller's
// probe.go). A protocol.Hook of the link server.
type brokerLinks struct {
	closed func(id int32, epoch int64)

	mu struct {
		sync.Mutex
		latest map[int32]brokerConn
	}
}

// brokerConn is the connection and registration epoch of a broker's latest
// heartbeat (-1 for a registration: the current one).
type brokerConn struct {
	conn  uint64
	epoch int64
}

func newBrokerLinks(closed func(id int32, epoch int64)) *brokerLinks {
	l := &brokerLinks{closed: closed}
	l.mu.latest = make(map[int32]brokerConn)
	return l
}

// OnRequest implements protocol.RequestHook. A registration counts as a
// heartbeat of whatever epoch it is given (-1): a broker killed before its
// first heartbeat is noticed too. A connection wrongly taken for a broker's
// costs nothing but a probe that its broker accepts.
func (l *brokerLinks) OnRequest(c *protocol.ConnInfo, r *protocol.Request) {
	var (
		id    int32
		epoch int64
	)
	switch req := r.Msg.(type) {
	case *kmsg.BrokerHeartbeatRequest:
		id, epoch = req.BrokerID, req.BrokerEpoch
	case *kmsg.BrokerRegistrationRequest:
		id, epoch = req.BrokerID, -1
	default:
		return
	}
	l.mu.Lock()
	l.mu.latest[id] = brokerConn{conn: c.ID, epoch: epoch}
	l.mu.Unlock()
}

// OnConnClose implements protocol.ConnCloseHook.
func (l *brokerLinks) OnConnClose(c *protocol.ConnInfo, _ error) {
	type gone struct {
		id    int32
		epoch int64
	}
	var lost []gone
	l.mu.Lock()
	for id, bc := range l.mu.latest {
		if bc.conn == c.ID {
			lost = append(lost, gone{id, bc.epoch})
			delete(l.mu.latest, id)
		}
	}
	l.mu.Unlock()
	for _, g := range lost {
		l.closed(g.id, g.epoch)
	}
}
