package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/offsets"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
)

// startShares builds the node's share-partition leader (package share): the
// in-flight records of share groups on the partitions this node leads, persisted in
// __share_group_state through a client of the node's own Kafka listener.
func (n *Node) startShares(logger *slog.Logger) error {
	n.shareLog = offsets.NewForTopic(share.StateTopic, n.replicas, logger.With("component", "share-state"))
	n.shareCoord = share.NewCoordinator(n.shareLog, n.cfg.ShareStatePartitions)
	n.shareLog.SetCoordinator(n.shareCoord)
	n.lc.onStop("share coordinator state", func(stopping) error { n.shareLog.Close(); return nil })
	store, err := share.NewTopicStore([]string{n.kafkaLn.Addr().String()}, n.cfg.ShareStatePartitions, n.kafkaClientOpts()...)
	if err != nil {
		return err
	}
	n.shareStore = store
	n.lc.onStop("share state store", func(stopping) error { n.shareStore.Close(); return nil })
	dlq, err := share.NewTopicDeadLetters([]string{n.kafkaLn.Addr().String()}, n.kafkaClientOpts()...)
	if err != nil {
		return err
	}
	n.shareDLQ = dlq
	n.lc.onStop("share dead letters", func(stopping) error { n.shareDLQ.Close(); return nil })
	n.shares = share.NewManager(share.Config{Defaults: share.DefaultGroupConfig(), GroupConfig: n.shareGroupConfig, DeadLetters: dlq},
		store, sharePartitions{n}, logger)
	n.lc.onStop("share-partition leader", func(stopping) error { n.shares.Close(); return nil })
	n.metrics.RegisterShares(n.shares)
	return nil
}

// shareConns is the Kafka listener's hook that ends the share sessions of a
// closed connection, releasing their members' records (Kafka 4.1+).
type shareConns struct{ m *share.Manager }

// OnConnClose implements protocol.ConnCloseHook.
func (s shareConns) OnConnClose(c *protocol.ConnInfo, _ error) { s.m.ConnectionClosed(c.ID) }

// shareGroupConfig is a share group's configuration: its group configs (metadata),
// else Kafka's defaults.
func (n *Node) shareGroupConfig(group string) share.GroupConfig {
	img := n.ctrl.Image()
	c := share.DefaultGroupConfig()
	c.AutoOffsetReset = img.GroupConfig(group, metadata.GroupShareAutoOffsetReset)
	c.ReadCommitted = img.GroupConfig(group, metadata.GroupShareIsolationLevel) == "read_committed"
	if ms, err := strconv.Atoi(img.GroupConfig(group, metadata.GroupShareRecordLockDuration)); err == nil {
		c.LockDuration = time.Duration(ms) * time.Millisecond
	}
	if limit, err := strconv.Atoi(img.GroupConfig(group, metadata.GroupShareDeliveryCountLimit)); err == nil {
		c.DeliveryLimit = int16(limit)
	}
	c.DeadLetter.Topic = img.GroupConfig(group, metadata.GroupDeadLetterTopic)
	c.DeadLetter.CopyRecord, _ = strconv.ParseBool(img.GroupConfig(group, metadata.GroupDeadLetterCopyRecord))
	return c
}

// sharePartitions is what the share-partition leader reads: the metadata image and
// the local replicas.
type sharePartitions struct{ n *Node }

func (s sharePartitions) Image() *metadata.Image { return s.n.ctrl.Image() }

func (s sharePartitions) Partition(topic string, index int32) (*replica.Partition, error) {
	return s.n.replicas.Partition(topic, index)
}

// SyncMetadata asks the active controller for its high watermark (DescribeQuorum
// over the link; its answer covers every change acknowledged before, see
// controller.Quorum) and waits until this node's image reaches it. A controller
// change on the way (no controller known, NOT_CONTROLLER) is retried until ctx
// ends.
func (s sharePartitions) SyncMetadata(ctx context.Context) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	var hw int64
	err := s.n.retry(ctx, "reading the metadata high watermark", func() error {
		resp, err := s.n.toController.Request(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.DescribeQuorumResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return errors.New("DescribeQuorum answered without the metadata partition")
		}
		p := r.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return err
		}
		hw = p.HighWatermark
		return nil
	})
	if err != nil {
		return err
	}
	return s.n.ctrl.WaitCommitted(ctx, uint64(hw))
}

// shareState is the share-partition state as the group coordinator's share-group
// offset APIs reach it: the state topic through the node's store, wherever its
// partitions are led, and this node's share-partition leader, which drops what it
// holds of a partition whose state the coordinator rewrote.
type shareState struct{ n *Node }

func shareKey(sp group.SharePartition) share.Key {
	return share.Key{Group: sp.Group, TopicID: sp.TopicID, Partition: sp.Partition}
}

func (s shareState) Summary(ctx context.Context, sp group.SharePartition) (group.ShareSummary, bool, error) {
	sum, ok, err := s.n.shareStore.Summary(ctx, shareKey(sp))
	if err != nil || !ok {
		return group.ShareSummary{}, false, err
	}
	out := group.ShareSummary{StartOffset: sum.Start, LeaderEpoch: sum.LeaderEpoch, Lag: -1}
	if hwm, err := s.n.shareStore.HighWatermark(ctx, sp.Topic, sp.Partition); err == nil {
		out.Lag = sum.Lag(hwm)
	}
	return out, true, nil
}

// Reset initializes the next state epoch at start (InitializeShareGroupState):
// the share coordinator then refuses every write of a leader holding the old
// state (FENCED_STATE_EPOCH), which reloads it.
func (s shareState) Reset(ctx context.Context, sp group.SharePartition, start int64) error {
	k := shareKey(sp)
	prev, found, err := s.n.shareStore.Summary(ctx, k)
	if err != nil {
		return err
	}
	if err := s.n.shareStore.Initialize(ctx, k, share.NextStateEpoch(prev, found), start); err != nil {
		return err
	}
	s.n.shares.Unload(k)
	return nil
}

func (s shareState) Delete(ctx context.Context, sp group.SharePartition) error {
	k := shareKey(sp)
	if err := s.n.shareStore.Delete(ctx, k); err != nil {
		return err
	}
	s.n.shares.Unload(k)
	return nil
}

func (s shareState) Partitions(ctx context.Context, g string) ([]group.SharePartition, error) {
	keys, err := s.n.shareStore.GroupKeys(ctx, g)
	if err != nil {
		return nil, err
	}
	out := make([]group.SharePartition, 0, len(keys))
	for _, k := range keys {
		out = append(out, group.SharePartition{Group: k.Group, TopicID: k.TopicID, Partition: k.Partition})
	}
	return out, nil
}
