package handlers

// Per-resource authorization of the admin and group APIs whose handlers serve a
// list of resources: before the handler runs, the resources the principal may
// not touch are taken out of the request (so they are never forwarded or
// changed); afterwards they are put back into the response with the
// authorization error. Read-only group APIs are filtered after the coordinator
// answered instead.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

// filterRequest removes denied resources from r.Msg and returns what puts them
// back into the response, or nil when nothing is checked for r.
func (h *Handlers) filterRequest(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) func(kmsg.Response) {
	if h.cfg.Authorizer == nil || ctx.Value(onLinkKey{}) != nil {
		return nil
	}
	topicErr := kerr.TopicAuthorizationFailed.Code
	switch req := r.Msg.(type) {
	case *kmsg.CreateTopicsRequest:
		clusterCreate := h.authorizeCluster(ctx, c, kmsg.ACLOperationCreate)
		creatable := h.topicCheck(ctx, c, kmsg.ACLOperationCreate)
		var denied []string
		req.Topics = keep(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
			ok := clusterCreate || creatable(t.Topic)
			if !ok {
				denied = append(denied, t.Topic)
			}
			return ok
		})
		describableConfigs := h.topicCheck(ctx, c, kmsg.ACLOperationDescribeConfigs)
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.CreateTopicsResponse)
			// As Kafka's controller: a created topic's settings only to
			// one who may DESCRIBE_CONFIGS it.
			for i := range rs.Topics {
				if t := &rs.Topics[i]; t.ErrorCode == 0 && !describableConfigs(t.Topic) {
					t.NumPartitions, t.ReplicationFactor, t.Configs = -1, -1, nil
					t.ConfigErrorCode = topicErr
				}
			}
			for _, name := range denied {
				t := kmsg.NewCreateTopicsResponseTopic()
				t.Topic, t.ErrorCode, t.NumPartitions, t.ReplicationFactor = name, topicErr, -1, -1
				t.ErrorMessage = kmsg.StringPtr("Authorization failed.") // Kafka's
				rs.Topics = append(rs.Topics, t)
			}
		}
	case *kmsg.DeleteTopicsRequest:
		clusterDelete := h.authorizeCluster(ctx, c, kmsg.ACLOperationDelete)
		deletable := h.topicCheck(ctx, c, kmsg.ACLOperationDelete)
		img := h.cluster.Image()
		var denied []kmsg.DeleteTopicsResponseTopic
		describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
		deny := func(name string, id [16]byte) {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.TopicID, t.ErrorCode = id, topicErr
			if id == ([16]byte{}) || describable(name) {
				// By id, the name only to one who may see the topic, as Kafka.
				n := name
				t.Topic = &n
			}
			denied = append(denied, t)
		}
		// As Kafka's controller: DELETE on the cluster deletes every topic,
		// and a missing topic named by one who may DESCRIBE it is the
		// handler's to report (UNKNOWN_TOPIC_OR_PARTITION).
		passes := func(name string, byID bool) bool {
			return clusterDelete || deletable(name) || !byID && describable(name) && img.Topic(name) == nil
		}
		req.TopicNames = keep(req.TopicNames, func(name string) bool {
			ok := passes(name, false)
			if !ok {
				deny(name, [16]byte{})
			}
			return ok
		})
		req.Topics = keep(req.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
			name := deletedTopicName(img, t)
			ok := name == "" || passes(name, t.TopicID != [16]byte{}) // an unknown id is the handler's to report
			if !ok {
				deny(name, t.TopicID)
			}
			return ok
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.DeleteTopicsResponse)
			rs.Topics = append(rs.Topics, denied...)
		}
	case *kmsg.CreatePartitionsRequest:
		alterable := h.topicCheck(ctx, c, kmsg.ACLOperationAlter)
		var denied []string
		req.Topics = keep(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool {
			ok := alterable(t.Topic)
			if !ok {
				denied = append(denied, t.Topic)
			}
			return ok
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.CreatePartitionsResponse)
			for _, name := range denied {
				t := kmsg.NewCreatePartitionsResponseTopic()
				t.Topic, t.ErrorCode = name, topicErr
				rs.Topics = append(rs.Topics, t)
			}
		}
	case *kmsg.DescribeConfigsRequest:
		ok := h.configCheck(ctx, c, kmsg.ACLOperationDescribeConfigs)
		var denied []kmsg.DescribeConfigsResponseResource
		req.Resources = keep(req.Resources, func(rr kmsg.DescribeConfigsRequestResource) bool {
			code := ok(rr.ResourceType, rr.ResourceName)
			if code != 0 {
				d := kmsg.NewDescribeConfigsResponseResource()
				d.ResourceType, d.ResourceName, d.ErrorCode = rr.ResourceType, rr.ResourceName, code
				denied = append(denied, d)
			}
			return code == 0
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.DescribeConfigsResponse)
			rs.Resources = append(rs.Resources, denied...)
		}
	case *kmsg.AlterConfigsRequest:
		ok := h.configCheck(ctx, c, kmsg.ACLOperationAlterConfigs)
		var denied []kmsg.AlterConfigsResponseResource
		req.Resources = keep(req.Resources, func(rr kmsg.AlterConfigsRequestResource) bool {
			code := ok(rr.ResourceType, rr.ResourceName)
			if code != 0 {
				d := kmsg.NewAlterConfigsResponseResource()
				d.ResourceType, d.ResourceName, d.ErrorCode = rr.ResourceType, rr.ResourceName, code
				denied = append(denied, d)
			}
			return code == 0
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.AlterConfigsResponse)
			rs.Resources = append(rs.Resources, denied...)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		ok := h.configCheck(ctx, c, kmsg.ACLOperationAlterConfigs)
		var denied []kmsg.IncrementalAlterConfigsResponseResource
		req.Resources = keep(req.Resources, func(rr kmsg.IncrementalAlterConfigsRequestResource) bool {
			code := ok(rr.ResourceType, rr.ResourceName)
			if code != 0 {
				d := kmsg.NewIncrementalAlterConfigsResponseResource()
				d.ResourceType, d.ResourceName, d.ErrorCode = rr.ResourceType, rr.ResourceName, code
				denied = append(denied, d)
			}
			return code == 0
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.IncrementalAlterConfigsResponse)
			rs.Resources = append(rs.Resources, denied...)
		}
	case *kmsg.DeleteGroupsRequest:
		var denied []string
		req.Groups = keep(distinct(req.Groups), func(g string) bool {
			ok := h.authorize(ctx, c, kmsg.ACLOperationDelete, resGroup, g)
			if !ok {
				denied = append(denied, g)
			}
			return ok
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.DeleteGroupsResponse)
			for _, g := range denied {
				d := kmsg.NewDeleteGroupsResponseGroup()
				d.Group, d.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
				rs.Groups = append(rs.Groups, d)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.DescribeGroupsResponse)
			for i, g := range rs.Groups {
				if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, g.Group) {
					d := kmsg.NewDescribeGroupsResponseGroup()
					d.Group, d.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
					rs.Groups[i] = d
				}
			}
		}
	case *kmsg.ListGroupsRequest:
		if h.authorizeCluster(ctx, c, kmsg.ACLOperationDescribe) {
			return nil
		}
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.ListGroupsResponse)
			rs.Groups = keep(rs.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
				return h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, g.Group)
			})
		}
	case *kmsg.FindCoordinatorRequest:
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.FindCoordinatorResponse)
			// DESCRIBE on the group, or on the transactional id.
			rt, denied := resGroup, kerr.GroupAuthorizationFailed.Code
			switch req.CoordinatorType {
			case 0:
			case 1:
				rt, denied = resTxnID, kerr.TransactionalIDAuthorizationFailed.Code
			default:
				return // INVALID_REQUEST already
			}
			if req.Version < 4 {
				if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, rt, req.CoordinatorKey) {
					rs.ErrorCode, rs.NodeID, rs.Host, rs.Port = denied, -1, "", -1
					rs.ErrorMessage = nil
				}
				return
			}
			for i, co := range rs.Coordinators {
				if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, rt, co.Key) {
					rs.Coordinators[i].ErrorCode, rs.Coordinators[i].NodeID = denied, -1
					rs.Coordinators[i].Host, rs.Coordinators[i].Port = "", -1
					rs.Coordinators[i].ErrorMessage = nil
				}
			}
		}
	case *kmsg.OffsetCommitRequest:
		readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
		groupOK := h.authorize(ctx, c, kmsg.ACLOperationRead, resGroup, req.Group)
		var denied []kmsg.OffsetCommitResponseTopic
		req.Topics = keep(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool {
			code := int16(0)
			switch {
			case !groupOK:
				code = kerr.GroupAuthorizationFailed.Code
			case !readable(t.Topic):
				code = topicErr
			}
			if code != 0 {
				denied = append(denied, offsetCommitTopicError(&t, code))
			}
			return code == 0
		})
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.OffsetCommitResponse)
			rs.Topics = append(rs.Topics, denied...)
		}
	case *kmsg.OffsetDeleteRequest:
		readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
		if !h.authorize(ctx, c, kmsg.ACLOperationDelete, resGroup, req.Group) {
			req.Topics = nil
			return func(resp kmsg.Response) {
				resp.(*kmsg.OffsetDeleteResponse).ErrorCode = kerr.GroupAuthorizationFailed.Code
			}
		}
		var denied []kmsg.OffsetDeleteResponseTopic
		req.Topics = keep(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool {
			if readable(t.Topic) {
				return true
			}
			denied = append(denied, offsetDeleteTopicError(&t, topicErr))
			return false
		})
		return func(resp kmsg.Response) {
			if rs := resp.(*kmsg.OffsetDeleteResponse); rs.ErrorCode == 0 { // a group error is the whole answer
				rs.Topics = append(rs.Topics, denied...)
			}
		}
	case *kmsg.OffsetFetchRequest:
		describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
		groupOK := func(g string) bool { return h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, g) }
		// v8+: the topics a group names that the principal may not DESCRIBE
		// are not asked for; each of their partitions is answered
		// TOPIC_AUTHORIZATION_FAILED (offset -1) unless the group fails.
		deniedTopics := make([][]kmsg.OffsetFetchResponseGroupTopic, len(req.Groups))
		for gi := range req.Groups {
			rg := &req.Groups[gi]
			rg.Topics = keep(rg.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool {
				if describable(t.Topic) {
					return true
				}
				deniedTopics[gi] = append(deniedTopics[gi], offsetFetchTopicError(&t, topicErr))
				return false
			})
		}
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.OffsetFetchResponse)
			if req.Version < 8 {
				if !groupOK(req.Group) {
					rs.Topics, rs.ErrorCode = nil, kerr.GroupAuthorizationFailed.Code
					return
				}
				rs.Topics = keep(rs.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return describable(t.Topic) || req.Topics != nil })
				for i := range rs.Topics {
					if !describable(rs.Topics[i].Topic) {
						for j := range rs.Topics[i].Partitions {
							rs.Topics[i].Partitions[j].Offset, rs.Topics[i].Partitions[j].ErrorCode = -1, topicErr
						}
					}
				}
				return
			}
			for gi := range rs.Groups {
				g := &rs.Groups[gi]
				if !groupOK(g.Group) {
					g.Topics, g.ErrorCode = nil, kerr.GroupAuthorizationFailed.Code
					continue
				}
				g.Topics = keep(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return describable(t.Topic) })
				if gi < len(deniedTopics) && req.Groups[gi].Group == g.Group && g.ErrorCode == 0 {
					g.Topics = append(g.Topics, deniedTopics[gi]...)
				}
			}
		}
	}
	return nil
}

// configCheck returns the authorization error code (0: allowed) of op on a
// config resource: a topic, a group (its configs are the group's, as Kafka
// checks them), or the cluster for brokers, broker loggers and the rest.
func (h *Handlers) configCheck(ctx context.Context, c *protocol.ConnInfo, op kmsg.ACLOperation) func(kmsg.ConfigResourceType, string) int16 {
	topics := h.topicCheck(ctx, c, op)
	return func(rt kmsg.ConfigResourceType, name string) int16 {
		switch rt {
		case kmsg.ConfigResourceTypeTopic:
			if !topics(name) {
				return kerr.TopicAuthorizationFailed.Code
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if !h.authorize(ctx, c, op, resGroup, name) {
				return kerr.GroupAuthorizationFailed.Code
			}
		default:
			if !h.authorize(ctx, c, op, resCluster, acl.ClusterName) {
				return kerr.ClusterAuthorizationFailed.Code
			}
		}
		return 0
	}
}

// keep returns the elements of s for which ok holds, in order.
func keep[T any](s []T, ok func(T) bool) []T {
	out := s[:0:0]
	for _, x := range s {
		if ok(x) {
			out = append(out, x)
		}
	}
	if s != nil && out == nil {
		out = []T{}
	}
	return out
}
