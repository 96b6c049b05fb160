package chaos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// shareNode is an HTTP node for the share consumers' tests: its /poll hands out
// one record at a time, its /ack and /poll answer the statuses the test sets,
// and it records the requests it gets.
type shareNode struct {
	srv *httptest.Server

	mu         sync.Mutex
	pollStatus int
	ackStatus  int
	reqs       []string // "POST /poll share-0-0", "DELETE share-0-0", ...
}

func newShareNode(t *testing.T, pollStatus, ackStatus int) *shareNode {
	n := &shareNode{pollStatus: pollStatus, ackStatus: ackStatus}
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *shareNode) addr() string { return strings.TrimPrefix(n.srv.URL, "http://") }

func (n *shareNode) serve(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var body struct {
		Consumer string `json:"consumer"`
	}
	if r.Method == "DELETE" {
		body.Consumer = r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	} else {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	n.reqs = append(n.reqs, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, body.Consumer))
	switch {
	case r.Method == "DELETE":
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/poll" && n.pollStatus != http.StatusOK:
		w.WriteHeader(n.pollStatus)
	case r.URL.Path == "/poll":
		// An accepted record (shareAction of "v-accept" is accept).
		fmt.Fprintf(w, `{"records":[{"partition":0,"offset":%d,"value_b64":%q,"delivery_count":1}]}`,
			len(n.reqs), base64.StdEncoding.EncodeToString([]byte("v-accept")))
	default:
		w.WriteHeader(n.ackStatus)
	}
}

func (n *shareNode) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.reqs...)
}

// TestShareConsumerKeepsOrClosesItsMember: a share consumer whose /ack is
// answered with an error (a state save that timed out: 504) goes on polling
// as the same member; one whose node fails its poll closes that member (DELETE)
// before it polls the next node as a new one. A consumer used to give up its
// member on the 504 too and never closed it: the member stayed in the group,
// holding its partitions unpolled until its instance expired 45 s later
// (the in-process power-loss run's stall of partition 1).
func TestShareConsumerKeepsOrClosesItsMember(t *testing.T) {
	if shareAction("v-accept", 1) != "accept" {
		t.Fatal(`the test's value is not accepted: pick another`)
	}
	for _, tc := range []struct {
		name                  string
		pollStatus, ackStatus int
		// want is what the first node sees, then the second ("" : nothing).
		want, wantNext string
	}{
		{"ack answered 504", http.StatusOK, http.StatusGatewayTimeout,
			"POST /poll share-0-0,POST /ack share-0-0,POST /poll share-0-0", ""},
		{"poll failed", http.StatusInternalServerError, http.StatusOK,
			"POST /poll share-0-0,DELETE /groups/g/consumers/share-0-0 share-0-0", "POST /poll share-0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newShareNode(t, tc.pollStatus, tc.ackStatus), newShareNode(t, http.StatusOK, http.StatusOK)
			w := &shareWorkload{addrs: []string{a.addr(), b.addr()}, topic: "t", group: "g",
				hc: &http.Client{Timeout: 5 * time.Second}, logf: t.Logf}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.consume(ctx, 0)
			}()
			prefix := func(reqs []string, n int) string { return strings.Join(reqs[:min(n, len(reqs))], ",") }
			if err := waitFor(10*time.Second, func() error {
				wantA := strings.Split(tc.want, ",")
				if got := prefix(a.requests(), len(wantA)); got != tc.want {
					return fmt.Errorf("first node got %q, want %q", got, tc.want)
				}
				if tc.wantNext == "" {
					return nil
				}
				if got := prefix(b.requests(), 1); got != tc.wantNext {
					return fmt.Errorf("second node got %q, want %q first", got, tc.wantNext)
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
			cancel()
			<-done
			if tc.wantNext == "" {
				if reqs := b.requests(); len(reqs) > 0 {
					t.Errorf("the consumer moved to the second node: %d requests, the first %q", len(reqs), reqs[0])
				}
			}
		})
	}
}
