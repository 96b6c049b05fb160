package controllerlink

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// listen listens on a loopback port until the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// silentController accepts connections and reads requests but never answers:
// a controller that lost its network after the connection was made.
func silentController(t *testing.T) string {
	t.Helper()
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRequestWaitRespectsDeadline: a request queued behind one that hangs on
// the same connection gives up at its own deadline, not the other's. (A broker
// heartbeat stuck behind a slower request to a controller that stopped
// answering used to outlive the session the next controller granted.)
func TestRequestWaitRespectsDeadline(t *testing.T) {
	addr := silentController(t)
	c := &Client{
		Leader:   func() (int32, string, bool) { return 1, addr, true },
		Versions: map[int16]int16{kmsg.BrokerHeartbeat.Int16(): 1},
		Timeout:  10 * time.Second,
	}
	t.Cleanup(c.Close) // ends the hung request
	hung := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), kmsg.NewPtrBrokerHeartbeatRequest())
		hung <- err
	}()
	// Wait until the first request holds the connection.
	wait.Within(t, 5*time.Second, "the first request to take the connection", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		lc := c.conns[addr]
		return lc != nil && len(lc.busy) == 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Request(ctx, kmsg.NewPtrBrokerHeartbeatRequest())
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("queued request: %v, want its context's deadline", err)
		}
	case err := <-hung:
		t.Fatalf("the hung request ended first (%v): the test did not queue the second behind it", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the queued request waited past its deadline for the hung one")
	}
}

// TestRequestToGivesUpWhenCancelled: a request to a controller that never
// answers ends as soon as its context is cancelled, not at the link's
// timeout (an hour here), and drops the connection. A broker-only node asks
// every voter at once to register and cancels the others once one answers:
// a paused voter must not keep the request (and its connection) for the
// link's timeout.
func TestRequestToGivesUpWhenCancelled(t *testing.T) {
	addr := silentController(t)
	c := &Client{
		Leader:   func() (int32, string, bool) { return 0, "", false },
		Versions: map[int16]int16{kmsg.BrokerRegistration.Int16(): 4},
		Timeout:  time.Hour,
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.RequestTo(ctx, addr, kmsg.NewPtrBrokerRegistrationRequest())
		done <- err
	}()
	wait.For(t, "the request holds the connection", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		lc := c.conns[addr]
		return lc != nil && len(lc.busy) == 1
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v, want context.Canceled", err)
		}
	case <-time.After(wait.DefaultTimeout):
		t.Fatal("the cancelled request still waits for the controller's answer")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[addr] != nil {
		t.Fatal("the connection of the cancelled request is kept")
	}
}
