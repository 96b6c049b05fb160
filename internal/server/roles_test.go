package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// addNode starts one more node against the cluster's controllers with
// configure applied to its config, and keeps it in c.nodes.
func (c *testCluster) addNode(id int32, configure func(*config.Config)) (*Node, error) {
	cfg := c.cfgs[0]
	cfg.NodeID, cfg.DataDir = id, c.t.TempDir()
	cfg.ControllerAddr, cfg.KafkaAddr = freeAddr(c.t), freeAddr(c.t)
	configure(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, testLogger().With("node", id), vfs.Default)
	if err != nil {
		return nil, err
	}
	c.cfgs = append(c.cfgs, cfg)
	c.nodes = append(c.nodes, n)
	return n, nil
}

func brokerOnly(cfg *config.Config) { cfg.Roles = "broker" }

// TestBrokerOnlyNodesJoin: two broker-only nodes join a running three-node
// cluster, are unfenced and take replicas of a new topic at once, and serve
// acks=all writes that every replica agrees on. A second process with a live
// broker's id and a node of another cluster are refused with clear errors.
func TestBrokerOnlyNodesJoin(t *testing.T) {
	c := startCluster(t, 3)
	for _, id := range []int32{4, 5} {
		if _, err := c.addNode(id, brokerOnly); err != nil {
			t.Fatalf("broker-only node %d: %v", id, err)
		}
	}
	ctx := context.Background()
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("grown"))
	wait.For(t, "five live brokers in Metadata", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 5
	})
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 5, 3, map[string]*string{"min.insync.replicas": &minISR}, "grown"); err != nil {
		t.Fatal(err)
	}
	// The node that answers Metadata may apply the new topic a moment after
	// the controller committed it.
	var md kadm.Metadata
	wait.For(t, "every node to know topic grown", func() bool {
		var err error
		md, err = adm.Metadata(ctx, "grown")
		return err == nil && md.Topics["grown"].Err == nil && len(md.Topics["grown"].Partitions) == 5
	})
	onNew := map[int32]int{}
	for _, p := range md.Topics["grown"].Partitions {
		for _, r := range p.Replicas {
			onNew[r]++
		}
	}
	if onNew[4] == 0 || onNew[5] == 0 {
		t.Fatalf("replicas per broker %v: the broker-only nodes got none", onNew)
	}
	var rs []*kgo.Record
	for i := range 500 {
		rs = append(rs, &kgo.Record{Key: fmt.Append(nil, i%23), Value: fmt.Append(nil, i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, strings.Join(c.seeds(), ","), "grown", len(rs)); len(got) != len(rs) {
		t.Fatalf("read %d, want %d", len(got), len(rs))
	}
	for p := range int32(5) {
		c.checkAgreement(t, "grown", p)
	}

	_, err := c.addNode(4, func(cfg *config.Config) {
		brokerOnly(cfg)
		cfg.BrokerSessionTimeout = 500 * time.Millisecond
	})
	if err == nil || !strings.Contains(err.Error(), "held by another live broker") {
		t.Fatalf("a second process as node 4: %v, want it refused as a duplicate", err)
	}
	_, err = c.addNode(6, func(cfg *config.Config) {
		brokerOnly(cfg)
		cfg.ClusterID = "another-cluster"
	})
	if err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("a node of another cluster: %v, want it refused", err)
	}
}

// TestUnregisterBroker: a stopped broker-only node is unregistered with
// UnregisterBroker sent to any broker (forwarded to the controller): no node
// knows it afterwards. An unknown id gets BROKER_ID_NOT_REGISTERED.
func TestUnregisterBroker(t *testing.T) {
	c := startCluster(t, 3)
	if _, err := c.addNode(4, brokerOnly); err != nil {
		t.Fatal(err)
	}
	c.stop(3)
	cl, _ := c.client()
	unregister := func(id int32) error {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := unregister(4); err != nil {
		t.Fatalf("UnregisterBroker(4): %v", err)
	}
	wait.For(t, "every node to forget broker 4", func() bool {
		for _, n := range c.nodes[:3] {
			if n.ctrl.Image().Broker(4) != nil {
				return false
			}
		}
		return true
	})
	if err := unregister(9); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("UnregisterBroker(9): %v, want BROKER_ID_NOT_REGISTERED", err)
	}
}

// TestBrokerOnlyRegistersThroughAVoterThatDoesNotLead: a broker-only node
// whose --controllers name only voters that do not lead (as when the active
// controller became a voter after those flags were written) registers: a
// voter passes the registration on to the active controller. On the old code
// each of those voters answered NOT_CONTROLLER and the node never registered.
func TestBrokerOnlyRegistersThroughAVoterThatDoesNotLead(t *testing.T) {
	c := startCluster(t, 3)
	var leader int32
	wait.For(t, "an active controller", func() bool {
		leader = c.nodes[0].ctrl.LeaderID()
		return leader > 0
	})
	var others []string
	for i, cfg := range c.cfgs {
		if cfg.NodeID != leader {
			others = append(others, fmt.Sprintf("%d@%s", cfg.NodeID, c.cfgs[i].ControllerAddr))
		}
	}
	if _, err := c.addNode(4, func(cfg *config.Config) {
		brokerOnly(cfg)
		cfg.Controllers = strings.Join(others, ",")
	}); err != nil {
		t.Fatalf("broker-only node 4 with --controllers %s (the active controller is %d): %v", strings.Join(others, ","), leader, err)
	}
	_, adm := c.client()
	wait.For(t, "four live brokers in Metadata", func() bool {
		md, err := adm.Metadata(context.Background())
		return err == nil && len(md.Brokers) == 4
	})
}
