package protocol

import "time"

// A Hook observes the server for metrics. It is any value implementing one or more
// of ConnOpenHook, ConnCloseHook, RequestHook and ResponseHook; the server calls
// the methods it implements. Hooks run on connection goroutines, concurrently for
// different connections: keep them quick and safe for concurrent use.
type Hook any

// ConnOpenHook is called once a connection is accepted.
type ConnOpenHook interface {
	OnConnOpen(c *ConnInfo)
}

// ConnCloseHook is called once per connection after all its goroutines finished.
// err is nil when the client closed cleanly between requests or the server shut
// down gracefully; otherwise it wraps one of this package's errors or an I/O error.
type ConnCloseHook interface {
	OnConnClose(c *ConnInfo, err error)
}

// RequestHook is called on the reader goroutine after a request was decoded,
// before it is queued for handling.
type RequestHook interface {
	OnRequest(c *ConnInfo, r *Request)
}

// ResponseHook is called once per request that was handled: after its response
// was written (or failed to be), or right after handling when the response is
// None. Responses dropped because the connection had closed are not reported.
type ResponseHook interface {
	OnResponse(c *ConnInfo, r *Request, e ResponseEvent)
}

// ResponseEvent measures one request.
type ResponseEvent struct {
	QueueWait time.Duration // from Request.Received to the start of handling
	Handling  time.Duration // the Handle call (or the ApiVersions answer)
	Total     time.Duration // from Request.Received to the response being written
	Bytes     int           // response bytes including the size prefix; 0 for None
	None      bool          // nothing was sent (Response.None)
	Err       error         // non-nil when writing failed; the connection closes
}

// hookSet holds the hooks split by the interfaces they implement.
type hookSet struct {
	open     []ConnOpenHook
	close    []ConnCloseHook
	request  []RequestHook
	response []ResponseHook
}

func newHookSet(hooks []Hook) hookSet {
	var hs hookSet
	for _, h := range hooks {
		if x, ok := h.(ConnOpenHook); ok {
			hs.open = append(hs.open, x)
		}
		if x, ok := h.(ConnCloseHook); ok {
			hs.close = append(hs.close, x)
		}
		if x, ok := h.(RequestHook); ok {
			hs.request = append(hs.request, x)
		}
		if x, ok := h.(ResponseHook); ok {
			hs.response = append(hs.response, x)
		}
	}
	return hs
}
