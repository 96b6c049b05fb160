package handlers

// IncrementalAlterConfigs (key 44), v0-v1 (v1 flexible): set, delete, append and
// subtract operations on individual keys. Another broker's id, a key twice and
// a null value but for DELETE are INVALID_REQUEST, as for AlterConfigs (33_alter_configs.go).
// Broker logger resources (type 8, kafka-configs --entity-type broker-loggers)
// are changed on the receiving broker, never forwarded: SET gives a logger (root
// or a component) one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL, DELETE returns
// a component to the root's level; as Kafka 4.4 answered, an unknown logger or
// level is INVALID_CONFIG, deleting the root's level INVALID_REQUEST.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/loglevels"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) incrementalAlterConfigs(ctx context.Context, ci *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	local := h.refuseOtherBrokers(ctx, len(req.Resources), func(i int) (int8, string) {
		return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
	})
	local = h.changeBrokerLoggers(ctx, req, local)
	if local != nil {
		resp.Resources = answerLocal(req.Resources, local, func(kept []kmsg.IncrementalAlterConfigsRequestResource) []kmsg.IncrementalAlterConfigsResponseResource {
			sub, keptReq := *r, *req
			keptReq.Resources, sub.Msg = kept, &keptReq
			return h.incrementalAlterConfigs(ctx, ci, &sub).Msg.(*kmsg.IncrementalAlterConfigsResponse).Resources
		}, func(rr kmsg.IncrementalAlterConfigsRequestResource, err error) kmsg.IncrementalAlterConfigsResponseResource {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode, res.ErrorMessage = localResult(err)
			return res
		})
		return reply(resp)
	}
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	refused := refuseMalformedConfigs(len(req.Resources), func(i int) (int8, string, []configValue) {
		rr := req.Resources[i]
		vals := make([]configValue, len(rr.Configs))
		for j, c := range rr.Configs {
			vals[j] = configValue{c.Name, c.Value, c.Op == kmsg.IncrementalAlterConfigOpDelete}
		}
		return int8(rr.ResourceType), rr.ResourceName, vals
	})
	var reqs []controller.IncrementalAlterConfigsResource
	for i, rr := range req.Resources {
		if refused[i] != nil {
			continue
		}
		cr := controller.IncrementalAlterConfigsResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			op := controller.AlterConfigOp{Key: c.Name, Op: controller.ConfigOp(c.Op)}
			if c.Value != nil {
				op.Value = *c.Value
			}
			cr.Ops = append(cr.Ops, op)
		}
		reqs = append(reqs, cr)
	}
	results, err := callController(ctx, h, reqs, func(reqs []controller.IncrementalAlterConfigsResource) ([]controller.ConfigResult, error) {
		return h.cluster.IncrementalAlterConfigs(ctx, reqs, req.ValidateOnly)
	})
	next := 0
	for i, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = configError(err, refused[i], results, &next)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

// changeBrokerLoggers answers the broker logger resources of req (those not
// refused already in local) and returns local with them. A resource's changes
// are all checked before any is made; ValidateOnly makes none. Without levels
// to change (Config.Loggers nil) they are left to the controller, which refuses
// the resource type.
func (h *Handlers) changeBrokerLoggers(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest, local []*localAnswer) []*localAnswer {
	if h.cfg.Loggers == nil || ctx.Value(onLinkKey{}) != nil {
		return local
	}
	for i, rr := range req.Resources {
		if metadata.ResourceType(rr.ResourceType) != metadata.ResourceBrokerLogger || local != nil && local[i] != nil {
			continue
		}
		if local == nil {
			local = make([]*localAnswer, len(req.Resources))
		}
		local[i] = &localAnswer{h.changeLoggers(rr, req.ValidateOnly)}
	}
	return local
}

func (h *Handlers) changeLoggers(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if err := h.checkOwnID(rr.ResourceName, alterBrokerNotInt, alterLoggerOther); err != nil {
		return err
	}
	levels := h.cfg.Loggers
	for _, c := range rr.Configs {
		var err error
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: "null value not supported for: " + c.Name}
			}
			err = levels.Check(c.Name, *c.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			if c.Name == loglevels.Root {
				return &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: "the root logger's level cannot be removed"}
			}
			err = levels.Check(c.Name, "INFO")
		default:
			return &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: fmt.Sprintf("operation %d on broker logger %s: only SET and DELETE", c.Op, c.Name)}
		}
		if err != nil {
			return &metadata.KafkaError{Code: kerr.InvalidConfig.Code, Msg: err.Error()}
		}
	}
	if validateOnly {
		return nil
	}
	for _, c := range rr.Configs {
		if c.Op == kmsg.IncrementalAlterConfigOpSet {
			_ = levels.Set(c.Name, *c.Value) // checked above
		} else {
			_ = levels.Unset(c.Name)
		}
	}
	return nil
}
