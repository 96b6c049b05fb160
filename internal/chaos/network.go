package chaos

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/chaos/netfault"
)

// clusterNet is the proxies every network link of a cluster runs through:
//
//	traffic                            goes to                          source told by
//	---------------------------------  -------------------------------  --------------------
//	clients, follower fetches          node's Kafka proxy (advertised   client id of the first
//	                                   with --advertised-kafka-addr)    request: strata-replica-<id>
//	Raft and the controller link,      node B's controller proxy        the address it comes
//	node A to node B                   (--advertised-controller-addr,   from: node A's
//	                                   so the Raft configuration holds  --controller-source-host,
//	                                   it whoever writes it)            sourceHost(A)
//
// On a secured cluster the client id is out of sight (TLS), so the Kafka
// proxies tell a node's connections by address too: each node makes its own
// Kafka connections (follower fetches, transaction markers, its HTTP API's and
// share groups' clients) from sourceHost(id) (--kafka-source-host), and every
// other connection is a client's.
//
// So isolating a node stops everything it sends and everything sent to it,
// whichever voters a membership change has written into the Raft
// configuration, and whether the node is a voter or a broker-only one; and a
// data cut (netfault's CutKafka) stops two nodes' follower fetches from each
// other and nothing else.
// Endpoints are named by node id ("1", "2", ...) and clientSource.
type clusterNet struct {
	net     *netfault.Net
	proxies []*netfault.Proxy
	kafka   []*netfault.Proxy // by node id - 1
	control []*netfault.Proxy // by node id - 1
	voters  int               // nodes 1..voters are the controller voters at the start
	byAddr  bool              // the Kafka proxies tell nodes by address (a secured cluster)
}

// clientSource is the endpoint name of every connection that is not a node's.
const clientSource = "client"

// replicaClientPrefix is the client id prefix of a broker's follower fetcher
// (internal/server: strata-replica-<node id>).
const replicaClientPrefix = "strata-replica-"

// sourceHost is the loopback address node id's controller-quorum connections
// come from (--controller-source-host), which its controller proxies read.
func sourceHost(id int32) string { return fmt.Sprintf("127.0.0.%d", 10+id) }

// newClusterNet starts the proxies of an n-node cluster whose first voters
// nodes are the controller voters: node id's listen on host(id) and forward
// to the addresses kafka(id) and controller(id) return. With byAddr, its
// Kafka proxies tell nodes by the address they connect from, not by client
// id (a secured cluster: TLS hides it). They are closed at
// t's cleanup. It skips t where the host cannot use the nodes' source
// addresses: the proxies could not tell the nodes' Raft connections apart.
func newClusterNet(t *testing.T, n, voters int, byAddr bool, host func(id int32) string, kafka, controller func(id int32) netfault.Upstream) *clusterNet {
	t.Helper()
	if ln, err := net.Listen("tcp", sourceHost(1)+":0"); err != nil {
		t.Skipf("network faults need a loopback source address per node, and %s is not usable here: %v", sourceHost(1), err)
	} else {
		ln.Close()
	}
	cn := &clusterNet{net: netfault.New(), voters: voters, byAddr: byAddr}
	t.Cleanup(func() {
		for _, p := range cn.proxies {
			p.Close()
		}
	})
	who := func(clientID string) string {
		if id, ok := strings.CutPrefix(clientID, replicaClientPrefix); ok {
			return id
		}
		return clientSource
	}
	nodes := map[string]string{} // source host -> endpoint
	for id := int32(1); id <= int32(n); id++ {
		nodes[sourceHost(id)] = name(id)
	}
	from := func(remote net.Addr) string {
		if a, ok := remote.(*net.TCPAddr); ok {
			if node, ok := nodes[a.IP.String()]; ok {
				return node
			}
		}
		return clientSource
	}
	add := func(p *netfault.Proxy, err error) *netfault.Proxy {
		if err != nil {
			t.Fatalf("starting a proxy: %v", err)
		}
		cn.proxies = append(cn.proxies, p)
		return p
	}
	for id := int32(1); id <= int32(n); id++ {
		if byAddr {
			cn.kafka = append(cn.kafka, add(cn.net.KafkaByAddr(host(id)+":0", name(id), from, kafka(id))))
		} else {
			cn.kafka = append(cn.kafka, add(cn.net.Kafka(host(id)+":0", name(id), who, kafka(id))))
		}
		cn.control = append(cn.control, add(cn.net.Link(host(id)+":0", name(id), from, controller(id))))
	}
	return cn
}

// name is node id's endpoint name.
func name(id int32) string { return strconv.Itoa(int(id)) }

// advertised is the Kafka address node id advertises: its proxy.
func (cn *clusterNet) advertised(id int32) string { return cn.kafka[id-1].Addr() }

// advertisedController is the controller address node id advertises: its
// controller proxy.
func (cn *clusterNet) advertisedController(id int32) string { return cn.control[id-1].Addr() }

// controllers is every node's --controllers: the voters at their controller
// proxies.
func (cn *clusterNet) controllers() string {
	var voters []string
	for id := int32(1); id <= int32(cn.voters); id++ {
		voters = append(voters, fmt.Sprintf("%d@%s", id, cn.advertisedController(id)))
	}
	return strings.Join(voters, ",")
}

// flags are node id's flags for the proxies, as --name=value.
func (cn *clusterNet) flags(id int32) []string {
	flags := []string{
		"--advertised-kafka-addr=" + cn.advertised(id),
		"--advertised-controller-addr=" + cn.advertisedController(id),
		"--controller-source-host=" + sourceHost(id),
		"--controllers=" + cn.controllers(),
	}
	if cn.byAddr {
		flags = append(flags, "--kafka-source-host="+sourceHost(id))
	}
	return flags
}

// links counts, for every directed link between nodes, the connections its
// destination's controller proxy accepted from its source and those of them
// that waited on a cut.
func (cn *clusterNet) links() (dialled, stalled map[[2]int32]int) {
	dialled, stalled = map[[2]int32]int{}, map[[2]int32]int{}
	for i, p := range cn.control {
		to := int32(i + 1)
		for _, c := range []struct {
			counts map[string]int
			into   map[[2]int32]int
		}{{p.Sources(), dialled}, {p.Stalled(), stalled}} {
			for src, k := range c.counts {
				if from, err := strconv.Atoi(src); err == nil {
					c.into[[2]int32{int32(from), to}] += k
				}
			}
		}
	}
	return dialled, stalled
}

// seeds are the nodes' advertised Kafka addresses, in id order.
func (cn *clusterNet) seeds() []string {
	var s []string
	for _, p := range cn.kafka {
		s = append(s, p.Addr())
	}
	return s
}

// checkSourcesSeen fails unless the proxies have told every node's
// connections apart: each voter's follower fetches by some Kafka proxy (if
// the server's fetcher changed its client id, or did not connect from its
// --kafka-source-host on a secured cluster, isolating a node would silently
// leave its fetches flowing), and each node's controller-quorum
// connections by some controller proxy (the active controller dials every
// member, and every other node heartbeats to it; if a node's connections did
// not come from its source address, a cut would leave its Raft traffic
// flowing).
func (cn *clusterNet) checkSourcesSeen() error {
	seen := func(proxies []*netfault.Proxy) map[string]bool {
		s := map[string]bool{}
		for _, p := range proxies {
			for src := range p.Sources() {
				s[src] = true
			}
		}
		return s
	}
	fetchers, control := seen(cn.kafka), seen(cn.control)
	for id := int32(1); id <= int32(len(cn.kafka)); id++ {
		if id <= int32(cn.voters) && !fetchers[name(id)] {
			return fmt.Errorf("no Kafka proxy saw a connection from node %d's follower fetcher (client id %s%d); sources seen: %v",
				id, replicaClientPrefix, id, fetchers)
		}
		if !control[name(id)] {
			return fmt.Errorf("no controller proxy saw a connection from node %d's source address %s; sources seen: %v",
				id, sourceHost(id), control)
		}
	}
	return nil
}
