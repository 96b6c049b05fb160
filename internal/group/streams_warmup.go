package group

import (
	"maps"
	"math"
	"slices"
)

// This file refines a streams group's target (the assignor's, streams_assignor.go)
// into the intermediate assignment the members reconcile towards: warm-up tasks
// (KIP-1071). Kafka 4.4 has the place for this (its AssignmentRefiner, whose
// 4.4.0 implementation returns the target unchanged) and the configs; the rules
// here are the ones its refiner's contract describes.
//
// A stateful active task the target moves to another process than the one
// running it would stall while its new owner restores the state from the
// changelog. Instead it stays where it runs, and its new owner gets a warm-up
// task: a standby in all but name, restoring the state in the background. A
// task moves only once its new process has caught up: a member of that process
// reported, in its heartbeat's TaskOffsets and TaskEndOffsets, a lag of at most
// streams.acceptable.recovery.lag for it. At most streams.num.warmup.replicas
// warm-up tasks run in the group at a time; warm-ups already running keep their
// place first. A process that already holds the task as a standby restores it
// there and needs no warm-up. Stateless tasks, tasks nobody runs and tasks
// moving within a process move at once.
//
// The intermediate assignment is derived, never stored: the group's records
// hold the assignor's target and each member's current tasks (warm-ups
// included), and a coordinator that loads them derives it again. Each
// refinement is a group epoch of its own: a heartbeat whose offsets show a
// pending move caught up starts one.

// streamsRefineMember is one member as the refiner sees it.
type streamsRefineMember struct {
	id, process string
	// standby and warmup are the standby and warm-up tasks it holds now.
	standby, warmup partSet
	// offsets and endOffsets are the task offset sums it last reported.
	offsets, endOffsets map[topicPartition]int64
}

// streamsRefineSpec is the refiner's input.
type streamsRefineSpec struct {
	members         []streamsRefineMember // sorted by id
	active, standby map[string]partSet    // the assignor's target
	owners          map[topicPartition]string
	stateful        map[string]bool
	warmups         int   // streams.num.warmup.replicas; 0: no warm-ups
	recoveryLag     int64 // streams.acceptable.recovery.lag
}

// streamsRefined is an intermediate assignment.
type streamsRefined struct {
	active, standby, warmup map[string]partSet
	// pending is how many tasks wait for their new process to catch up.
	pending int
}

// latestOffset is the offset sum Kafka Streams reports for a task it runs as
// active (Task.LATEST_OFFSET): caught up by definition.
const latestOffset = -2

// caughtUp reports whether m's reported offsets put tp within lag of its end.
func (m *streamsRefineMember) caughtUp(tp topicPartition, lag int64) bool {
	off, ok := m.offsets[tp]
	if !ok {
		return false
	}
	if off == latestOffset {
		return true
	}
	end, ok := m.endOffsets[tp]
	// Kafka Streams sends Long.MAX_VALUE for an offset it does not know.
	return ok && off >= 0 && end >= 0 && off != math.MaxInt64 && end != math.MaxInt64 && end-off <= lag
}

// refineStreamsTarget derives the intermediate assignment from the target.
func refineStreamsTarget(spec streamsRefineSpec) streamsRefined {
	out := streamsRefined{active: map[string]partSet{}, standby: map[string]partSet{}, warmup: map[string]partSet{}}
	byID := map[string]*streamsRefineMember{}
	procMembers := map[string][]*streamsRefineMember{}
	for i := range spec.members {
		m := &spec.members[i]
		byID[m.id] = m
		procMembers[m.process] = append(procMembers[m.process], m)
		out.active[m.id], out.standby[m.id], out.warmup[m.id] = spec.active[m.id].clone(), spec.standby[m.id].clone(), partSet{}
	}
	if spec.warmups <= 0 {
		return out
	}
	type move struct {
		tp       topicPartition
		from, to *streamsRefineMember
		warming  bool // to's process holds a warm-up of tp now
	}
	var moves []move
	for _, m := range spec.members {
		for _, tp := range spec.active[m.id].sorted() {
			o := byID[spec.owners[tp]]
			if !spec.stateful[tp.topic] || o == nil || o.process == m.process {
				continue
			}
			caught, warming := false, false
			for _, pm := range procMembers[m.process] {
				caught = caught || pm.caughtUp(tp, spec.recoveryLag)
				warming = warming || pm.warmup.has(tp)
			}
			if !caught {
				moves = append(moves, move{tp, o, byID[m.id], warming})
			}
		}
	}
	// Warm-ups already running keep their place in the budget first.
	slices.SortStableFunc(moves, func(x, y move) int {
		switch {
		case x.warming == y.warming:
			return 0
		case x.warming:
			return -1
		}
		return 1
	})
	budget := spec.warmups
	for _, mv := range moves {
		out.pending++
		// The task stays where it runs; that process holds no standby of it.
		delete(out.active[mv.to.id], mv.tp)
		out.active[mv.from.id][mv.tp] = struct{}{}
		for _, pm := range procMembers[mv.from.process] {
			delete(out.standby[pm.id], mv.tp)
		}
		// A member of the new process restoring the task as a standby goes on
		// doing so; else one warms it up (the one already doing so, if any).
		var standby, warm *streamsRefineMember
		for _, pm := range procMembers[mv.to.process] {
			if pm.standby.has(mv.tp) && standby == nil {
				standby = pm
			}
			if pm.warmup.has(mv.tp) && warm == nil {
				warm = pm
			}
		}
		switch {
		case standby != nil:
			out.standby[standby.id][mv.tp] = struct{}{}
		case budget > 0:
			budget--
			if warm == nil {
				warm = mv.to
			}
			out.warmup[warm.id][mv.tp] = struct{}{}
		}
	}
	return out
}

// refineMembers lists a group's members for refineStreamsTarget.
func (sg *streamsGroup) refineMembers() []streamsRefineMember {
	var out []streamsRefineMember
	for _, id := range slices.Sorted(maps.Keys(sg.members)) {
		m := sg.members[id]
		out = append(out, streamsRefineMember{id: id, process: m.process(), standby: m.standby, warmup: m.warmup,
			offsets: m.taskOffsets, endOffsets: m.taskEndOffsets})
	}
	return out
}
