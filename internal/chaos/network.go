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
//	Raft and the controller link,      the proxy of link A->B (node A's  the proxy: one per link
//	node A to node B                   --controllers names it for B)
//
// so isolating a node stops everything it sends and everything sent to it.
// Endpoints are named by node id ("1", "2", ...) and clientSource.
type clusterNet struct {
	net     *netfault.Net
	proxies []*netfault.Proxy
	kafka   []*netfault.Proxy // by node id - 1
	links   map[[2]int32]*netfault.Proxy
}

// clientSource is the endpoint name of every connection that is not a node's.
const clientSource = "client"

// replicaClientPrefix is the client id prefix of a broker's follower fetcher
// (internal/server: strata-replica-<node id>).
const replicaClientPrefix = "strata-replica-"

// newClusterNet starts the proxies of an n-node cluster: node id's listen on
// host(id) and forward to the addresses kafka(id) and controller(id) return.
// They are closed at t's cleanup.
func newClusterNet(t *testing.T, n int, host func(id int32) string, kafka, controller func(id int32) netfault.Upstream) *clusterNet {
	t.Helper()
	cn := &clusterNet{net: netfault.New(), links: map[[2]int32]*netfault.Proxy{}}
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
	add := func(p *netfault.Proxy, err error) *netfault.Proxy {
		if err != nil {
			t.Fatalf("starting a proxy: %v", err)
		}
		cn.proxies = append(cn.proxies, p)
		return p
	}
	for id := int32(1); id <= int32(n); id++ {
		cn.kafka = append(cn.kafka, add(cn.net.Kafka(host(id)+":0", name(id), who, kafka(id))))
		for from := int32(1); from <= int32(n); from++ {
			if from != id {
				cn.links[[2]int32{from, id}] = add(cn.net.Link(host(id)+":0", name(from), name(id), controller(id)))
			}
		}
	}
	return cn
}

// name is node id's endpoint name.
func name(id int32) string { return strconv.Itoa(int(id)) }

// advertised is the Kafka address node id advertises: its proxy.
func (cn *clusterNet) advertised(id int32) string { return cn.kafka[id-1].Addr() }

// controllers is node id's --controllers: every other voter through the proxy
// of the link to it, and itself as self.
func (cn *clusterNet) controllers(id int32, self string) string {
	var voters []string
	for to := int32(1); to <= int32(len(cn.kafka)); to++ {
		addr := self
		if to != id {
			addr = cn.links[[2]int32{id, to}].Addr()
		}
		voters = append(voters, fmt.Sprintf("%d@%s", to, addr))
	}
	return strings.Join(voters, ",")
}

// seeds are the nodes' advertised Kafka addresses, in id order.
func (cn *clusterNet) seeds() []string {
	var s []string
	for _, p := range cn.kafka {
		s = append(s, p.Addr())
	}
	return s
}

// checkFetchersSeen fails unless every node's follower fetches were seen, and
// told apart, by some Kafka proxy: if the server's fetcher changed its client
// id, isolating a node would silently leave its fetches flowing.
func (cn *clusterNet) checkFetchersSeen() error {
	seen := map[string]bool{}
	for _, p := range cn.kafka {
		for src := range p.Sources() {
			seen[src] = true
		}
	}
	for id := int32(1); id <= int32(len(cn.kafka)); id++ {
		if !seen[name(id)] {
			return fmt.Errorf("no Kafka proxy saw a connection from node %d's follower fetcher (client id %s%d); sources seen: %v",
				id, replicaClientPrefix, id, seen)
		}
	}
	return nil
}

// loopbackHost is node id's testcluster address (127.0.0.10+id) where the host
// can bind it, else 127.0.0.1.
func loopbackHost(id int32) string {
	host := fmt.Sprintf("127.0.0.%d", 10+id)
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		return "127.0.0.1"
	}
	ln.Close()
	return host
}
