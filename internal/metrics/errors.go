package metrics

import (
	"context"
	"reflect"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// InstrumentHandler wraps the Kafka handler so every response's error codes are
// counted in strata_request_errors_total. A deferred response (Response.Wait) is
// counted when it completes; a pre-encoded Body is counted when it offers the
// message it encodes through a Msg() kmsg.Response method (Fetch does).
// ApiVersions is answered by the protocol package and is not counted.
func (m *Metrics) InstrumentHandler(h protocol.Handler) protocol.Handler {
	return &instrumented{m: m, next: h}
}

type instrumented struct {
	m    *Metrics
	next protocol.Handler
}

// encodedMsg is the optional interface of a Body that can show its message.
type encodedMsg interface{ Msg() kmsg.Response }

func (i *instrumented) Handle(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	resp := i.next.Handle(ctx, c, r)
	i.count(r.Key, &resp)
	return resp
}

func (i *instrumented) count(key int16, resp *protocol.Response) {
	switch {
	case resp.Msg != nil:
		i.m.countErrors(key, resp.Msg)
	case resp.Body != nil:
		if b, ok := resp.Body.(encodedMsg); ok {
			i.m.countErrors(key, b.Msg())
		}
	case resp.Wait != nil:
		wait := resp.Wait
		resp.Wait = func(ctx context.Context) protocol.Response {
			out := wait(ctx)
			i.count(key, &out)
			return out
		}
	}
}

// countErrors adds every non-zero error code in msg to the error counter.
func (m *Metrics) countErrors(key int16, msg kmsg.Response) {
	if msg == nil {
		return
	}
	name := ""
	forEachErrorCode(msg, func(code int16) {
		if name == "" {
			name = kmsg.NameForKey(key)
		}
		m.net.requestErrors.WithLabelValues(name, errorName(code)).Inc()
	})
}

// errorName is Kafka's name for an error code, e.g. NOT_LEADER_OR_FOLLOWER.
func errorName(code int16) string {
	if err := kerr.TypedErrorForCode(code); err != nil && err.Code == code {
		return err.Message
	}
	return "UNKNOWN_CODE_" + strconv.Itoa(int(code))
}

// forEachErrorCode calls fn with each non-zero int16 field named ErrorCode in msg
// and in the structs, slices and pointers it holds. kmsg has no generic way to
// list a response's errors and new API keys keep arriving, so the walk is found
// by reflection once per response type and cached; a walk only follows fields
// that can lead to an ErrorCode (never record bytes).
func forEachErrorCode(msg kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(msg)
	if w := walkerFor(v.Type()); w != nil {
		w(v, fn)
	}
}

type walker func(v reflect.Value, fn func(int16))

var walkers sync.Map // reflect.Type -> walker (a nil walker: no error codes)

func walkerFor(t reflect.Type) walker {
	if w, ok := walkers.Load(t); ok {
		return w.(walker)
	}
	w := buildWalker(t, map[reflect.Type]bool{})
	walkers.Store(t, w)
	return w
}

// buildWalker returns the walk for values of type t, or nil when t holds no error
// code. visiting guards against recursive types.
func buildWalker(t reflect.Type, visiting map[reflect.Type]bool) walker {
	if visiting[t] {
		return nil
	}
	visiting[t] = true
	defer delete(visiting, t)
	switch t.Kind() {
	case reflect.Pointer:
		elem := buildWalker(t.Elem(), visiting)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value, fn func(int16)) {
			if !v.IsNil() {
				elem(v.Elem(), fn)
			}
		}
	case reflect.Slice:
		elem := buildWalker(t.Elem(), visiting)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value, fn func(int16)) {
			for i := range v.Len() {
				elem(v.Index(i), fn)
			}
		}
	case reflect.Struct:
		type step struct {
			field int
			code  bool
			walk  walker
		}
		var steps []step
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				steps = append(steps, step{field: i, code: true})
			} else if w := buildWalker(f.Type, visiting); w != nil {
				steps = append(steps, step{field: i, walk: w})
			}
		}
		if len(steps) == 0 {
			return nil
		}
		return func(v reflect.Value, fn func(int16)) {
			for _, s := range steps {
				f := v.Field(s.field)
				if !s.code {
					s.walk(f, fn)
				} else if c := int16(f.Int()); c != 0 {
					fn(c)
				}
			}
		}
	}
	return nil
}
