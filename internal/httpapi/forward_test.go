package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/wait"
)

// TestLookupFailureNotServedHere: a request about a consumer instance that this
// node does not hold, when the group's members cannot be listed, answers 503
// CONSUMER_LOOKUP_FAILED with Retry-After instead of serving it here (which
// would make a second member of the same consumer); the retry is forwarded to
// the node that holds it. Node A is the shared node's API; node B is a second
// API on the same broker whose member lookups fail once per step.
func TestLookupFailureNotServedHere(t *testing.T) {
	a := sharedNode(t)
	srv := httptest.NewUnstartedServer(nil)
	api, err := httpapi.New(httpapi.Config{KafkaAddr: a.KafkaAddr(), AdvertisedAddr: srv.Listener.Addr().String(), Cluster: a.ConsoleConfig().Cluster})
	if err != nil {
		t.Fatal(err)
	}
	failNext := api.FailMemberLookups(kerr.CoordinatorNotAvailable)
	mux := http.NewServeMux()
	api.Register(mux)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		api.Close(context.Background())
	})
	b := &testNode{Node: a.Node, t: t, base: srv.URL}

	const topic = "lookup-fail"
	a.createTopic(topic, 1)
	a.produceN(topic, 0, 0, 1)
	member := map[string]any{"group": "lookup-group", "topic": topic, "consumer": "c", "timeout_ms": 200}
	a.must(http.StatusOK, "POST", "/poll", member)
	a.must(http.StatusOK, "POST", "/groups/lookup-share/configs", map[string]any{"configs": map[string]string{"share.auto.offset.reset": "earliest"}})
	share := map[string]any{"group": "lookup-share", "topic": topic, "consumer": "s", "share": true, "timeout_ms": 200}
	var acquired sharePolled
	wait.For(t, "the share member on A to acquire the record", func() bool {
		a.must(http.StatusOK, "POST", "/poll", share).json(t, &acquired)
		return len(acquired.Records) == 1
	})

	steps := []struct {
		name, method, path string
		body               any
	}{
		{"poll", "POST", "/poll", member},
		{"commit", "POST", "/commit", map[string]any{"group": "lookup-group", "consumer": "c"}},
		{"share poll", "POST", "/poll", share},
		{"ack", "POST", "/ack", map[string]any{"group": "lookup-share", "consumer": "s", "topic": topic, "partition": 0, "offset": acquired.Records[0].Offset, "result": "accept"}},
		{"close", "DELETE", "/groups/lookup-group/consumers/c", nil},
	}
	for _, s := range steps {
		if s.name == "close" {
			if g := a.group("lookup-group"); len(g.Members) != 1 {
				t.Fatalf("group lookup-group has %d members, want the one consumer on A: %+v", len(g.Members), g.Members)
			}
		}
		failNext(1)
		r := b.do(s.method, s.path, s.body)
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "CONSUMER_LOOKUP_FAILED" || r.header.Get("Retry-After") != "1" {
			t.Fatalf("%s via B with the lookup failing: %d Retry-After %q: %s", s.name, r.status, r.header.Get("Retry-After"), r.body)
		}
		r = b.must(http.StatusOK, s.method, s.path, s.body)
		if got := r.header.Get("Strata-Consumer-Node"); s.name != "close" && got != a.HTTPAddr() {
			t.Fatalf("%s via B: served by %q, want A's %q", s.name, got, a.HTTPAddr())
		}
	}
	if g := a.group("lookup-group"); len(g.Members) != 0 {
		t.Fatalf("members left after closing the one consumer: %+v", g.Members)
	}
}
