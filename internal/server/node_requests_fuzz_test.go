package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// The listeners of a node FuzzNodeRequests sends to. The first argument of
// an input is one of these for node 1, the active controller, or one plus
// nodeListeners for node 2, a broker-only node.
const (
	kafkaListener     = iota // the node-only APIs it serves (nodeOnlyKeys)
	controllerClients        // every API of the controller listener's Kafka clients (KIP-919)
	controllerLink           // every API of the controller link
	nodeListeners
)

var nodeListenerNames = [nodeListeners]string{"Kafka listener", "controller listener", "controller link"}

// FuzzNodeRequests sends the requests nodes send each other, whatever their
// fields say, to a two-node cluster of its own for each input, so that one
// that fences, unregisters or stops a node harms no other input: the node-only
// APIs the Kafka listener serves (UnregisterBroker, AddRaftVoter,
// RemoveRaftVoter), every API the controller link serves (registration,
// heartbeats, AlterPartition, AllocateProducerIds, ControllerRegistration, the
// admin requests brokers forward) and every API of the controller listener's
// Kafka clients. Node 1 is the only voter, so the active controller, and a
// broker; node 2 is a broker-only node, which passes the requests on to node 1
// or answers NOT_CONTROLLER. They start from copies of data directories in
// which node 1 leads a topic, so that requests can name a real partition and
// the nodes' own ids, epochs and data directories. It fails on a panic in a
// node's log, a connection closed without an answer, no answer within 10 s, a
// listener that does not answer DescribeQuorum after it, or a node that does
// not close without error within 20 s. ControlledShutdown, Vote, BeginQuorumEpoch
// and EndQuorumEpoch are served by no listener (their
// connections close, as for any unknown API key): Strata's brokers shut down
// through their heartbeats and its quorum is not KRaft.
func FuzzNodeRequests(f *testing.F) {
	tmpl := newNodeTemplate(f)
	served := [nodeListeners]map[int16]servedVersions{
		kafkaListener:     servedKeys(handlers.Versions(), func(key int16) bool { return !nodeOnlyKeys[key] }),
		controllerClients: servedKeys(handlers.ControllerListenerVersions(), nil),
		controllerLink:    servedKeys(handlers.LinkVersions(), nil),
	}
	for l, keys := range served {
		emptyRequests(keys, func(key, version int16, body []byte) { f.Add(uint8(l), key, version, body) })
	}
	for _, s := range tmpl.seeds() {
		k := served[s.to%nodeListeners][s.req.Key()]
		s.req.SetVersion(k.max)
		f.Add(s.to, s.req.Key(), k.max, s.req.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, to uint8, key, version int16, body []byte) {
		node, listener := to/nodeListeners, to%nodeListeners
		if node > 1 {
			return
		}
		k, ok := served[listener][key]
		if !ok || version < k.min || version > k.max {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		nodes, panics, stop := tmpl.start(t)
		tmpl.retarget(req, nodes)
		n := nodes[node]
		addr, preamble := n.KafkaAddr(), []byte(nil)
		if listener != kafkaListener {
			addr = n.raftAddr
		}
		if listener == controllerLink {
			preamble = []byte{controllerlink.Marker}
		}
		what := fmt.Sprintf("%s v%d on node %d's %s", kmsg.NameForKey(key), version, node+1, nodeListenerNames[listener])
		_, err := roundTripAfter(addr, preamble, req, 10*time.Second)
		if p := panics.take(); p != "" {
			t.Fatalf("%s: a node panicked: %s", what, p)
		}
		if err != nil {
			t.Fatalf("%s: no answer: %v", what, err)
		}
		probe := kmsg.NewPtrDescribeQuorumRequest()
		if _, err := roundTripAfter(addr, preamble, probe, 10*time.Second); err != nil {
			t.Fatalf("after %s: DescribeQuorum not answered: %v", what, err)
		}
		stop()
	})
}

// servedVersions is the range of versions a listener serves of one key.
type servedVersions struct{ min, max int16 }

// servedKeys is the versions of each key in vrs, but those skip says to
// leave out (nil: none); versions below RefuseBelow are listed and refused
// (Produce v0-v2), so they are left out too.
func servedKeys(vrs []protocol.VersionRange, skip func(key int16) bool) map[int16]servedVersions {
	out := map[int16]servedVersions{}
	for _, vr := range vrs {
		if skip == nil || !skip(vr.Key) {
			out[vr.Key] = servedVersions{max(vr.Min, vr.RefuseBelow), vr.Max}
		}
	}
	return out
}

// emptyRequests calls add with the empty request of each key of versions at
// its lowest and highest version, in key order.
func emptyRequests(versions map[int16]servedVersions, add func(key, version int16, body []byte)) {
	for _, key := range slices.Sorted(maps.Keys(versions)) {
		for _, v := range slices.Compact([]int16{versions[key].min, versions[key].max}) {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			add(key, v, req.AppendTo(nil))
		}
	}
}

// nodeTemplate is the data directories every FuzzNodeRequests cluster
// starts from, and what a cluster started from them has.
type nodeTemplate struct {
	// cfgs are the nodes' configurations; each start copies their data dirs.
	// Their controller addresses are the template nodes': the quorum's
	// configuration keeps them and the seeds name node 2's. Each start's
	// nodes listen on ports of their own (retarget maps the seeds' to them),
	// and holdPorts keeps these.
	cfgs      [2]config.Config
	clusterID string
	topicID   [16]byte
	// brokerEpochs are the epochs the nodes register with; leaderEpoch and
	// partitionEpoch are those of partition 0 of topic "t" after they have.
	brokerEpochs                [2]int64
	leaderEpoch, partitionEpoch int32
	directories                 [2][16]byte // the nodes' data directory ids
}

// newNodeTemplate makes the template: node 1 with topic "t" of one partition
// and node 2 joined to it, closed cleanly, then started once from copies to
// learn what every cluster started from them sees.
func newNodeTemplate(f testing.TB) *nodeTemplate {
	tmpl := &nodeTemplate{}
	for i := range tmpl.cfgs {
		cfg := nodeConfig(f.TempDir())
		cfg.NodeID, cfg.ControllerAddr = int32(i+1), freeAddr(f)
		// A node left alone in a quorum of two voters (after AddRaftVoter)
		// waits half of ShutdownTimeout for its controlled shutdown.
		cfg.ShutdownTimeout = 2 * time.Second
		// Node 2 has caught up (start) once it has heartbeated.
		cfg.BrokerHeartbeatInterval = 10 * time.Millisecond
		tmpl.cfgs[i] = cfg
	}
	tmpl.cfgs[1].Roles, tmpl.cfgs[1].Controllers = "broker", "1@"+tmpl.cfgs[0].ControllerAddr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n1, err := Start(ctx, tmpl.cfgs[0], slog.New(slog.DiscardHandler), vfs.Default)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n1.Close() }) // closed below; this covers a failure before
	cl, err := kgo.NewClient(kgo.SeedBrokers(n1.KafkaAddr()))
	if err != nil {
		f.Fatal(err)
	}
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t") // on node 1, the only broker yet
	cl.Close()
	if err != nil {
		f.Fatal(err)
	}
	tmpl.cfgs[1].ClusterID = n1.clusterID
	n2, err := Start(ctx, tmpl.cfgs[1], slog.New(slog.DiscardHandler), vfs.Default)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n2.Close() })
	if err := errors.Join(n2.Close(), n1.Close()); err != nil {
		f.Fatal(err)
	}
	tmpl.holdPorts(f)
	nodes, _, stop := tmpl.start(f)
	defer stop()
	img := nodes[0].ctrl.Image()
	p := img.Topic("t").Partitions[0]
	tmpl.clusterID, tmpl.topicID = nodes[0].clusterID, img.Topic("t").ID
	tmpl.directories = [2][16]byte{nodes[0].directoryID, nodes[1].directoryID}
	tmpl.brokerEpochs = [2]int64{nodes[0].brokerEpoch.Load(), nodes[1].brokerEpoch.Load()}
	tmpl.leaderEpoch, tmpl.partitionEpoch = p.LeaderEpoch, p.PartitionEpoch
	return tmpl
}

// holdPorts listens on the template nodes' controller addresses until tb
// ends, closing every connection at once: no other process can take them, and
// a node that dials one (node 1 replicating to node 2 at the address the
// quorum's configuration keeps for it, until node 2 registers at its own)
// fails at once, as on a port nobody listens on; were something else to
// listen there without answering, each start would wait the 10 s the Raft
// transport gives an answer.
func (tmpl *nodeTemplate) holdPorts(tb testing.TB) {
	for _, cfg := range tmpl.cfgs {
		ln, err := net.Listen("tcp", cfg.ControllerAddr)
		if err != nil {
			tb.Fatalf("holding the template's controller address: %v", err)
		}
		tb.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
}

// start starts both nodes from copies of the template's data directories
// and returns them with the panics they log, and stop, which closes them
// (when tb ends at the latest) and fails tb if one logs a panic meanwhile or
// has not closed within 20 s: a request that leaves a node unable to stop
// hangs too. Each node binds a controller port the kernel picks (port 0), so
// no port is probed, released and bound again later, where another process
// could take it in between; node 2 is given node 1's.
func (tmpl *nodeTemplate) start(tb testing.TB) (_ [2]*Node, _ *panicRecorder, stop func()) {
	tb.Helper()
	var nodes [2]*Node
	panics := &panicRecorder{}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for i := len(nodes) - 1; i >= 0; i-- {
				if nodes[i] != nil {
					closeWithin(tb, nodes[i], 20*time.Second)
				}
			}
			if p := panics.take(); p != "" {
				tb.Errorf("a node panicked while closing: %s", p)
			}
		})
	}
	cfgs := tmpl.cfgs
	for i := range cfgs {
		cfgs[i].DataDir = tb.TempDir()
		if err := os.CopyFS(cfgs[i].DataDir, os.DirFS(tmpl.cfgs[i].DataDir)); err != nil {
			tb.Fatal(err)
		}
		cfgs[i].ControllerAddr = "127.0.0.1:0"
	}
	tb.Cleanup(stop) // before the data directories go
	for i := range cfgs {
		if i == 1 {
			cfgs[1].Controllers = "1@" + nodes[0].raftAddr
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := Start(ctx, cfgs[i], slog.New(panics), vfs.Default)
		cancel()
		if err != nil {
			tb.Fatal(err)
		}
		nodes[i] = n
	}
	wait.For(tb, "node 2 to have caught up, as AddRaftVoter wants", func() bool {
		q, err := nodes[0].ctrl.Quorum(context.Background())
		return err == nil && slices.ContainsFunc(q.Observers, func(m controller.QuorumMember) bool {
			return m.ID == 2 && !m.LastCaughtUp.IsZero()
		})
	})
	return nodes, panics, stop
}

// closeWithin closes n, failing tb if that fails or takes longer than
// timeout; it waits no longer.
func closeWithin(tb testing.TB, n *Node, timeout time.Duration) {
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("closing node %d: %v", n.cfg.NodeID, err)
		}
	case <-time.After(timeout):
		tb.Errorf("node %d has not closed within %v", n.cfg.NodeID, timeout)
	}
}

// nodeSeed is a request for one listener of one node (FuzzNodeRequests'
// first argument).
type nodeSeed struct {
	to  uint8
	req kmsg.Request
}

// seeds are requests a node could have sent, naming what a cluster started
// from the template has: its cluster id, its topic, its nodes' broker epochs
// and data directories, node 2's controller listener.
func (tmpl *nodeTemplate) seeds() []nodeSeed {
	const node2 = nodeListeners
	other := kmsg.NewPtrBrokerRegistrationRequest()
	other.BrokerID, other.ClusterID, other.IncarnationID = 3, tmpl.clusterID, [16]byte{3}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9092
	other.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
	other.LogDirs = [][16]byte{{3}}

	stale := kmsg.NewPtrAlterPartitionRequest()
	stale.BrokerID, stale.BrokerEpoch = 1, tmpl.brokerEpochs[0]
	t := kmsg.NewAlterPartitionRequestTopic()
	t.Topic, t.TopicID = "t", tmpl.topicID
	p := kmsg.NewAlterPartitionRequestTopicPartition()
	p.LeaderEpoch, p.PartitionEpoch = tmpl.leaderEpoch-1, tmpl.partitionEpoch
	member := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
	member.BrokerID, member.BrokerEpoch = 1, tmpl.brokerEpochs[0]
	p.NewISR, p.NewEpochISR = []int32{1}, []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{member}
	t.Partitions = []kmsg.AlterPartitionRequestTopicPartition{p}
	stale.Topics = []kmsg.AlterPartitionRequestTopic{t}

	unknown := kmsg.NewPtrBrokerHeartbeatRequest()
	unknown.BrokerID, unknown.BrokerEpoch = 9, tmpl.brokerEpochs[0]
	shutdown := kmsg.NewPtrBrokerHeartbeatRequest()
	shutdown.BrokerID, shutdown.BrokerEpoch, shutdown.WantShutdown = 2, tmpl.brokerEpochs[1], true

	again := kmsg.NewPtrBrokerRegistrationRequest()
	*again = *other
	again.BrokerID, again.LogDirs = 1, [][16]byte{tmpl.directories[0]}

	controller1 := kmsg.NewPtrControllerRegistrationRequest()
	controller1.ControllerID, controller1.IncarnationID = 1, tmpl.directories[0]

	ids := kmsg.NewPtrAllocateProducerIDsRequest()
	ids.BrokerID, ids.BrokerEpoch = 2, tmpl.brokerEpochs[1]

	voter := kmsg.NewPtrAddRaftVoterRequest()
	voter.ClusterID, voter.VoterID, voter.VoterDirectoryID = &tmpl.clusterID, 2, tmpl.directories[1]
	vl := kmsg.NewAddRaftVoterRequestListener()
	vl.Name = controllerlink.ObserverListener
	vl.Host, vl.Port = hostPort(tmpl.cfgs[1].ControllerAddr)
	voter.Listeners = []kmsg.AddRaftVoterRequestListener{vl}

	last := kmsg.NewPtrRemoveRaftVoterRequest()
	last.ClusterID, last.VoterID, last.VoterDirectoryID = &tmpl.clusterID, 1, tmpl.directories[0]

	unregister := kmsg.NewPtrUnregisterBrokerRequest()
	unregister.BrokerID = 2

	return []nodeSeed{
		{controllerLink, other}, {node2 + controllerLink, other}, {node2 + controllerLink, again},
		{controllerLink, controller1}, {controllerLink, stale}, {controllerLink, unknown}, {controllerLink, shutdown},
		{controllerLink, ids}, {kafkaListener, voter}, {node2 + kafkaListener, voter}, {node2 + controllerClients, last},
		{node2 + kafkaListener, unregister},
	}
}

// TestNodeTemplatePortsHeld: while FuzzNodeRequests runs, no other process
// can listen on the template's controller ports, and a cluster started from
// the template listens on ports of its own, where the seed making node 2 a
// voter makes it one. Each input's nodes used to listen on the template's
// ports again, which are free between inputs for anything to take.
func TestNodeTemplatePortsHeld(t *testing.T) {
	tmpl := newNodeTemplate(t)
	for _, cfg := range tmpl.cfgs {
		if ln, err := net.Listen("tcp", cfg.ControllerAddr); err == nil {
			ln.Close()
			t.Errorf("the template's controller address %s is free to take", cfg.ControllerAddr)
		}
	}
	seeds := tmpl.seeds()
	i := slices.IndexFunc(seeds, func(s nodeSeed) bool {
		return s.to == kafkaListener && s.req.Key() == int16(kmsg.AddRaftVoter)
	})
	if i < 0 {
		t.Fatal("no seed sends AddRaftVoter to node 1")
	}
	nodes, panics, stop := tmpl.start(t)
	for n, cfg := range tmpl.cfgs {
		if nodes[n].raftAddr == cfg.ControllerAddr {
			t.Errorf("node %d listens on the template's controller address %s", n+1, cfg.ControllerAddr)
		}
	}
	req := seeds[i].req
	tmpl.retarget(req, nodes)
	resp, err := roundTripAfter(nodes[0].KafkaAddr(), nil, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.AddRaftVoterResponse).ErrorCode; code != 0 {
		t.Fatalf("AddRaftVoter of node 2: %v", kerr.ErrorForCode(code))
	}
	if q, err := nodes[0].ctrl.Quorum(context.Background()); err != nil || len(q.Voters) != 2 {
		t.Fatalf("the quorum after AddRaftVoter of node 2: %+v, %v; want two voters", q.Voters, err)
	}
	if p := panics.take(); p != "" {
		t.Fatalf("a node panicked: %s", p)
	}
	stop()
}

// retarget points the listeners of an AddRaftVoter request that name a
// template node's controller address (the seed making node 2 a voter does)
// at that node's address in this input's cluster.
func (tmpl *nodeTemplate) retarget(req kmsg.Request, nodes [2]*Node) {
	voter, ok := req.(*kmsg.AddRaftVoterRequest)
	if !ok {
		return
	}
	for i, l := range voter.Listeners {
		for n, cfg := range tmpl.cfgs {
			if net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))) == cfg.ControllerAddr {
				voter.Listeners[i].Host, voter.Listeners[i].Port = hostPort(nodes[n].raftAddr)
			}
		}
	}
}

// hostPort splits a host:port address; the port is 0 when it is not one.
func hostPort(addr string) (string, uint16) {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.ParseUint(port, 10, 16)
	return host, uint16(p)
}
