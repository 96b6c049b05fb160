package handlers

// AlterConfigs (key 33), v0-v2 (v2 flexible): a resource's dynamic configs become
// exactly the given set. IncrementalAlterConfigs (key 44) is the modern form.
// As Kafka's broker does, a broker resource naming another broker's id is
// INVALID_REQUEST where the request arrives (refuseOtherBrokers), and a resource
// that names a key twice or has a null value is INVALID_REQUEST before the
// controller sees the request; the controller refuses a resource named twice
// (INVALID_REQUEST in each place), unknown keys and bad values.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterConfigs(ctx context.Context, ci *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	if refused := h.refuseOtherBrokers(ctx, len(req.Resources), func(i int) (int8, string) {
		return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
	}); refused != nil {
		resp.Resources = answerLocal(req.Resources, refused, func(kept []kmsg.AlterConfigsRequestResource) []kmsg.AlterConfigsResponseResource {
			sub, keptReq := *r, *req
			keptReq.Resources, sub.Msg = kept, &keptReq
			return h.alterConfigs(ctx, ci, &sub).Msg.(*kmsg.AlterConfigsResponse).Resources
		}, func(rr kmsg.AlterConfigsRequestResource, err error) kmsg.AlterConfigsResponseResource {
			res := kmsg.NewAlterConfigsResponseResource()
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
			vals[j] = configValue{c.Name, c.Value, false}
		}
		return int8(rr.ResourceType), rr.ResourceName, vals
	})
	var reqs []controller.AlterConfigsResource
	for i, rr := range req.Resources {
		if refused[i] != nil {
			continue
		}
		cr := controller.AlterConfigsResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName, Configs: map[string]string{}}
		for _, c := range rr.Configs {
			if c.Value != nil {
				cr.Configs[c.Name] = *c.Value
			}
		}
		reqs = append(reqs, cr)
	}
	results, err := callController(ctx, h, reqs, func(reqs []controller.AlterConfigsResource) ([]controller.ConfigResult, error) {
		return h.cluster.AlterConfigs(ctx, reqs, req.ValidateOnly)
	})
	next := 0
	for i, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = configError(err, refused[i], results, &next)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

// localAnswer is a resource of a config change answered where the request
// arrived, not by the controller: err nil for a change done here.
type localAnswer struct{ err error }

// refuseOtherBrokers is the check Kafka's receiving broker makes before it
// forwards a config change: a broker resource names this broker or "" (the
// cluster-wide default); another id is INVALID_REQUEST. A request forwarded by
// another broker was checked there. resource returns the type and name of
// resource i of n; the result holds the refusal of each, or is nil when none
// is refused.
func (h *Handlers) refuseOtherBrokers(ctx context.Context, n int, resource func(i int) (int8, string)) []*localAnswer {
	if ctx.Value(onLinkKey{}) != nil {
		return nil
	}
	var refused []*localAnswer
	for i := range n {
		typ, name := resource(i)
		if metadata.ResourceType(typ) != metadata.ResourceBroker || name == "" {
			continue
		}
		if err := h.checkOwnID(name, alterBrokerNotInt, alterBrokerOther); err != nil {
			if refused == nil {
				refused = make([]*localAnswer, n)
			}
			refused[i] = &localAnswer{err}
		}
	}
	return refused
}

// Kafka 4.4's refusals of a broker resource name that is not this broker's id:
// the format of a name that is not an integer, then of another id (given the
// node id, the name and the parsed id).
const (
	describeBrokerNotInt   = "Broker id must be an integer, but it is: %s"
	describeBrokerOther    = "Unexpected broker id, expected %[1]d or empty string, but received %[2]s"
	describeLoggerOther    = "Unexpected broker id, expected %[1]d but received %[2]s"
	alterBrokerNotInt      = "Node id must be an integer, but it is: %s"
	alterBrokerOther       = "Unexpected broker id, expected %[1]d, but received %[2]s"
	alterLoggerOther       = "Unexpected node id. Expected %[1]d, but received %[3]d"
	describeLoggerNoBroker = "Broker id must not be empty"
)

// checkOwnID refuses a resource name that is not this broker's id, parsed as
// Kafka parses it (a sign and leading zeros allowed: "01" is broker 1), in the
// words notInt and other.
func (h *Handlers) checkOwnID(name, notInt, other string) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: fmt.Sprintf(notInt, name)}
	}
	if int32(id) != h.cfg.NodeID {
		return &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: fmt.Sprintf(other, h.cfg.NodeID, name, id)}
	}
	return nil
}

// localResult is the code and message of a resource answered where the
// request arrived.
func localResult(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return errorCode(err), &msg
}

// answerLocal answers the resources of a config change when some were answered
// where it arrived (local[i] not nil): answer handles the others, if any, and
// each local one is answered in its place by here.
func answerLocal[Req, Resp any](all []Req, local []*localAnswer, answer func([]Req) []Resp, here func(Req, error) Resp) []Resp {
	var kept []Req
	for i, r := range all {
		if local[i] == nil {
			kept = append(kept, r)
		}
	}
	var answered []Resp
	if len(kept) > 0 {
		answered = answer(kept)
	}
	out := make([]Resp, 0, len(all))
	for i, r := range all {
		if local[i] != nil {
			out = append(out, here(r, local[i].err))
			continue
		}
		out, answered = append(out, answered[0]), answered[1:]
	}
	return out
}

// callController sends what is left of a request after the broker's own
// checks to the controller, if anything, and waits (briefly) for the change
// to be applied here.
func callController[R, T any](ctx context.Context, h *Handlers, reqs []R, call func([]R) ([]T, error)) ([]T, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	results, err := call(reqs)
	h.awaitLocalApply(ctx)
	return results, err
}

// configValue is one key of a config change: its value, and whether it is
// deleted (IncrementalAlterConfigs' DELETE, which needs no value).
type configValue struct {
	name   string
	value  *string
	delete bool
}

// refuseMalformedConfigs is what Kafka's broker checks before a config change
// reaches the controller: a resource that names a key twice, or has a null
// value other than a DELETE's, is INVALID_REQUEST. A resource named twice is
// left to the controller, which refuses every place it appears. resource
// returns the type, name and keys of resource i of n; the result holds the
// refusal of each, or nil.
func refuseMalformedConfigs(n int, resource func(i int) (int8, string, []configValue)) []error {
	type key struct {
		typ  int8
		name string
	}
	named := map[key]int{}
	for i := range n {
		typ, name, _ := resource(i)
		named[key{typ, name}]++
	}
	refused := make([]error, n)
	for i := range n {
		typ, name, vals := resource(i)
		if named[key{typ, name}] > 1 {
			continue
		}
		keys := map[string]bool{}
		var nulls []string
		for _, v := range vals {
			if keys[v.name] {
				refused[i] = &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: "Error due to duplicate config keys"}
				break
			}
			keys[v.name] = true
			if v.value == nil && !v.delete {
				nulls = append(nulls, v.name)
			}
		}
		if refused[i] == nil && len(nulls) > 0 {
			refused[i] = &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: "null value not supported for: " + strings.Join(nulls, ", ")}
		}
	}
	return refused
}

// configError is the code and message for a resource of a config change: its
// refusal before the controller, else the controller's failure, else its
// result, the next of results (next moves on).
func configError(err, refused error, results []controller.ConfigResult, next *int) (int16, *string) {
	switch {
	case refused != nil:
		err = refused
	case err == nil:
		err = results[*next].Err
		*next++
	}
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return errorCode(err), &msg
}
