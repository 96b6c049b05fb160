package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// changingController answers CreateTopics with NOT_CONTROLLER, then with no
// controller reachable, then creates the topic in its image: the active
// controller changing while the console's form is sent.
type changingController struct {
	mu    sync.Mutex
	calls int
	img   atomic.Pointer[metadata.Image]
}

func (c *changingController) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	ct := req.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = ct.Topics[0].Topic
	switch c.calls {
	case 1:
		rt.ErrorCode = kerr.NotController.Code
	case 2:
		return nil, errors.New("no active controller")
	default:
		img, err := metadata.ApplyAll(c.img.Load(), []metadata.Record{&metadata.TopicRecord{Name: rt.Topic, ID: metadata.UUID{9}}})
		if err != nil {
			return nil, err
		}
		c.img.Store(img.WithOffset(2))
		rt.NumPartitions = 1
	}
	resp.Topics = append(resp.Topics, rt)
	return resp, nil
}

func (c *changingController) Image() *metadata.Image { return c.img.Load() }
func (c *changingController) LeaderID() int32        { return 1 }

type appliedReplicas struct{}

func (appliedReplicas) Partition(string, int32) (*replica.Partition, error) {
	return nil, replica.ErrUnknownPartition
}
func (appliedReplicas) WaitApplied(context.Context, uint64) error { return nil }

// TestCreateTopicRetriedWhileTheControllerChanges: the console's topic form
// is sent again while the active controller changes (an answer of
// NOT_CONTROLLER, no controller reachable), as a forwarded Kafka request is,
// and the topic is created. The old code answered 503 at the first
// NOT_CONTROLLER.
func TestCreateTopicRetriedWhileTheControllerChanges(t *testing.T) {
	ctrl := &changingController{}
	ctrl.img.Store(metadata.NewImage().WithOffset(1))
	c := console.New(console.Config{NodeID: 1, Cluster: ctrl, Controller: ctrl, Replicas: appliedReplicas{}, Logger: testLogger()})
	form := url.Values{"name": {"orders"}, "partitions": {"1"}, "replication_factor": {"1"}}
	req := httptest.NewRequest(http.MethodPost, "/console/topics", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || ctrl.calls != 3 {
		t.Fatalf("answered %d after %d requests to the controller, want %d after 3:\n%s", rec.Code, ctrl.calls, http.StatusSeeOther, rec.Body)
	}
	if loc := rec.Header().Get("Location"); loc != "/console/topics/orders?created=1" {
		t.Fatalf("redirected to %q", loc)
	}
}
