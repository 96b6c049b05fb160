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
	if resp.Wait != nil && resp.Msg == nil && resp.Body == nil {
		wait := resp.Wait
		resp.Wait = func(ctx context.Context) protocol.Response {
			out := wait(ctx)
			i.m.countAnswer(key, out.Msg, out.Body)
			return out
		}
		return
	}
	i.m.countAnswer(key, resp.Msg, resp.Body)
}

// countAnswer counts the error codes of a response's Msg or Body.
func (m *Metrics) countAnswer(key int16, msg kmsg.Response, body protocol.Body) {
	switch {
	case msg != nil:
		m.countErrors(key, msg)
	case body != nil:
		if b, ok := body.(encodedMsg); ok {
			m.countErrors(key, b.Msg())
		}
	}
}

// countErrors adds every non-zero error code in msg to the error counter.
func (m *Metrics) countErrors(key int16, msg kmsg.Response) {
	if msg == nil {
		return
	}
	s := errorSinks.Get().(*errorSink)
	s.m, s.key, s.name = m, key, ""
	forEachErrorCode(msg, s.add)
	s.m = nil
	errorSinks.Put(s)
}

// errorSink counts the error codes of one response. Sinks are pooled with
// their add method value bound once: a closure per response was two
// allocations on every request.
type errorSink struct {
	m    *Metrics
	key  int16
	name string // the API's name, looked up at the first error
	add  func(code int16)
}

var errorSinks = sync.Pool{New: func() any {
	s := &errorSink{}
	s.add = func(code int16) {
		if s.name == "" {
			s.name = kmsg.NameForKey(s.key)
		}
		s.m.net.requestErrors.WithLabelValues(s.name, errorName(code)).Inc()
	}
	return s
}}

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
