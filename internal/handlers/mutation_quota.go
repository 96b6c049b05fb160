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
		req.Topics = keep(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
			n := int(t.NumPartitions)
			switch {
			case len(t.ReplicaAssignment) > 0:
				n = len(t.ReplicaAssignment)
			case n < 0:
				n = int(h.cfg.DefaultPartitions)
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
		req.Topics = keep(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool {
			ok := admit(max(int(t.Count)-partitionsOf(t.Topic), 0), req.Version >= 3)
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
		req.TopicNames = keep(req.TopicNames, func(name string) bool {
			ok := admit(partitionsOf(name), strict)
			if !ok {
				refuse(name, [16]byte{})
			}
			return ok
		})
		req.Topics = keep(req.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
			name := deletedTopicName(img, t)
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
