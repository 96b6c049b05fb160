package handlers

// Controller mutation quotas (KIP-599): with a controller_mutation_rate quota
// configured for the client, CreateTopics, CreatePartitions and DeleteTopics count
// the partitions each topic creates or deletes against it (quota.Mutations),
// topic by topic in request order, after authorization:
//
//	CreateTopics      the partitions asked for (the default count for -1, the
//	                  assignment's length with a manual assignment)
//	CreatePartitions  the partitions added (new count - current count)
//	DeleteTopics      the topic's partitions
//
// A topic the controller refuses before counting, as Kafka's does (one that
// exists for CreateTopics, an unknown one, a partition count or replication
// factor out of range, a partition count that does not grow, a name given
// twice), is not counted and gets its own error.
//
// The versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+,
// CreatePartitions v3+, DeleteTopics v5+) are strict: once the client's bucket is
// empty, the remaining topics get that error and are not sent to the controller,
// and only then is the client throttled. Older versions are permissive: every
// topic goes through, throttled once the bucket is empty. A throttle goes in
// throttle_time_ms and mutes the connection for that long. Requests
// with validate_only and requests forwarded over the controller link (counted by
// the broker that took them from the client) are not counted.

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
)

// limitMutations removes the topics over the client's mutation quota from
// r.Msg and returns what answers them and throttles the response, or nil when no
// quota applies to r.
func (h *Handlers) limitMutations(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) func(protocol.Response) protocol.Response {
	switch r.Msg.(type) {
	case *kmsg.CreateTopicsRequest, *kmsg.CreatePartitionsRequest, *kmsg.DeleteTopicsRequest:
	default:
		return nil // no other request is counted: skip the quota lookup
	}
	if h.cfg.Quotas == nil || c == nil || ctx.Value(onLinkKey{}) != nil {
		return nil
	}
	img := h.cluster.Image()
	user, clientID := quota.UserOf(c.Principal()), c.ClientID()
	if _, _, ok := quota.Resolve(img, user, clientID, metadata.QuotaControllerMutationRate); !ok {
		return nil
	}
	var throttle time.Duration
	admit := func(partitions int, strict bool) bool {
		ok, t := h.cfg.Quotas.Mutations(img, user, clientID, partitions, strict)
		throttle = max(throttle, t)
		return ok
	}
	partitionsOf := func(name string) int {
		if t := img.Topic(name); t != nil {
			return len(t.Partitions)
		}
		return 0
	}
	code, msg := kerr.ThrottlingQuotaExceeded.Code, kerr.ThrottlingQuotaExceeded.Description
	var merge func(kmsg.Response)
	switch req := r.Msg.(type) {
	case *kmsg.CreateTopicsRequest:
		if req.ValidateOnly {
			return nil
		}
		var refused []string
		twice := givenTwice(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
		req.Topics = keep(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
			n := createdPartitions(img, t, h.cfg.DefaultPartitions)
			if n == 0 || twice[t.Topic] {
				return true // refused by the controller before counting
			}
			ok := admit(n, req.Version >= 6)
			if !ok {
				refused = append(refused, t.Topic)
			}
			return ok
		})
		merge = func(resp kmsg.Response) {
			rs := resp.(*kmsg.CreateTopicsResponse)
			for _, name := range refused {
				t := kmsg.NewCreateTopicsResponseTopic()
				m := msg
				t.Topic, t.ErrorCode, t.ErrorMessage, t.NumPartitions, t.ReplicationFactor = name, code, &m, -1, -1
				rs.Topics = append(rs.Topics, t)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		if req.ValidateOnly {
			return nil
		}
		var refused []string
		twice := givenTwice(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
		req.Topics = keep(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool {
			added := int(t.Count) - partitionsOf(t.Topic)
			if img.Topic(t.Topic) == nil || added <= 0 || twice[t.Topic] {
				return true // refused by the controller before counting
			}
			ok := admit(added, req.Version >= 3)
			if !ok {
				refused = append(refused, t.Topic)
			}
			return ok
		})
		merge = func(resp kmsg.Response) {
			rs := resp.(*kmsg.CreatePartitionsResponse)
			for _, name := range refused {
				t := kmsg.NewCreatePartitionsResponseTopic()
				m := msg
				t.Topic, t.ErrorCode, t.ErrorMessage = name, code, &m
				rs.Topics = append(rs.Topics, t)
			}
		}
	case *kmsg.DeleteTopicsRequest:
		strict := req.Version >= 5
		var refused []kmsg.DeleteTopicsResponseTopic
		refuse := func(name string, id [16]byte) {
			t := kmsg.NewDeleteTopicsResponseTopic()
			n, m := name, msg
			t.Topic, t.TopicID, t.ErrorCode, t.ErrorMessage = &n, id, code, &m
			refused = append(refused, t)
		}
		names := append(slices.Clone(req.TopicNames), make([]string, len(req.Topics))...)
		for i, t := range req.Topics {
			names[len(req.TopicNames)+i] = deletedTopicName(img, t)
		}
		twice := givenTwice(len(names), func(i int) string { return names[i] })
		req.TopicNames = keep(req.TopicNames, func(name string) bool {
			if img.Topic(name) == nil || twice[name] {
				return true // refused by the controller before counting
			}
			ok := admit(partitionsOf(name), strict)
			if !ok {
				refuse(name, [16]byte{})
			}
			return ok
		})
		req.Topics = keep(req.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
			name := deletedTopicName(img, t)
			if img.Topic(name) == nil || twice[name] {
				return true // refused by the controller before counting
			}
			ok := admit(partitionsOf(name), strict)
			if !ok {
				refuse(name, t.TopicID)
			}
			return ok
		})
		merge = func(resp kmsg.Response) {
			rs := resp.(*kmsg.DeleteTopicsResponse)
			rs.Topics = append(rs.Topics, refused...)
		}
	default:
		return nil
	}
	return func(resp protocol.Response) protocol.Response {
		resp = mergeInto(resp, func(m kmsg.Response) {
			merge(m)
			if tr, ok := m.(interface {
				kmsg.ThrottleResponse
				kmsg.SetThrottleResponse
			}); ok {
				if cur, _ := tr.Throttle(); int64(cur) < throttle.Milliseconds() {
					tr.SetThrottle(int32(throttle.Milliseconds()))
				}
			}
		})
		resp.Throttle = max(resp.Throttle, throttle)
		return resp
	}
}

// createdPartitions is the number of partitions t creates, or 0 when the
// controller refuses it before counting them (as Kafka's ReplicationControlManager
// checks a topic before applyPartitionChangeQuota): the topic exists, or its
// partition count or replication factor is not valid.
func createdPartitions(img *metadata.Image, t kmsg.CreateTopicsRequestTopic, defaultPartitions int32) int {
	invalid := func(n int32) bool { return n == 0 || n < -1 }
	switch {
	case img.Topic(t.Topic) != nil:
		return 0
	case len(t.ReplicaAssignment) > 0:
		return len(t.ReplicaAssignment)
	case invalid(t.NumPartitions) || invalid(int32(t.ReplicationFactor)):
		return 0
	case t.NumPartitions == -1:
		return int(defaultPartitions)
	}
	return int(t.NumPartitions)
}

// givenTwice returns the names among n that occur more than once: the
// controller refuses each of them as a whole (INVALID_REQUEST) before counting.
func givenTwice(n int, name func(int) string) map[string]bool {
	seen, twice := map[string]bool{}, map[string]bool{}
	for i := range n {
		twice[name(i)] = seen[name(i)]
		seen[name(i)] = true
	}
	return twice
}

// deletedTopicName is the name of a DeleteTopics v6+ topic, given by name or by
// id; "" for an id the image does not know.
func deletedTopicName(img *metadata.Image, t kmsg.DeleteTopicsRequestTopic) string {
	if t.Topic != nil {
		return *t.Topic
	}
	if tp := img.TopicByID(metadata.UUID(t.TopicID)); tp != nil {
		return tp.Name
	}
	return ""
}
