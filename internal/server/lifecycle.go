package server

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// lifecycle keeps a node's stop in the order of its start: each component,
// the moment it has started, registers how it stops, and stop runs those steps
// newest first. A start that fails part-way stops exactly what had started, in
// the same order, and a component cannot be stopped before one started after
// it that may still use it.
//
// Stopping has two phases:
//  1. Hand-offs, newest first, within half the shutdown budget: the node still
//     serves while its work moves elsewhere (HTTP consumers leave their
//     groups, leadership moves off the broker). A hand-off that cannot finish
//     (no controller quorum left, say) costs only that half.
//  2. Stops, newest first: listeners drain within the whole budget, and each
//     goroutine is waited for before anything it uses closes.
//
// Start and stop run on one goroutine: a lifecycle is not safe for concurrent
// use.
type lifecycle struct {
	log      *slog.Logger
	handoffs []step
	stops    []step
}

type step struct {
	name string
	run  func(stopping) error
}

// stopping is what a step is given.
type stopping struct {
	// handoff carries half the shutdown budget; drain the whole budget. Both
	// are done at once when the node aborts.
	handoff, drain context.Context
	// graceful is false when the node aborts (a crash as far as the cluster can
	// tell): nothing is handed off.
	graceful bool
	// served: the node had finished starting.
	served bool
}

// onHandoff registers a hand-off of the component that has just started.
func (l *lifecycle) onHandoff(name string, f func(stopping)) {
	l.handoffs = append(l.handoffs, step{name, func(s stopping) error { f(s); return nil }})
	l.log.Debug("lifecycle: hand-off registered", "step", name)
}

// onStop registers the stop of the component that has just started; its error
// is part of the node's Close error.
func (l *lifecycle) onStop(name string, f func(stopping) error) {
	l.stops = append(l.stops, step{name, f})
	l.log.Debug("lifecycle: started", "step", name)
}

// goroutine runs run on a goroutine of its own and registers its stop: stop
// makes run return, and the step then waits until it has.
func (l *lifecycle) goroutine(name string, run func(), stop func(stopping)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	l.onStop(name, func(s stopping) error {
		stop(s)
		<-done
		return nil
	})
}

// stop runs the hand-offs, then the stops, newest first, with budget split as
// the type's doc says. It returns the stops' errors joined. Steps run once: a
// second stop does nothing.
func (l *lifecycle) stop(graceful, served bool, budget time.Duration) error {
	handoff, cancelHandoff := context.WithTimeout(context.Background(), budget/2)
	defer cancelHandoff()
	drain, cancelDrain := context.WithTimeout(context.Background(), budget)
	defer cancelDrain()
	if !graceful {
		cancelHandoff()
		cancelDrain()
	}
	s := stopping{handoff: handoff, drain: drain, graceful: graceful, served: served}
	for i := len(l.handoffs) - 1; i >= 0; i-- {
		l.handoffs[i].run(s)
		l.log.Debug("lifecycle: handed off", "step", l.handoffs[i].name)
	}
	l.handoffs = nil
	cancelHandoff()
	var errs []error
	for i := len(l.stops) - 1; i >= 0; i-- {
		errs = append(errs, l.stops[i].run(s))
		l.log.Debug("lifecycle: stopped", "step", l.stops[i].name)
	}
	l.stops = nil
	return errors.Join(errs...)
}

// goContext is goroutine for a run that returns once its context is done.
func (l *lifecycle) goContext(name string, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.goroutine(name, func() { run(ctx) }, func(stopping) { cancel() })
}
