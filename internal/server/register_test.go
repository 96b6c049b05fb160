package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/wait"
)

// electingVoters are three controller voters as a broker-only node's link
// reaches them before it has joined: one voter per request, in turn. Until
// elected, voter 1 is down (connection refused) and the others answer
// NOT_CONTROLLER; from then on voter 3 is the active controller.
type electingVoters struct {
	mu      sync.Mutex
	calls   int
	elected time.Time // zero: no leader yet
	joined  time.Time // when the registration succeeded
}

func (v *electingVoters) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.BrokerRegistrationRequest); !ok {
		return nil, errors.New("electingVoters: only registrations")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	voter := v.calls%3 + 1
	v.calls++
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	switch {
	case !v.elected.IsZero() && voter == 3:
		resp.BrokerEpoch = 7
		v.joined = time.Now()
	case voter == 1 && v.elected.IsZero():
		return nil, errors.New("dial tcp 127.0.0.1:19193: connect: connection refused")
	default:
		resp.ErrorCode = kerr.NotController.Code
	}
	return resp, nil
}

const waitingMsg = "waiting for the controller quorum to have an active controller before registering: retrying"

// TestBrokerOnlyRegistersOnceQuorumIsUp: a broker-only node started before
// its quorum has a leader registers within registerBackoffMax of the
// election, and says that it waits meanwhile. The old code asked one voter
// per attempt at back-offs of up to a second, so it needed up to three
// attempts (here 2.55 s of fake time) to find the new leader, and logged
// nothing above debug while it waited.
func TestBrokerOnlyRegistersOnceQuorumIsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		cfg.NodeID, cfg.Roles = 4, "broker"
		cfg.Controllers = "1@127.0.0.1:19193,2@127.0.0.1:19194,3@127.0.0.1:19195"
		cfg.AdvertisedKafkaAddr = "127.0.0.1:19092"
		voters := &electingVoters{}
		logs := &wait.Buffer{}
		n := &Node{cfg: cfg, log: slog.New(slog.NewJSONHandler(logs, nil)), toController: voters, clusterID: "c", raftAddr: "127.0.0.1:19196"}
		registered := make(chan error, 1)
		go func() { registered <- n.register(context.Background()) }()

		const electedAt = 5 * time.Second
		time.Sleep(electedAt)
		synctest.Wait()
		if waits := logLines(t, logs, map[string]any{"msg": waitingMsg}); len(waits) != 1 {
			t.Fatalf("%d lines say the node waits for the quorum after %v, want 1", len(waits), electedAt)
		}
		start := time.Now()
		voters.mu.Lock()
		voters.elected = start
		voters.mu.Unlock()
		if err := <-registered; err != nil {
			t.Fatal(err)
		}
		if took := voters.joined.Sub(start); took > registerBackoffMax {
			t.Fatalf("registered %v after the election, want within %v", took, registerBackoffMax)
		}
		if n.brokerEpoch.Load() != 7 {
			t.Fatalf("broker epoch %d, want 7", n.brokerEpoch.Load())
		}
		if len(logLines(t, logs, map[string]any{"msg": "broker registered"})) != 1 {
			t.Fatal("the registration is not logged")
		}
	})
}
