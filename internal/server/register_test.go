package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/wait"
)

// electingVoters are three controller voters as a broker-only node's link
// reaches them before it has joined, by address. Until elected, voter 1 is
// down (connection refused) and the others answer NOT_CONTROLLER; from then
// on voter 3 is the active controller.
type electingVoters struct {
	mu      sync.Mutex
	elected time.Time // zero: no leader yet
	joined  time.Time // when the registration succeeded
}

func (v *electingVoters) RequestTo(_ context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.BrokerRegistrationRequest); !ok {
		return nil, errors.New("electingVoters: only registrations")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	switch {
	case !v.elected.IsZero() && addr == "127.0.0.1:19195":
		resp.BrokerEpoch = 7
		v.joined = time.Now()
	case addr == "127.0.0.1:19193" && v.elected.IsZero():
		return nil, errors.New("dial tcp 127.0.0.1:19193: connect: connection refused")
	default:
		resp.ErrorCode = kerr.NotController.Code
	}
	return resp, nil
}

const waitingMsg = "waiting for the controller quorum to have an active controller before registering: retrying"

// TestBrokerOnlyRegistersOnceQuorumIsUp: a broker-only node started before
// its quorum has a leader registers within registerBackoffMax of the
// election, and says that it waits meanwhile. The code of session 6 asked
// one voter per attempt at back-offs of up to a second, so it needed up to
// three attempts (here 2.55 s of fake time) to find the new leader, and
// logged nothing above debug while it waited.
func TestBrokerOnlyRegistersOnceQuorumIsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		cfg.NodeID, cfg.Roles = 4, "broker"
		cfg.Controllers = "1@127.0.0.1:19193,2@127.0.0.1:19194,3@127.0.0.1:19195"
		cfg.AdvertisedKafkaAddr = "127.0.0.1:19092"
		voters := &electingVoters{}
		logs := &wait.Buffer{}
		n := &Node{cfg: cfg, log: slog.New(slog.NewJSONHandler(logs, nil)), voterLink: voters, clusterID: "c", raftAddr: "127.0.0.1:19196"}
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

// linkVoter serves a controller link on a loopback port that answers every
// BrokerRegistration with epoch, or NOT_CONTROLLER when epoch is 0, and
// counts them.
func linkVoter(t *testing.T, epoch int64, registrations *atomic.Int32) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := controllerlink.NewMux(ln, controllerlink.VoterKey{}, nil)
	srv := &protocol.Server{
		Versions: handlers.LinkVersions(),
		Handler: protocol.HandlerFunc(func(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
			resp := kmsg.NewPtrBrokerRegistrationResponse()
			if _, ok := r.Msg.(*kmsg.BrokerRegistrationRequest); !ok {
				t.Errorf("the voter got a %s", kmsg.NameForKey(r.Key))
			}
			registrations.Add(1)
			if resp.BrokerEpoch = epoch; epoch == 0 {
				resp.ErrorCode = kerr.NotController.Code
			}
			return protocol.Response{Msg: resp}
		}),
		Logger: slog.New(slog.DiscardHandler),
	}
	go srv.Serve(mux.Link())
	t.Cleanup(func() { mux.Close(); srv.Close() })
	return ln.Addr().String()
}

// pausedVoter is a voter whose process is stopped (SIGSTOP): its kernel
// completes TCP handshakes into the listen backlog and takes the bytes sent,
// but nothing ever answers.
func pausedVoter(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestBrokerOnlyRegistersPastAPausedVoter: a broker-only node registers with
// the active controller while another voter is paused, wherever the paused
// voter and the active controller stand in --controllers, without waiting on
// the paused one. The link's own timeout here is an hour: the registration
// can only finish within the test's deadline by not waiting for the paused
// voter's answer. The code of session 7 asked the voters one after another,
// so every attempt that reached the paused voter first waited the link's
// timeout (10 s by default) before asking the next.
func TestBrokerOnlyRegistersPastAPausedVoter(t *testing.T) {
	for _, order := range []string{"PFL", "PLF", "FPL", "LPF", "FLP", "LFP"} {
		t.Run(order, func(t *testing.T) {
			var toLeader, toFollower atomic.Int32
			var voters []string
			for i, kind := range order {
				var addr string
				switch kind {
				case 'P':
					addr = pausedVoter(t)
				case 'F':
					addr = linkVoter(t, 0, &toFollower)
				case 'L':
					addr = linkVoter(t, 7, &toLeader)
				}
				voters = append(voters, fmt.Sprintf("%d@%s", i+1, addr))
			}
			cfg := config.Default()
			cfg.NodeID, cfg.Roles = 4, "broker"
			cfg.Controllers = strings.Join(voters, ",")
			cfg.AdvertisedKafkaAddr = "127.0.0.1:19092"
			n := &Node{cfg: cfg, log: slog.New(slog.DiscardHandler), clusterID: "c", raftAddr: "127.0.0.1:19196"}
			peers, err := cfg.Voters()
			if err != nil {
				t.Fatal(err)
			}
			// As newLink's for a node that has not joined: no leader known,
			// so the voters in turn.
			var next atomic.Uint32
			link := &controllerlink.Client{
				Leader: func() (int32, string, bool) {
					v := peers[int(next.Add(1))%len(peers)]
					return v.ID, v.Addr, true
				},
				Versions: handlers.LinkMaxVersions(),
				Timeout:  time.Hour,
			}
			t.Cleanup(link.Close)
			n.link, n.toController, n.voterLink = link, link, link
			ctx, cancel := context.WithTimeout(context.Background(), wait.DefaultTimeout)
			defer cancel()
			if err := n.register(ctx); err != nil {
				t.Fatalf("registering with voters %s: %v", cfg.Controllers, err)
			}
			if got := n.brokerEpoch.Load(); got != 7 {
				t.Fatalf("broker epoch %d, want the active controller's 7", got)
			}
			if got := toLeader.Load(); got != 1 {
				t.Fatalf("the active controller got %d registrations, want 1", got)
			}
		})
	}
}
