package handlers

// CreateTopics (key 19), v2-v7.
//   v1+: validate only; v4: -1 partitions / replication factor mean the defaults;
//   v5+: flexible, and the answer carries partitions, replication factor and
//   configs; v7: topic ids.
// Metadata's auto-creation uses the same controller path.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
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
	reqs := make([]controller.CreateTopic, len(names))
	for i, n := range names {
		reqs[i] = controller.CreateTopic{Name: n, NumPartitions: h.cfg.DefaultPartitions, ReplicationFactor: -1}
	}
	if h.link != nil && !h.cluster.IsLeader() {
		h.autoCreateRemote(ctx, names)
		return
	}
	results, err := h.cluster.CreateTopics(ctx, reqs, false)
	h.awaitLocalApply(ctx)
	if err != nil {
		h.log.Warn("auto-creating topics", "topics", names, "err", err)
		return
	}
	for _, res := range results {
		if res.Err != nil && errorCode(res.Err) != errorCode(metadata.ErrTopicExists) {
			h.log.Warn("auto-creating topic", "topic", res.Name, "err", res.Err)
		} else if res.Err == nil {
			h.log.Info("auto-created topic", "topic", res.Name, "partitions", res.NumPartitions)
		}
	}
}

// autoCreateRemote asks the active controller, another node, to create topics.
func (h *Handlers) autoCreateRemote(ctx context.Context, names []string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = n, h.cfg.DefaultPartitions, -1
		req.Topics = append(req.Topics, t)
	}
	if _, err := h.link.Request(ctx, req); err != nil {
		h.log.Warn("auto-creating topics through the controller", "topics", names, "err", err)
		return
	}
	h.awaitControllerImage(ctx)
}
