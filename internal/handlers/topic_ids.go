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
		complete := commitTopicIDs(h, ctx, c, req.Group, &req.Topics,
			func(t *kmsg.OffsetCommitRequestTopic) ([16]byte, *string) { return t.TopicID, &t.Topic },
			offsetCommitTopicError,
			func(t *kmsg.OffsetCommitResponseTopic) (*[16]byte, string) { return &t.TopicID, t.Topic })
		return func(resp kmsg.Response) { complete(&resp.(*kmsg.OffsetCommitResponse).Topics) }
	case *kmsg.TxnOffsetCommitRequest:
		if req.Version < 6 {
			return nil
		}
		complete := commitTopicIDs(h, ctx, c, req.Group, &req.Topics,
			func(t *kmsg.TxnOffsetCommitRequestTopic) ([16]byte, *string) { return t.TopicID, &t.Topic },
			txnOffsetCommitTopicError,
			func(t *kmsg.TxnOffsetCommitResponseTopic) (*[16]byte, string) { return &t.TopicID, t.Topic })
		return func(resp kmsg.Response) { complete(&resp.(*kmsg.TxnOffsetCommitResponse).Topics) }
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
			for _, t := range splitByID(img, &rg.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) ([16]byte, *string) { return t.TopicID, &t.Topic }) {
				unknown[gi] = append(unknown[gi], offsetFetchTopicError(&t, kerr.UnknownTopicID.Code))
			}
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

// splitByID names each topic of *topics (T: a request's topic, with its id and
// name) whose id img knows and takes the others out, returning them.
func splitByID[T any](img *metadata.Image, topics *[]T, idName func(*T) ([16]byte, *string)) (unknown []T) {
	kept := (*topics)[:0]
	for _, t := range *topics {
		id, name := idName(&t)
		if mt := img.TopicByID(id); mt != nil {
			*name = mt.Name
			kept = append(kept, t)
			continue
		}
		unknown = append(unknown, t)
	}
	*topics = kept
	return unknown
}

// commitTopicIDs resolves the topic ids of a commit to group (OffsetCommit v10,
// TxnOffsetCommit v6; T its request's topic, R its answer's) with splitByID in
// the current metadata image, and returns what completes the answer's topics:
// their ids from the same image, and an answer (made by unknown) for each
// unknown id, its partitions UNKNOWN_TOPIC_ID, or GROUP_AUTHORIZATION_FAILED
// when the client may not READ the group (asked only when there are unknown ids).
func commitTopicIDs[T, R any](h *Handlers, ctx context.Context, c *protocol.ConnInfo, group string, topics *[]T,
	idName func(*T) ([16]byte, *string), unknown func(t *T, code int16) R, answerID func(*R) (*[16]byte, string)) func(*[]R) {
	img := h.cluster.Image()
	missing := splitByID(img, topics, idName)
	code := kerr.UnknownTopicID.Code
	if len(missing) > 0 && !h.authorize(ctx, c, kmsg.ACLOperationRead, resGroup, group) {
		code = kerr.GroupAuthorizationFailed.Code
	}
	return func(answered *[]R) {
		for i := range *answered {
			id, name := answerID(&(*answered)[i])
			*id = topicID(img, name)
		}
		for i := range missing {
			*answered = append(*answered, unknown(&missing[i], code))
		}
	}
}

// topicID is the id of the named topic in img, zero for none.
func topicID(img *metadata.Image, name string) [16]byte {
	if t := img.Topic(name); t != nil {
		return t.ID
	}
	return [16]byte{}
}

func ptr[T any](v T) *T { return &v }
