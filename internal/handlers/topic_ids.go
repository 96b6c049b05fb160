package handlers

// Topic ids in the group offset APIs. OffsetCommit v10, OffsetFetch v10
// (KIP-848) and TxnOffsetCommit v6 (KIP-1319) name topics by id; the group
// coordinator keys offsets by topic name, as Kafka's does. Before a request is
// filtered by ACLs and served, resolveTopicIDs looks each id up in one metadata
// snapshot and names the topic; an id no topic has (zero, unknown, a deleted
// topic's) is taken out and answered UNKNOWN_TOPIC_ID, or GROUP_AUTHORIZATION_FAILED
// for a commit to a group the client may not READ (Kafka checks the group first;
// a refused OffsetFetch group answers no topics at all). The answer's topics
// then get their ids back from the same snapshot; an OffsetFetch of every topic
// leaves out committed topics that no longer exist, as Kafka 4.4 does. Produce
// v13 resolves its ids itself, on its hot path (00_produce.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// resolveTopicIDs names the topics of a request that carries topic ids and
// returns what completes its answer (ids, the unknown ones), or nil for a
// request that names its topics.
func (h *Handlers) resolveTopicIDs(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) func(kmsg.Response) {
	switch req := r.Msg.(type) {
	case *kmsg.OffsetCommitRequest:
		if req.Version < 10 {
			return nil
		}
		img := h.cluster.Image()
		var unknown []kmsg.OffsetCommitResponseTopic
		kept := req.Topics[:0]
		for _, t := range req.Topics {
			if mt := img.TopicByID(t.TopicID); mt != nil {
				t.Topic = mt.Name
				kept = append(kept, t)
				continue
			}
			u := kmsg.NewOffsetCommitResponseTopic()
			u.TopicID = t.TopicID
			for _, p := range t.Partitions {
				up := kmsg.NewOffsetCommitResponseTopicPartition()
				up.Partition = p.Partition
				u.Partitions = append(u.Partitions, up)
			}
			unknown = append(unknown, u)
		}
		req.Topics = kept
		code := h.unknownTopicIDCode(ctx, c, req.Group, len(unknown) > 0)
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.OffsetCommitResponse)
			for i := range rs.Topics {
				rs.Topics[i].TopicID = topicID(img, rs.Topics[i].Topic)
			}
			for _, u := range unknown {
				for i := range u.Partitions {
					u.Partitions[i].ErrorCode = code
				}
				rs.Topics = append(rs.Topics, u)
			}
		}
	case *kmsg.TxnOffsetCommitRequest:
		if req.Version < 6 {
			return nil
		}
		img := h.cluster.Image()
		var unknown []kmsg.TxnOffsetCommitResponseTopic
		kept := req.Topics[:0]
		for _, t := range req.Topics {
			if mt := img.TopicByID(t.TopicID); mt != nil {
				t.Topic = mt.Name
				kept = append(kept, t)
				continue
			}
			u := kmsg.NewTxnOffsetCommitResponseTopic()
			u.TopicID = t.TopicID
			for _, p := range t.Partitions {
				up := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				up.Partition = p.Partition
				u.Partitions = append(u.Partitions, up)
			}
			unknown = append(unknown, u)
		}
		req.Topics = kept
		code := h.unknownTopicIDCode(ctx, c, req.Group, len(unknown) > 0)
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.TxnOffsetCommitResponse)
			for i := range rs.Topics {
				rs.Topics[i].TopicID = topicID(img, rs.Topics[i].Topic)
			}
			for _, u := range unknown {
				for i := range u.Partitions {
					u.Partitions[i].ErrorCode = code
				}
				rs.Topics = append(rs.Topics, u)
			}
		}
	case *kmsg.OffsetFetchRequest:
		if req.Version < 10 {
			return nil
		}
		img := h.cluster.Image()
		unknown := make([][]kmsg.OffsetFetchResponseGroupTopic, len(req.Groups))
		for gi := range req.Groups {
			rg := &req.Groups[gi]
			if rg.Topics == nil { // every committed topic
				continue
			}
			kept := rg.Topics[:0]
			for _, t := range rg.Topics {
				if mt := img.TopicByID(t.TopicID); mt != nil {
					t.Topic = mt.Name
					kept = append(kept, t)
					continue
				}
				u := kmsg.NewOffsetFetchResponseGroupTopic()
				u.TopicID = t.TopicID
				for _, p := range t.Partitions {
					up := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					up.Partition, up.Offset, up.LeaderEpoch, up.Metadata = p, -1, -1, ptr("")
					up.ErrorCode = kerr.UnknownTopicID.Code
					u.Partitions = append(u.Partitions, up)
				}
				unknown[gi] = append(unknown[gi], u)
			}
			rg.Topics = kept
		}
		return func(resp kmsg.Response) {
			rs := resp.(*kmsg.OffsetFetchResponse)
			for gi := range rs.Groups {
				g := &rs.Groups[gi]
				g.Topics = keep(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return img.Topic(t.Topic) != nil })
				for i := range g.Topics {
					g.Topics[i].TopicID = topicID(img, g.Topics[i].Topic)
				}
				if g.ErrorCode == 0 && gi < len(unknown) && req.Groups[gi].Group == g.Group {
					g.Topics = append(g.Topics, unknown[gi]...)
				}
			}
		}
	}
	return nil
}

// unknownTopicIDCode is the answer to a commit's unknown topic ids:
// UNKNOWN_TOPIC_ID, or GROUP_AUTHORIZATION_FAILED when the client may not READ
// the group (asked only when there are unknown ids).
func (h *Handlers) unknownTopicIDCode(ctx context.Context, c *protocol.ConnInfo, group string, any bool) int16 {
	if any && !h.authorize(ctx, c, kmsg.ACLOperationRead, resGroup, group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	return kerr.UnknownTopicID.Code
}

// topicID is the id of the named topic in img, zero for none.
func topicID(img *metadata.Image, name string) [16]byte {
	if t := img.Topic(name); t != nil {
		return t.ID
	}
	return [16]byte{}
}

func ptr[T any](v T) *T { return &v }
