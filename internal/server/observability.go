package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/replica"
)

// readyWait bounds how long /readyz waits for this node's partitions to catch up
// with the metadata image before answering 503.
const readyWait = time.Second

// readiness says why the node should not get client traffic yet, or nil once it
// should: Start has finished (and Close has not begun), a controller leader is
// known, and, on a broker, this broker is registered and unfenced in the
// metadata image and the hosted partitions reflect that image (waiting for that
// until ctx ends).
func (n *Node) readiness(ctx context.Context) error {
	if !n.ready.Load() {
		if step := n.step.Load(); step != nil {
			return errors.New(*step)
		}
		return errors.New("starting or stopping")
	}
	if n.ctrl.LeaderID() < 0 {
		return errors.New("no active controller")
	}
	if !n.cfg.IsBroker() {
		return nil // a controller-only node hosts no partitions
	}
	img := n.ctrl.Image()
	if b := img.Broker(n.cfg.NodeID); b == nil {
		return fmt.Errorf("broker %d is not registered", n.cfg.NodeID)
	} else if b.Fenced {
		return fmt.Errorf("broker %d is fenced", n.cfg.NodeID)
	}
	if err := n.replicas.WaitApplied(ctx, img.Offset()); err != nil {
		return fmt.Errorf("partitions not caught up with metadata offset %d", img.Offset())
	}
	return nil
}

// setStep says what a start under way is doing (/readyz); on a started node
// (a re-registration) it does nothing.
func (n *Node) setStep(format string, args ...any) {
	if n.ready.Load() {
		return
	}
	s := "starting: " + fmt.Sprintf(format, args...)
	n.step.Store(&s)
}

// started marks the node ready: Start has finished.
func (n *Node) started() {
	n.step.Store(nil)
	n.ready.Store(true)
}

// healthMux serves /healthz (the process runs) and /readyz (readiness).
func (n *Node) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		defer cancel()
		if err := n.readiness(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error()+"\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// healthRoutes are the HTTP routes while the node starts or stops: health,
// and 503 with what the node is doing for everything else.
func (n *Node) healthRoutes() http.Handler {
	mux := n.healthMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := "starting or stopping"
		if step := n.step.Load(); step != nil {
			msg = *step
		}
		http.Error(w, "not serving yet: "+msg+"\n", http.StatusServiceUnavailable)
	})
	return mux
}

// switchedRoutes is the HTTP listener's handler: the routes set last. It
// counts the requests under way so that a switch can wait for them.
type switchedRoutes struct {
	h        atomic.Pointer[http.Handler]
	underWay atomic.Int64
}

func (s *switchedRoutes) set(h http.Handler) { s.h.Store(&h) }

// ServeHTTP counts the request before it picks the routes: once wait has
// seen none under way after a set, no request runs on the routes set before.
func (s *switchedRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.underWay.Add(1)
	defer s.underWay.Add(-1)
	(*s.h.Load()).ServeHTTP(w, r)
}

// routesPoll is how often wait looks for the requests under way to end.
const routesPoll = 5 * time.Millisecond

// wait waits until no request is under way, or ctx ends.
func (s *switchedRoutes) wait(ctx context.Context) error {
	for s.underWay.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d HTTP requests still under way: %w", s.underWay.Load(), ctx.Err())
		case <-time.After(routesPoll):
		}
	}
	return nil
}

// startAdmin serves /debug/pprof/ on the opt-in admin listener (--admin-addr).
// It is separate from the HTTP listener so profiling can stay on a private
// address.
func (n *Node) startAdmin() error {
	if n.cfg.AdminAddr == "" {
		return nil
	}
	var err error
	n.adminLn, err = net.Listen("tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	n.lc.onStop("admin listener", func(stopping) error { n.adminLn.Close(); return nil })
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	n.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	n.lc.goroutine("admin server", func() {
		if err := n.admin.Serve(n.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("admin listener stopped", "err", err)
		}
	}, func(s stopping) { n.drained("admin", ignoreClosed(n.admin.Shutdown(s.drain))) })
	n.log.Info("admin listener serving /debug/pprof/", "admin_addr", n.adminLn.Addr().String())
	return nil
}

// ConsoleConfig is the configuration of the node's console: its cluster, replicas
// and groups, for a test or tool that serves the console differently.
func (n *Node) ConsoleConfig() console.Config { return n.console.Config() }

// hostedPartitions lists the node's partitions for the metrics, which are built
// before the replica manager (they wrap its ISR changer).
type hostedPartitions struct{ n *Node }

func (h hostedPartitions) Partitions() []*replica.Partition {
	if h.n.replicas == nil {
		return nil
	}
	return h.n.replicas.Partitions()
}

// nodeGroups is the group coordinator as the metrics' lag source; the metrics are
// built before the coordinator.
type nodeGroups struct{ n *Node }

func (g nodeGroups) Lag(hwm group.HighWatermarkFunc, groups ...string) ([]group.PartitionLag, error) {
	if g.n.groups == nil {
		return nil, nil
	}
	return g.n.groups.Lag(hwm, groups...)
}

// AdminAddr is the admin listener's address, or "" when it is off.
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}
