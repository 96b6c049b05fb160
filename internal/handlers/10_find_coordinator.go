package handlers

// FindCoordinator (key 10), v0-v6.
//   v1: key type (0 group, 1 transaction, 2 share; others INVALID_REQUEST); v3+
//   flexible; v4+: several keys at once (CoordinatorKeys, answered in
//   Coordinators). A share key ("group:topic id:partition", KIP-932) needs v6 and
//   CLUSTER_ACTION (a broker finding its share coordinator): older versions are
//   UNSUPPORTED_VERSION, a key that does not parse INVALID_REQUEST.
// A group's coordinator is the leader of partition PartitionFor(group) of
// __consumer_offsets, a transactional id's the leader of its partition of
// __transaction_state, a share partition's the leader of its partition of
// __share_group_state (share.StatePartition; the share state store creates that
// topic); the others are created on first use (compacted, 50 partitions by
// default, replication factor min(3, brokers)).

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) findCoordinator(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	img := h.cluster.Image()
	if req.CoordinatorType == 2 {
		return reply(h.findShareCoordinator(ctx, c, req, keys))
	}
	topic := group.OffsetsTopic
	if req.CoordinatorType == 1 {
		topic = txn.StateTopic
	}
	known := req.CoordinatorType == 0 || (req.CoordinatorType == 1 && h.cfg.Transactions != nil)
	if known && img.Topic(topic) == nil {
		h.ensureInternalTopic(ctx, topic)
		img = h.cluster.Image()
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		switch {
		case req.CoordinatorType == 1 && h.cfg.Transactions == nil:
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case !known:
			c.ErrorCode = kerr.InvalidRequest.Code
		default:
			h.locateCoordinator(img, topic, func(n int32) int32 { return group.PartitionFor(key, n) }, &c)
		}
		if c.ErrorCode != 0 {
			msg := kerr.ErrorForCode(c.ErrorCode).Error()
			c.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return reply(resp)
}

// findShareCoordinator answers FindCoordinator for share keys (type 2).
func (h *Handlers) findShareCoordinator(ctx context.Context, c *protocol.ConnInfo, req *kmsg.FindCoordinatorRequest, keys []string) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	img := h.cluster.Image()
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Port = -1, -1
		k, ok := share.ParseCoordinatorKey(key)
		switch {
		case req.Version < 6:
			co.ErrorCode = kerr.UnsupportedVersion.Code
		case !allowed:
			co.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		case !ok || k.Group == "":
			co.ErrorCode = kerr.InvalidRequest.Code
		default:
			h.locateCoordinator(img, share.StateTopic, func(n int32) int32 { return share.StatePartition(k, n) }, &co)
		}
		co.ErrorMessage = errMessage(co.ErrorCode)
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if req.Version < 4 {
		co := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
		resp.Coordinators = nil
	}
	return resp
}

// locateCoordinator fills c with the broker leading partition partitionOf(the
// topic's partition count) of the coordinator's topic (__consumer_offsets,
// __transaction_state or __share_group_state).
func (h *Handlers) locateCoordinator(img *metadata.Image, topic string, partitionOf func(int32) int32, c *kmsg.FindCoordinatorResponseCoordinator) {
	t := img.Topic(topic)
	if t == nil || len(t.Partitions) == 0 {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	p := t.Partitions[partitionOf(int32(len(t.Partitions)))]
	b := img.Broker(p.Leader)
	if p.Leader == metadata.NoLeader || b == nil || b.Fenced {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	c.NodeID, c.Host, c.Port = b.ID, b.Host, b.Port
}

// ensureInternalTopic creates one of Kafka's internal topics if it does not
// exist yet, as its coordinator creates it (internalTopic).
func (h *Handlers) ensureInternalTopic(ctx context.Context, topic string) {
	h.createOwnTopics(ctx, "created internal topic", []kmsg.CreateTopicsRequestTopic{h.internalTopic(topic)})
}

// internalTopic is the creation of an internal topic with its coordinator's
// settings, whichever path creates it (Kafka's
// AutoTopicCreationManager.creatableTopic): the coordinator's partition count;
// for the group and transaction coordinators' topics the default replication
// factor, compacted, 100 MiB segments, the compression Kafka's coordinators
// set (producer; uncompressed), no unclean election for transactions; for the
// share coordinator's share.StateTopicSettings, which its state store creates
// the topic with too. Unlike Kafka, the coordinators' topics are preallocated
// (preallocate=true; docs/storage.md): their logs take small appends, each
// fsynced before its answer, and an fsync of appends over zeroed blocks
// allocates nothing and changes no size or extent.
func (h *Handlers) internalTopic(topic string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.ReplicationFactor = topic, -1
	configs := map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(100 << 20), "preallocate": "true"}
	switch topic {
	case group.OffsetsTopic:
		t.NumPartitions = h.cfg.OffsetsTopicPartitions
		configs["compression.type"] = "producer"
	case txn.StateTopic:
		t.NumPartitions = h.cfg.TransactionStatePartitions
		configs["compression.type"] = "uncompressed"
		configs["unclean.leader.election.enable"] = "false"
	case share.StateTopic:
		t.NumPartitions = h.cfg.ShareStatePartitions
		t.ReplicationFactor, configs = share.StateTopicSettings(len(h.cluster.Image().LiveBrokers()))
	}
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(configs[name])
		t.Configs = append(t.Configs, c)
	}
	return t
}
