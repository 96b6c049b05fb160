package httpapi

import (
	"context"
	"sync/atomic"
)

// Routes lists every endpoint as "METHOD pattern", for the OpenAPI test.
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.method + " " + rt.pattern
	}
	return out
}

// FailMemberLookups makes lookups of a group's members (to find the node holding
// a consumer instance) fail with err: failNext(n) makes the next n fail. Call it
// before the API serves.
func (a *API) FailMemberLookups(err error) (failNext func(n int)) {
	next := a.members
	var left atomic.Int64
	a.members = func(ctx context.Context, group string, share bool) ([]string, error) {
		for {
			n := left.Load()
			if n <= 0 {
				return next(ctx, group, share)
			}
			if left.CompareAndSwap(n, n-1) {
				return nil, err
			}
		}
	}
	return func(n int) { left.Add(int64(n)) }
}
