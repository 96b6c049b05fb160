package handlers

// Metadata (key 3), v0-v13.
//   v0: an empty topic list means every topic, and a partition lists only the
//       replicas and ISR members on live brokers (REPLICA_NOT_AVAILABLE when it
//       leaves one out and the leader is live); v1+: a null list means every topic,
//       an empty one none. v1 adds the controller id and IsInternal, v2 the cluster id,
//       v4 AllowAutoTopicCreation (earlier versions always allow it), v5 offline
//       replicas, v7 leader epochs, v8 authorized operations when asked for (the
//       topic's on every topic the principal may DESCRIBE, unknown ones too; the
//       cluster's only up to v10, 0 without DESCRIBE on the cluster), v10 topic
//       ids (on v10-v11 a null name or a non-zero id refuses the whole request
//       INVALID_REQUEST), v12 lookup by topic id (once one topic is given by
//       id, the names of the request are ignored), v13 a top-level error code (KIP-1102),
//       always 0 as from a Kafka 4.4 broker.
// Unknown topics are created when the broker and the request allow it (an
// internal topic as its coordinator creates it): the answer then carries the
// new topic, or UNKNOWN_TOPIC_OR_PARTITION while it is not yet applied (Kafka
// 4's answer for every topic it auto-creates). An internal topic not there yet
// is answered internal.
// Named topics are answered in the request's order. Kafka groups them by
// outcome (unknown ids, described, denied CREATE, denied DESCRIBE), each group
// in the order of a Scala set (hash order past four topics); the schema keys
// the topics by name (mapKey) and no client reads their order.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) metadata(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.MetadataRequest)
	if req.Version < 12 && !lookupByNameOnly(req) {
		return reply(refuseMetadata(req, kerr.InvalidRequest.Code))
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	img := h.cluster.Image()
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	creatable := h.topicCheck(ctx, c, kmsg.ACLOperationCreate)
	clusterCreate := h.authorizeCluster(ctx, c, kmsg.ACLOperationCreate)

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	named := requestedTopics(req)
	autoCreate := h.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	if !all && autoCreate {
		var missing []string
		for _, t := range named {
			if t.Topic != nil && img.Topic(*t.Topic) == nil && metadata.ValidateTopicName(*t.Topic) == nil &&
				describable(*t.Topic) && (clusterCreate || creatable(*t.Topic)) {
				missing = append(missing, *t.Topic)
			}
		}
		if len(missing) > 0 {
			h.autoCreateNamed(ctx, missing)
			img = h.cluster.Image()
		}
	}

	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		if b.Rack != "" {
			rb.Rack = &b.Rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterID = &h.cfg.ClusterID
	resp.ControllerID = h.controllerID(img)

	// v0 lists only live replicas, as Kafka (errorUnavailableEndpoints).
	d := topicDescriber{liveOnly: req.Version == 0}
	if all {
		topics := img.Topics()
		d.reserve(topics)
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(topics))
		for _, t := range topics {
			if describable(t.Name) {
				resp.Topics = append(resp.Topics, d.describe(img, t))
			}
		}
	} else {
		resp.Topics = h.describeNamedTopics(&d, named, img, describable, creatable, clusterCreate, autoCreate)
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = h.clusterAuthorizedOperations(ctx, c)
	}
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			mt := &resp.Topics[i]
			// As Kafka: every topic the principal may DESCRIBE, unknown ones too.
			if mt.ErrorCode != kerr.TopicAuthorizationFailed.Code && mt.ErrorCode != kerr.UnknownTopicID.Code {
				mt.AuthorizedOperations = h.authorizedOperations(ctx, c, resTopic, nullable(mt.Topic))
			}
		}
	}
	return reply(resp)
}

// lookupByNameOnly reports whether every topic of req is named and none has a
// topic id: below v12 (v10 and v11 carry the fields) anything else is
// INVALID_REQUEST for the whole request, as Kafka answers.
func lookupByNameOnly(req *kmsg.MetadataRequest) bool {
	for _, rt := range req.Topics {
		if rt.Topic == nil || rt.TopicID != (metadata.UUID{}) {
			return false
		}
	}
	return true
}

// refuseMetadata is Kafka's answer to a Metadata request refused whole
// (MetadataRequest.getErrorResponse): every requested topic with code and no
// partitions (a null name as ""), no broker, no cluster id, no controller.
func refuseMetadata(req *kmsg.MetadataRequest, code int16) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ControllerID = -1
	for _, rt := range req.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.ErrorCode = kmsg.StringPtr(nullable(rt.Topic)), rt.TopicID, code
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// requestedTopics is the topics req asks for, each once however often it is
// named, as Kafka collects them in a set. On v12+, once one topic is given by
// a non-zero id, Kafka looks up ids only: the names (beside an id or alone)
// are ignored, and the answers carry no name but the topic's own.
func requestedTopics(req *kmsg.MetadataRequest) []kmsg.MetadataRequestTopic {
	byID := slices.ContainsFunc(req.Topics, func(rt kmsg.MetadataRequestTopic) bool {
		return rt.TopicID != metadata.UUID{}
	})
	var out []kmsg.MetadataRequestTopic
	names := map[string]bool{}
	ids := map[metadata.UUID]bool{}
	for _, rt := range req.Topics {
		switch {
		case byID:
			if rt.TopicID == (metadata.UUID{}) || ids[rt.TopicID] {
				continue
			}
			ids[rt.TopicID] = true
			rt.Topic = nil
		case rt.Topic != nil:
			if names[*rt.Topic] {
				continue
			}
			names[*rt.Topic] = true
		default: // neither a name nor an id
			if ids[rt.TopicID] {
				continue
			}
			ids[rt.TopicID] = true
		}
		out = append(out, rt)
	}
	return out
}

// describeNamedTopics is Metadata's answer for the named topics, in order.
func (h *Handlers) describeNamedTopics(d *topicDescriber, named []kmsg.MetadataRequestTopic, img *metadata.Image, describable, creatable func(string) bool, clusterCreate, autoCreate bool) []kmsg.MetadataResponseTopic {
	var topics []kmsg.MetadataResponseTopic
	for _, rt := range named {
		var t *metadata.Topic
		switch {
		case rt.Topic != nil:
			t = img.Topic(*rt.Topic)
		case rt.TopicID != metadata.UUID{}:
			t = img.TopicByID(rt.TopicID)
		}
		if t != nil && describable(t.Name) {
			topics = append(topics, d.describe(img, t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		switch {
		case t != nil || rt.Topic != nil && !describable(*rt.Topic):
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case rt.Topic == nil:
			mt.ErrorCode = kerr.UnknownTopicID.Code
		default:
			// A name the principal may DESCRIBE and no topic yet: Kafka marks
			// an internal one internal whatever it answers.
			mt.IsInternal = IsInternalTopic(*rt.Topic)
			switch {
			case autoCreate && !clusterCreate && !creatable(*rt.Topic):
				// It would be created but for CREATE: Kafka answers so before
				// it validates the name.
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case metadata.ValidateTopicName(*rt.Topic) != nil:
				mt.ErrorCode = kerr.InvalidTopicException.Code
			default:
				// Being auto-created too, as Kafka 4 answers a topic it
				// has sent to the controller for creation.
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
		}
		topics = append(topics, mt)
	}
	return topics
}

// autoCreateNamed creates the missing topics a Metadata request names, as
// Kafka's AutoTopicCreationManager: an internal topic as its coordinator
// creates it (internalTopic), any other with the broker's defaults.
func (h *Handlers) autoCreateNamed(ctx context.Context, names []string) {
	var others []string
	for _, name := range names {
		if IsInternalTopic(name) {
			h.ensureInternalTopic(ctx, name)
		} else {
			others = append(others, name)
		}
	}
	if len(others) > 0 {
		h.autoCreate(ctx, others)
	}
}

// topicDescriber builds the Metadata answers of topics. The answer of every
// partition comes from one slab allocated up front (reserve), and a topic's
// name points at the image's own (immutable, and only read by the encoder), so
// an answer for every topic costs a few allocations however many topics and
// partitions there are, not a few per topic.
type topicDescriber struct {
	slab []kmsg.MetadataResponseTopicPartition
	// liveOnly lists only the replicas and ISR members on live brokers, and
	// REPLICA_NOT_AVAILABLE where one is left out (Metadata v0).
	liveOnly bool
}

// reserve makes room for the partitions of topics.
func (d *topicDescriber) reserve(topics []*metadata.Topic) {
	n := 0
	for _, t := range topics {
		n += len(t.Partitions)
	}
	d.slab = make([]kmsg.MetadataResponseTopicPartition, 0, n)
}

func (d *topicDescriber) describe(img *metadata.Image, t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = &t.Name, t.ID
	mt.IsInternal = IsInternalTopic(t.Name)
	if cap(d.slab)-len(d.slab) < len(t.Partitions) {
		d.slab = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	}
	start := len(d.slab)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = offlineReplicas(img, p)
		if d.liveOnly {
			mp.Replicas, mp.ISR = liveReplicas(img, p.Replicas), liveReplicas(img, p.ISR)
		}
		switch {
		case !leaderRegistered(img, p):
			mp.Leader, mp.ErrorCode = metadata.NoLeader, kerr.LeaderNotAvailable.Code
		case len(mp.Replicas) < len(p.Replicas) || len(mp.ISR) < len(p.ISR):
			mp.ErrorCode = kerr.ReplicaNotAvailable.Code
		}
		d.slab = append(d.slab, mp)
	}
	mt.Partitions = d.slab[start:len(d.slab):len(d.slab)]
	return mt
}

// offlineReplicas lists p's replicas on brokers that are not live (nil when
// every one is), as Metadata and DescribeTopicPartitions answer them.
func offlineReplicas(img *metadata.Image, p *metadata.Partition) []int32 {
	var offline []int32
	for _, id := range p.Replicas {
		if !img.IsLive(id) {
			offline = append(offline, id)
		}
	}
	return offline
}

// liveReplicas is the replicas of ids on live brokers: ids itself when every
// one is.
func liveReplicas(img *metadata.Image, ids []int32) []int32 {
	if !slices.ContainsFunc(ids, func(id int32) bool { return !img.IsLive(id) }) {
		return ids
	}
	return slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return !img.IsLive(id) })
}

// leaderRegistered reports whether p's leader is a registered broker, fenced
// or not: as Kafka's KRaftMetadataCache, Metadata and DescribeTopicPartitions
// name such a leader, and answer leader -1 only for one that is not.
func leaderRegistered(img *metadata.Image, p *metadata.Partition) bool {
	return img.Broker(p.Leader) != nil
}

// OffsetsTopic is the internal topic holding consumer group offsets.
const OffsetsTopic = "__consumer_offsets"

// IsInternalTopic reports Kafka's internal topics: written by the group,
// transaction and share coordinators only, listed as internal by Metadata.
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == txn.StateTopic || name == share.StateTopic
}
