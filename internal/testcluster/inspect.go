package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// Eventually is wait.Eventually.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	wait.Eventually(t, timeout, what, cond)
}

// queryTimeout bounds one question to one node, so that a paused node costs a
// query little.
const queryTimeout = 2 * time.Second

// ask sends req to the running, unpaused nodes in turn until one answers.
func (c *Cluster) ask(ctx context.Context, req kmsg.Request) (kmsg.Response, int32, error) {
	var errs []error
	for _, n := range c.nodes {
		if !n.Running() || n.Paused() || !n.IsBroker() {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		resp, err := n.Request(qctx, req)
		cancel()
		if err == nil {
			return resp, n.ID, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", n.ID, err))
	}
	if len(errs) == 0 {
		return nil, -1, errors.New("no node is running")
	}
	return nil, -1, errors.Join(errs...)
}

// PartitionState is one partition as a Metadata answer shows it.
type PartitionState struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Err         error // the partition's error code (e.g. LEADER_NOT_AVAILABLE), nil if none
	From        int32 // the node that answered
}

func (s PartitionState) String() string {
	e := "none"
	if s.Err != nil {
		e = s.Err.Error()
	}
	return fmt.Sprintf("leader %d epoch %d replicas %v isr %v error %s (from node %d)", s.Leader, s.LeaderEpoch, s.Replicas, s.ISR, e, s.From)
}

// InISR reports whether node id is in the ISR.
func (s PartitionState) InISR(id int32) bool { return slices.Contains(s.ISR, id) }

// Partition asks a running, unpaused node for topic-partition's leader, epoch,
// replicas and ISR (a Metadata request pinned to that node: a client's own
// choice of broker could be a paused one and stall the test).
func (c *Cluster) Partition(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	resp, from, err := c.ask(ctx, metadataRequest(topic))
	if err != nil {
		return PartitionState{}, err
	}
	return partitionState(resp.(*kmsg.MetadataResponse), from, topic, partition)
}

// Partition is Cluster.Partition answered by this node alone: its own image,
// which may lag the active controller's.
func (n *Node) Partition(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	resp, err := n.Request(qctx, metadataRequest(topic))
	if err != nil {
		return PartitionState{}, fmt.Errorf("node %d: %w", n.ID, err)
	}
	return partitionState(resp.(*kmsg.MetadataResponse), n.ID, topic, partition)
}

// metadataRequest asks for topic alone.
func metadataRequest(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req
}

// partitionState picks topic-partition out of node from's Metadata answer.
func partitionState(resp *kmsg.MetadataResponse, from int32, topic string, partition int32) (PartitionState, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return PartitionState{}, fmt.Errorf("topic %s (from node %d): %w", topic, from, err)
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return PartitionState{
					Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: p.Replicas, ISR: p.ISR,
					Err: kerr.ErrorForCode(p.ErrorCode), From: from,
				}, nil
			}
		}
	}
	return PartitionState{}, fmt.Errorf("node %d does not know %s-%d", from, topic, partition)
}

// WaitPartition polls Partition until cond accepts the state (cond returns nil)
// and returns that state; it fails the test after timeout.
func (c *Cluster) WaitPartition(topic string, partition int32, timeout time.Duration, what string, cond func(PartitionState) error) PartitionState {
	c.t.Helper()
	var st PartitionState
	Eventually(c.t, timeout, fmt.Sprintf("%s-%d: %s", topic, partition, what), func() error {
		var err error
		st, err = c.Partition(context.Background(), topic, partition)
		if err != nil {
			return err
		}
		if err := cond(st); err != nil {
			return fmt.Errorf("%w; now %v", err, st)
		}
		return nil
	})
	return st
}

// Leader waits until topic-partition has a leader that is a running node and
// returns that node.
func (c *Cluster) Leader(topic string, partition int32) *Node {
	c.t.Helper()
	st := c.WaitPartition(topic, partition, 30*time.Second, "a running leader", func(st PartitionState) error {
		if st.Leader < 1 || int(st.Leader) > len(c.nodes) {
			return errors.New("no leader")
		}
		if !c.nodes[st.Leader-1].Running() {
			return fmt.Errorf("leader %d is not running", st.Leader)
		}
		return nil
	})
	return c.nodes[st.Leader-1]
}

// ActiveController asks a running, unpaused node which node is the active
// controller (DescribeCluster's ControllerID; -1 while there is none).
func (c *Cluster) ActiveController(ctx context.Context) (id, from int32, err error) {
	resp, from, err := c.ask(ctx, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return -1, -1, err
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, from, err
	}
	return r.ControllerID, from, nil
}

// GroupCoordinator asks a running, unpaused node which node coordinates group
// (FindCoordinator).
func (c *Cluster) GroupCoordinator(ctx context.Context, group string) (*Node, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{group}
	resp, _, err := c.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	co := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0]
	if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
		return nil, err
	}
	return c.Node(co.NodeID), nil
}

// CreateTopic creates topic with one partition per entry of assignment, whose
// replicas (leader first by preference) it lists, and the given configs. It
// fails the test unless the topic is created and every running node knows a
// leader for every partition.
func (c *Cluster) CreateTopic(topic string, assignment [][]int32, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	Eventually(c.t, 30*time.Second, "creating topic "+topic, func() error {
		resp, _, err := c.ask(context.Background(), req)
		if err != nil {
			return err
		}
		for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return err
			}
		}
		return nil
	})
	// Every running node must know the topic and its leaders, not only the one
	// that answered: a client may ask any of them.
	for _, n := range c.nodes {
		if !n.Running() || n.Paused() || !n.IsBroker() {
			continue
		}
		Eventually(c.t, 30*time.Second, fmt.Sprintf("node %d knowing the leaders of %s", n.ID, topic), func() error {
			return n.knowsLeaders(topic, len(assignment))
		})
	}
}

// knowsLeaders asks node n alone whether it knows a leader for each of topic's
// partitions partitions.
func (n *Node) knowsLeaders(topic string, partitions int) error {
	req := metadataRequest(topic)
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	resp, err := n.Request(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err
		}
		if len(t.Partitions) != partitions {
			return fmt.Errorf("%d partitions, want %d", len(t.Partitions), partitions)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
		}
	}
	return nil
}
