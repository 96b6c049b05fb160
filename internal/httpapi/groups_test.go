package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/httpapi"
)

// TestListGroupsWithFailingCoordinator: on a three-broker cluster (kfake) whose
// groups are spread over the brokers, GET /groups answers 200 with the groups
// of the brokers that answered and, in errors, the broker whose ListGroups
// failed, as the console's groups list does; without a failure there is no
// errors field, and when every broker fails the answer is an error. One
// failing broker used to fail the whole list (500, no groups).
func TestListGroupsWithFailingCoordinator(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const none, all = -2, -3
	var failing atomic.Int32 // the broker whose ListGroups fails, or none, or all
	failing.Store(none)
	c.ControlKey(int16(kmsg.ListGroups), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if f := failing.Load(); f != all && f != c.CurrentNode() {
			return nil, nil, false
		}
		resp := kreq.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	for i := range 12 {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, fmt.Sprintf("g%02d", i), o); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byBroker := map[int32][]string{}
	for _, g := range listed.Sorted() {
		byBroker[g.Coordinator] = append(byBroker[g.Coordinator], g.Group)
	}
	if len(byBroker) < 2 {
		t.Fatalf("the groups are coordinated by %d broker(s), the test needs two at least: %v", len(byBroker), byBroker)
	}
	broken := listed.Sorted()[0].Coordinator
	var want []string // the groups of the brokers that answer
	for b, gs := range byBroker {
		if b != broken {
			want = append(want, gs...)
		}
	}
	slices.Sort(want)

	api, err := httpapi.New(httpapi.Config{KafkaAddr: c.ListenAddrs()[0], Cluster: oneTopicImage(t, "t", 1)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		api.Close(context.Background())
	})
	n := &testNode{t: t, base: srv.URL}

	type brokerError struct {
		Broker        int32
		Code, Message string
	}
	var list struct {
		Groups []struct{ Group string }
		Errors []brokerError
	}
	names := func() []string {
		var out []string
		for _, g := range list.Groups {
			out = append(out, g.Group)
		}
		return out
	}

	r := n.must(http.StatusOK, "GET", "/groups", nil)
	r.json(t, &list)
	if len(list.Groups) != len(listed) || bytes.Contains(r.body, []byte(`"errors"`)) {
		t.Fatalf("every broker answering: %s", r.body)
	}

	failing.Store(broken)
	list.Groups, list.Errors = nil, nil
	r = n.must(http.StatusOK, "GET", "/groups", nil)
	r.json(t, &list)
	if !slices.Equal(names(), want) {
		t.Errorf("with broker %d failing, listed %v, want %v (the groups of the others)", broken, names(), want)
	}
	if len(list.Errors) != 1 || list.Errors[0].Broker != broken || list.Errors[0].Code != kerr.UnknownServerError.Message || list.Errors[0].Message == "" {
		t.Errorf("with broker %d failing, errors %+v, want that broker's UNKNOWN_SERVER_ERROR", broken, list.Errors)
	}

	// Every broker failing is the brokers' fault: a 500, which the document
	// leaves out, as for every route, so the exchange is not checked against it.
	failing.Store(all)
	resp, err := http.Get(srv.URL + "/groups")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error struct{ Code string } }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusInternalServerError ||
		e.Error.Code != kerr.UnknownServerError.Message {
		t.Errorf("with every broker failing: %d %+v (%v), want 500 %s", resp.StatusCode, e, err, kerr.UnknownServerError.Message)
	}
}
