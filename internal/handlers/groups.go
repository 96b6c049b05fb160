package handlers

// The classic consumer group APIs, served by the group coordinator (package group):
//   OffsetCommit (8), OffsetFetch (9), JoinGroup (11), Heartbeat (12),
//   LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
//   DeleteGroups (42), OffsetDelete (47); versions as group.Versions() says. The
// KIP-848 APIs, ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), and the
// share-group ones, ShareGroupHeartbeat (76), ShareGroupDescribe (77) and the
// share-group offset APIs (90-92), and the streams-group ones (88, 89, 93) have
// their own files.
// Each handler passes the decoded request to the coordinator; OffsetCommit and
// OffsetDelete first answer the partitions of unknown topics
// UNKNOWN_TOPIC_OR_PARTITION themselves, as Kafka's broker does, and an
// OffsetCommit left with nothing to commit does not reach the coordinator.
// DeleteGroups answers a group named twice once. A SyncGroup v5+ without its
// protocol type or name is INCONSISTENT_GROUP_PROTOCOL before anything else,
// authorization included (refusedBeforeAuthorization). JoinGroup, SyncGroup
// and OffsetCommit can wait (for a rebalance, for the offsets topic): they finish
// off the connection's handler goroutine (protocol.Response.Wait) so a client's
// other requests on the connection are not held up.

import (
	"context"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// Groups is the group coordinator as the handlers use it.
type Groups interface {
	JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse
	OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse
	OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse
	DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse
	DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse
	OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse
	CompleteTxnOffsets(partition int32, producerID int64, commit bool)
	ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse
	ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse
	ShareGroupHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse
	ShareGroupDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse
	StreamsGroupHeartbeat(ctx context.Context, req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, []kmsg.CreateTopicsRequestTopic)
	StreamsGroupDescribe(ctx context.Context, req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse
	StreamsGroupTopologyDescriptionUpdate(ctx context.Context, req *kmsg.StreamsGroupTopologyDescriptionUpdateRequest) *kmsg.StreamsGroupTopologyDescriptionUpdateResponse
	DescribeShareGroupOffsets(ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse
	AlterShareGroupOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse
	DeleteShareGroupOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse
}

// groupServe maps each group API key to its handler.
var groupServe = map[int16]func(h *Handlers, ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response{
	8: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		req := r.Msg.(*kmsg.OffsetCommitRequest)
		unknown := dropUnknownCommits(h.cluster.Image(), req)
		if len(req.Topics) == 0 { // nothing left to commit: Kafka does not ask the coordinator
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			resp.Topics = unknown
			return reply(resp)
		}
		return waitFor(func(ctx context.Context) kmsg.Response {
			resp := h.groups.OffsetCommit(ctx, req)
			resp.Topics = foldTopics(unknown, resp.Topics, func(t *kmsg.OffsetCommitResponseTopic) (string, *[]kmsg.OffsetCommitResponseTopicPartition) {
				return t.Topic, &t.Partitions
			})
			return resp
		})
	},
	9: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return reply(h.groups.OffsetFetch(ctx, r.Msg.(*kmsg.OffsetFetchRequest)))
	},
	11: func(h *Handlers, _ context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		cl := group.Client{ID: c.ClientID(), Host: hostOf(c.RemoteAddr)}
		return waitFor(func(ctx context.Context) kmsg.Response {
			return h.groups.JoinGroup(group.WithClient(ctx, cl), r.Msg.(*kmsg.JoinGroupRequest))
		})
	},
	12: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return reply(h.groups.Heartbeat(ctx, r.Msg.(*kmsg.HeartbeatRequest)))
	},
	13: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return reply(h.groups.LeaveGroup(ctx, r.Msg.(*kmsg.LeaveGroupRequest)))
	},
	14: func(h *Handlers, _ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return waitFor(func(ctx context.Context) kmsg.Response {
			return h.groups.SyncGroup(ctx, r.Msg.(*kmsg.SyncGroupRequest))
		})
	},
	15: func(h *Handlers, ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		req := r.Msg.(*kmsg.DescribeGroupsRequest)
		resp := h.groups.DescribeGroups(ctx, req)
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			for i, g := range resp.Groups {
				if g.ErrorCode == 0 {
					resp.Groups[i].AuthorizedOperations = h.authorizedOperations(ctx, c, resGroup, g.Group)
				}
			}
		}
		return reply(resp)
	},
	16: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return reply(h.groups.ListGroups(ctx, r.Msg.(*kmsg.ListGroupsRequest)))
	},
	42: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		req := r.Msg.(*kmsg.DeleteGroupsRequest)
		req.Groups = distinct(req.Groups) // a group named twice is answered once
		return reply(h.groups.DeleteGroups(ctx, req))
	},
	47: func(h *Handlers, ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		req := r.Msg.(*kmsg.OffsetDeleteRequest)
		unknown := dropUnknownOffsetDeletes(h.cluster.Image(), req)
		resp := h.groups.OffsetDelete(ctx, req)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, unknown...)
		}
		return reply(resp)
	},
	68: (*Handlers).consumerGroupHeartbeat,
	69: (*Handlers).consumerGroupDescribe,
	76: (*Handlers).shareGroupHeartbeat,
	77: (*Handlers).shareGroupDescribe,
	88: (*Handlers).streamsGroupHeartbeat,
	89: (*Handlers).streamsGroupDescribe,
	90: (*Handlers).describeShareGroupOffsets,
	91: (*Handlers).alterShareGroupOffsets,
	92: (*Handlers).deleteShareGroupOffsets,
	93: (*Handlers).streamsGroupTopologyDescriptionUpdate,
}

// groupApis is the registry entries of the group APIs, from the coordinator's table.
func groupApis() []api {
	var as []api
	for _, v := range group.Versions() {
		as = append(as, api{key: v.Key, min: v.Min, max: v.Max, serve: groupServe[v.Key]})
	}
	return as
}

// waitFor finishes a request off the connection's handler goroutine.
func waitFor(f func(ctx context.Context) kmsg.Response) protocol.Response {
	return protocol.Response{Wait: func(ctx context.Context) protocol.Response { return reply(f(ctx)) }}
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return "/" + host
}

// dropUnknownCommits takes the partitions of topics or partitions that do not
// exist out of an OffsetCommit and returns their answers,
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka's broker does before the coordinator
// sees the request (the other partitions are committed).
func dropUnknownCommits(img *metadata.Image, req *kmsg.OffsetCommitRequest) []kmsg.OffsetCommitResponseTopic {
	var unknown []kmsg.OffsetCommitResponseTopic
	req.Topics, unknown = dropUnknown(img, req.Topics,
		func(t *kmsg.OffsetCommitRequestTopic) (string, *[]kmsg.OffsetCommitRequestTopicPartition) {
			return t.Topic, &t.Partitions
		},
		func(p kmsg.OffsetCommitRequestTopicPartition) int32 { return p.Partition },
		func(topic string, missing []int32) kmsg.OffsetCommitResponseTopic {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = topic
			for _, p := range missing {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
	return unknown
}

// dropUnknownOffsetDeletes is dropUnknownCommits for OffsetDelete, as Kafka's
// broker checks it too.
func dropUnknownOffsetDeletes(img *metadata.Image, req *kmsg.OffsetDeleteRequest) []kmsg.OffsetDeleteResponseTopic {
	var unknown []kmsg.OffsetDeleteResponseTopic
	req.Topics, unknown = dropUnknown(img, req.Topics,
		func(t *kmsg.OffsetDeleteRequestTopic) (string, *[]kmsg.OffsetDeleteRequestTopicPartition) {
			return t.Topic, &t.Partitions
		},
		func(p kmsg.OffsetDeleteRequestTopicPartition) int32 { return p.Partition },
		func(topic string, missing []int32) kmsg.OffsetDeleteResponseTopic {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = topic
			for _, p := range missing {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
	return unknown
}

// dropUnknown splits a partition request's topics (T, with partitions P) into
// those whose partitions exist, returned in place of topics, and an answer
// (R, made by answer) for each topic with partitions that do not, naming
// them. topics comes back unchanged when every partition exists.
func dropUnknown[T, P, R any](img *metadata.Image, topics []T, parts func(*T) (string, *[]P),
	index func(P) int32, answer func(topic string, missing []int32) R) ([]T, []R) {
	var unknown []R
	kept := topics[:0:0]
	for _, t := range topics {
		name, ps := parts(&t)
		var known []P
		var missing []int32
		for _, p := range *ps {
			if img.Partition(name, index(p)) != nil {
				known = append(known, p)
			} else {
				missing = append(missing, index(p))
			}
		}
		if missing != nil {
			unknown = append(unknown, answer(name, missing))
		}
		if len(known) > 0 {
			*ps = known
			kept = append(kept, t)
		}
	}
	if unknown == nil {
		return topics, nil
	}
	return kept, unknown
}

// foldTopics is how Kafka's broker puts an offset commit's answer together:
// the topics it answered itself (answered: unknown partitions) first, and the
// coordinator's topics (served) folded into them by name, so that a topic
// with both kinds of partitions is one entry; served as it is when the broker
// answered nothing itself (a topic named twice then stays twice).
func foldTopics[T, P any](answered, served []T, parts func(*T) (string, *[]P)) []T {
	if len(answered) == 0 {
		return served
	}
	for _, s := range served {
		name, ps := parts(&s)
		i := slices.IndexFunc(answered, func(t T) bool { n, _ := parts(&t); return n == name })
		if i < 0 {
			answered = append(answered, s)
			continue
		}
		_, dst := parts(&answered[i])
		*dst = append(*dst, *ps...)
	}
	return answered
}

// distinct returns s without repeats, first occurrences in order.
func distinct(s []string) []string {
	seen := make(map[string]bool, len(s))
	return keep(s, func(x string) bool {
		if seen[x] {
			return false
		}
		seen[x] = true
		return true
	})
}

// refusedBeforeAuthorization answers a request Kafka's broker refuses before
// it authorizes it: a SyncGroup v5+ that leaves out its protocol type or name
// (mandatory from v5) is INCONSISTENT_GROUP_PROTOCOL, for a client allowed to
// READ the group or not, and whether the group exists or not.
func refusedBeforeAuthorization(r *protocol.Request) (protocol.Response, bool) {
	if req, ok := r.Msg.(*kmsg.SyncGroupRequest); ok && req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return reply(resp), true
	}
	return protocol.Response{}, false
}
