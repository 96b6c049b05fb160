package handlers

// CreateTopics (key 19), v2-v7.
//   v1+: validate only; v4: -1 partitions / replication factor mean the defaults;
//   v5+: flexible, and the answer carries partitions, replication factor and
//   configs; v7: topic ids.
// Metadata's auto-creation uses the same controller path.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) createTopics(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	reqs := make([]controller.CreateTopic, len(req.Topics))
	for i, t := range req.Topics {
		ct := controller.CreateTopic{
			Name:              t.Topic,
			NumPartitions:     t.NumPartitions,
			ReplicationFactor: t.ReplicationFactor,
			Configs:           map[string]string{},
		}
		for _, a := range t.ReplicaAssignment {
			for len(ct.Assignment) <= int(a.Partition) {
				ct.Assignment = append(ct.Assignment, nil)
			}
			if a.Partition >= 0 {
				ct.Assignment[a.Partition] = a.Replicas
			}
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		reqs[i] = ct
	}
	results, err := h.cluster.CreateTopics(ctx, reqs, req.ValidateOnly)
	h.awaitLocalApply(ctx)
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rerr := err
		if err == nil {
			res := results[i]
			rerr = res.Err
			rt.TopicID = res.ID
			rt.NumPartitions, rt.ReplicationFactor = res.NumPartitions, res.ReplicationFactor
			for _, e := range res.Configs {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				v := e.Value
				c.Name, c.Value, c.Source = e.Name, &v, int8(e.Source)
				rt.Configs = append(rt.Configs, c)
			}
		}
		if rerr != nil {
			rt.ErrorCode = errorCode(rerr)
			msg := rerr.Error()
			rt.ErrorMessage = &msg
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			rt.Configs = nil
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}

// autoCreate creates missing topics with the broker defaults (Metadata with
// auto-creation). Failures are logged: the Metadata answer reports the topic as
// not yet available and the client retries.
func (h *Handlers) autoCreate(ctx context.Context, names []string) {
	topics := make([]kmsg.CreateTopicsRequestTopic, len(names))
	for i, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = n, h.cfg.DefaultPartitions, -1
		topics[i] = t
	}
	h.createOwnTopics(ctx, "auto-created topic", topics)
}

// createOwnTopics creates topics this node needs (auto-created, a
// coordinator's) through the active controller, and waits (briefly) until
// they exist in this node's image and partitions. Failures are logged.
func (h *Handlers) createOwnTopics(ctx context.Context, what string, topics []kmsg.CreateTopicsRequestTopic) {
	results, err := controllerlink.CreateTopics(ctx, h.ctrl, topics)
	if err != nil {
		h.log.Warn("creating topics through the active controller", "what", what, "err", err)
		return
	}
	var exist []string
	for _, res := range results {
		switch err := controllerlink.TopicError(res); {
		case err == nil:
			h.log.Info(what, "topic", res.Topic, "partitions", res.NumPartitions)
		case errors.Is(err, kerr.TopicAlreadyExists):
		default:
			h.log.Warn("creating topic", "what", what, "topic", res.Topic, "err", err)
			continue
		}
		exist = append(exist, res.Topic)
	}
	h.awaitTopics(ctx, exist)
}
