package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// failoverLink is the path to the active controller through a failover: the
// old controller leads and answers until it is cut off; from then on a
// request to it hangs until its caller gives up or the link's 10 s timeout
// ends it. Once the new controller is elected, requests reach it and it notes
// when each heartbeat arrived.
type failoverLink struct {
	mu      sync.Mutex
	cut     bool      // the old controller stopped answering
	elected time.Time // when the new controller took over; zero before
	hanging int       // requests waiting on the cut-off controller
	heard   []time.Time
}

const linkTimeout = 10 * time.Second // controllerlink.Client's default

func (l *failoverLink) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.BrokerHeartbeatRequest); !ok {
		return nil, errors.New("failoverLink: only heartbeats")
	}
	l.mu.Lock()
	if !l.elected.IsZero() {
		l.heard = append(l.heard, time.Now())
		l.mu.Unlock()
		return kmsg.NewPtrBrokerHeartbeatResponse(), nil
	}
	if !l.cut {
		l.mu.Unlock()
		return kmsg.NewPtrBrokerHeartbeatResponse(), nil
	}
	l.hanging++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.hanging--
		l.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(linkTimeout):
		return nil, errors.New("failoverLink: i/o timeout")
	}
}

// observerController is a node's controller that only supplies the metadata
// offset a heartbeat reports: an observer that never joins, started outside
// any synctest bubble.
func observerController(t *testing.T) *controller.Controller {
	t.Helper()
	_, tr := raft.NewInmemTransport("")
	ctrl, err := controller.Start(controller.Config{
		NodeID: 1, DataDir: "/metadata", FS: vfs.NewMem(), Observer: true, Transport: tr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	return ctrl
}

// startHeartbeats runs n's heartbeats until the returned function stops them.
func startHeartbeats(n *Node) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.runHeartbeats(ctx)
	}()
	return func() { cancel(); <-done }
}

// TestHeartbeatReachesNewControllerInTime (finding 6 of docs/reliability.md): a
// heartbeat stuck on a controller that was cut off must not keep the broker
// from reaching the next one within the session it grants on taking over
// (one session timeout from its election). The old heartbeat waited for the
// link's 10 s timeout, longer than the default 9 s session: the new
// controller heard nothing in time and fenced every broker. Now a heartbeat
// gives up after half the session timeout.
func TestHeartbeatReachesNewControllerInTime(t *testing.T) {
	ctrl := observerController(t)

	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		link := &failoverLink{}
		n := &Node{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ctrl: ctrl, toController: link}
		n.brokerEpoch.Store(1)
		defer startHeartbeats(n)()

		time.Sleep(3 * cfg.BrokerHeartbeatInterval)
		link.mu.Lock()
		link.cut = true
		link.mu.Unlock()
		// The next heartbeat goes out to the cut-off controller and hangs.
		time.Sleep(cfg.BrokerHeartbeatInterval + time.Millisecond)
		synctest.Wait()
		link.mu.Lock()
		if link.hanging != 1 {
			link.mu.Unlock()
			t.Fatalf("%d heartbeats hang on the cut-off controller, want 1", link.hanging)
		}
		link.elected = time.Now()
		link.mu.Unlock()

		time.Sleep(3 * cfg.BrokerSessionTimeout)
		link.mu.Lock()
		defer link.mu.Unlock()
		if len(link.heard) == 0 {
			t.Fatal("the new controller never heard a heartbeat")
		}
		last := link.elected
		for _, at := range link.heard {
			if gap := at.Sub(last); gap > cfg.BrokerSessionTimeout {
				t.Fatalf("the new controller heard nothing for %v (from %v after its election), more than the %v session it grants: it fences the broker",
					gap, last.Sub(link.elected), cfg.BrokerSessionTimeout)
			}
			last = at
		}
	})
}

// fencedLink answers heartbeats fenced until unfenced is set.
type fencedLink struct {
	mu       sync.Mutex
	unfenced bool
}

func (l *fencedLink) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.BrokerHeartbeatRequest); !ok {
		return nil, errors.New("fencedLink: only heartbeats")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.IsFenced = !l.unfenced
	return resp, nil
}

// TestHeartbeatWarnsWhileFenced: a broker the controller keeps fenced says so
// in its log at warning level once that has lasted a session timeout, again
// every heartbeatWarnInterval, and says when it is unfenced (finding 24 of
// docs/reliability.md: a broker stayed fenced for 90 s with nothing in its log).
func TestHeartbeatWarnsWhileFenced(t *testing.T) {
	ctrl := observerController(t)

	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		logs := &wait.Buffer{}
		link := &fencedLink{}
		n := &Node{cfg: cfg, log: slog.New(slog.NewJSONHandler(logs, nil)), ctrl: ctrl, toController: link}
		n.brokerEpoch.Store(7)
		defer startHeartbeats(n)()

		warnings := func() []map[string]any {
			return logLines(t, logs, map[string]any{"msg": "broker still fenced: the controller has not unfenced it"})
		}
		// Heartbeats go out every interval from one interval in; the checks
		// fall half an interval between them. The heartbeat one session
		// timeout after the first is the last one not to warn.
		tick := cfg.BrokerHeartbeatInterval
		time.Sleep(cfg.BrokerSessionTimeout + tick + tick/2)
		if w := warnings(); len(w) != 0 {
			t.Fatalf("warned within the session timeout: %v", w)
		}
		time.Sleep(tick)
		if w := warnings(); len(w) != 1 || w[0]["level"] != "WARN" || w[0]["broker_epoch"] != float64(7) || w[0]["metadata_last_heard"] != "0001-01-01T00:00:00Z" {
			t.Fatalf("after a session timeout fenced: %v, want one warning with broker epoch 7, never having heard from a metadata leader", w)
		}
		time.Sleep(heartbeatWarnInterval)
		if w := warnings(); len(w) != 2 {
			t.Fatalf("%d warnings after another %v, want 2", len(w), heartbeatWarnInterval)
		}
		link.mu.Lock()
		link.unfenced = true
		link.mu.Unlock()
		time.Sleep(tick)
		if back := logLines(t, logs, map[string]any{"msg": "broker heartbeats answered unfenced again"}); len(back) != 1 {
			t.Fatalf("unfenced: %v, want one line saying so", back)
		}
		if w := warnings(); len(w) != 2 {
			t.Fatalf("%d warnings once unfenced, want still 2", len(w))
		}
	})
}
