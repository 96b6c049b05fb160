package handlers

// CreateTopics (key 19), v2-v7.
//   v1+: validate only; v4: -1 partitions / replication factor mean the defaults;
//   v5+: flexible, and the answer carries partitions, replication factor and
//   configs; v7: topic ids.
// Metadata's auto-creation uses the same controller path. A config with a null
// value fails its topic with INVALID_CONFIG here; the controller checks the rest
// (names, counts, assignments, configs, a name given twice: INVALID_REQUEST).

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) createTopics(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	// A config with a null value fails its topic (INVALID_CONFIG, as Kafka);
	// the other topics go to the controller.
	// A name given twice is the controller's to refuse as a whole.
	refused := make([]error, len(req.Topics))
	reqs := make([]controller.CreateTopic, 0, len(req.Topics))
	named := map[string]int{}
	for _, t := range req.Topics {
		named[t.Topic]++
	}
	for i, t := range req.Topics {
		var nulls []string
		for _, c := range t.Configs {
			if c.Value == nil {
				nulls = append(nulls, c.Name)
			}
		}
		if len(nulls) > 0 && named[t.Topic] == 1 {
			refused[i] = &metadata.KafkaError{Code: kerr.InvalidConfig.Code, Msg: "null value not supported for topic configs: " + strings.Join(nulls, ",")}
			continue
		}
		ct := controller.CreateTopic{
			Name:              t.Topic,
			NumPartitions:     t.NumPartitions,
			ReplicationFactor: t.ReplicationFactor,
			Configs:           map[string]string{},
		}
		for _, a := range t.ReplicaAssignment {
			ct.Assignment = append(ct.Assignment, controller.PartitionReplicas{Partition: a.Partition, Replicas: a.Replicas})
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		reqs = append(reqs, ct)
	}
	results, err := callController(ctx, h, reqs, func(reqs []controller.CreateTopic) ([]controller.CreateTopicResult, error) {
		return h.cluster.CreateTopics(ctx, reqs, req.ValidateOnly)
	})
	next := 0 // the next of results
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rerr := err
		switch {
		case refused[i] != nil:
			rerr = refused[i]
		case err == nil:
			res := results[next]
			next++
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
