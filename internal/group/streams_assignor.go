package group

import (
	"cmp"
	"maps"
	"slices"
)

// This file is the streams groups' task assignor ("sticky", as Kafka 4.4 names
// its StickyTaskAssignor), a pure function of the group's members, their
// processes, what they held before and the task offsets they reported.
//
// Tasks are balanced over processes, not members: a process's load is its tasks
// over its members (the threads of one Kafka Streams instance), and a task goes to
// the least-loaded member of the least-loaded process. Active tasks are placed
// in three passes, tasks ordered by partition then subtopology:
//
//  1. A task stays with the member that held it active, while that member is
//     under the per-member quota (ceil of tasks over members, recomputed as
//     members fill up, so counts differ by at most one).
//  2. Else it goes to a member that has its state: a previous standby or
//     warm-up holder (the one reporting the highest offset first), then a
//     member only reporting offsets for it (state on disk, e.g. a restarted
//     instance with a new member id), preferring the less-loaded one; again
//     only under the quota.
//  3. The rest go, by subtopology then partition, to the least-loaded process.
//
// Standby copies (stateful tasks only) never land on a process that holds the
// task already: first back on the previous active holder or a previous standby
// holder (sticky), then on the least-loaded processes. With rack-aware tags (the
// group's streams.rack.aware.assignment.tags, keys of the members' client tags) a
// copy first goes to a process whose tag values differ, on every key, from those
// of the processes already holding the task; stickiness and load only break ties
// between such processes. A task gets fewer copies when there are not enough
// processes.

// streamsAssignMember is one member as the assignor sees it.
type streamsAssignMember struct {
	id, process string
	tags        map[string]string // client tags
	// active and standby are the member's previous target; standby includes its
	// warm-up tasks (they hold state too).
	active, standby partSet
	offsets         map[topicPartition]int64 // task offset sums it reported
}

// streamsAssignSpec is the assignor's input.
type streamsAssignSpec struct {
	members  []streamsAssignMember // sorted by id
	tasks    map[string]int32      // subtopology -> tasks
	stateful map[string]bool       // subtopology -> has state stores
	standbys int                   // copies per stateful task
	rackTags []string              // client tag keys standbys spread over
}

// streamsProcess is one process's share of an assignment in progress.
type streamsProcess struct {
	id      string
	members []string // sorted
	tasks   int      // active and standby
	holds   partSet  // every task it holds, active or standby
	tags    map[string]string
}

func (p *streamsProcess) load() float64 { return float64(p.tasks) / float64(len(p.members)) }

// streamsQuota is a per-member quota: tasks over members, rounded up; once a
// member reaches it, the rest is shared by the others.
type streamsQuota struct{ tasks, members, per int }

func newStreamsQuota(tasks, members int) streamsQuota {
	q := streamsQuota{tasks: tasks, members: members}
	q.update()
	return q
}

func (q *streamsQuota) update() {
	q.per = 0
	if q.members > 0 {
		q.per = (q.tasks + q.members - 1) / q.members
	}
}

// reached notes that a member now holds n tasks.
func (q *streamsQuota) reached(n int) {
	if n == q.per && q.members > 0 {
		q.members--
		q.tasks -= n
		q.update()
	}
}

type streamsAssigner struct {
	spec          streamsAssignSpec
	procs         map[string]*streamsProcess
	procOf        map[string]*streamsProcess // member -> process
	count         map[string]int             // member -> tasks (active and standby)
	active        map[string]partSet
	standby       map[string]partSet
	prevActive    map[topicPartition]string   // task -> member that held it active
	holders       map[topicPartition][]string // task -> members with its state, best first
	activeQuota   streamsQuota
	totalQuota    streamsQuota
	statefulTasks []topicPartition
}

// assignStreamsTasks computes a streams group's target: active tasks and
// standby copies per member.
func assignStreamsTasks(spec streamsAssignSpec) (active, standby map[string]partSet) {
	a := &streamsAssigner{spec: spec, procs: map[string]*streamsProcess{}, procOf: map[string]*streamsProcess{},
		count: map[string]int{}, active: map[string]partSet{}, standby: map[string]partSet{},
		prevActive: map[topicPartition]string{}, holders: map[topicPartition][]string{}}
	var tasks []topicPartition
	for _, sub := range slices.Sorted(maps.Keys(spec.tasks)) {
		for p := range spec.tasks[sub] {
			tp := topicPartition{sub, p}
			tasks = append(tasks, tp)
			if spec.stateful[sub] {
				a.statefulTasks = append(a.statefulTasks, tp)
			}
		}
	}
	valid := func(tp topicPartition) bool { return tp.partition >= 0 && tp.partition < spec.tasks[tp.topic] }
	type candidate struct {
		member     string
		prevHolder bool
		offset     int64
	}
	candidates := map[topicPartition][]candidate{}
	for _, m := range spec.members {
		a.active[m.id], a.standby[m.id] = partSet{}, partSet{}
		p := a.procs[m.process]
		if p == nil {
			p = &streamsProcess{id: m.process, holds: partSet{}, tags: m.tags}
			a.procs[m.process] = p
		}
		p.members = append(p.members, m.id)
		a.procOf[m.id] = p
		for tp := range m.active {
			if valid(tp) {
				a.prevActive[tp] = m.id
			}
		}
		for tp := range m.standby {
			if valid(tp) {
				off, ok := m.offsets[tp]
				if !ok {
					off = 0 // nothing reported: as far behind as can be
				}
				candidates[tp] = append(candidates[tp], candidate{m.id, true, off})
			}
		}
		for tp, off := range m.offsets {
			if valid(tp) && !m.standby.has(tp) && !m.active.has(tp) {
				candidates[tp] = append(candidates[tp], candidate{m.id, false, off})
			}
		}
	}
	for tp, cs := range candidates {
		slices.SortFunc(cs, func(x, y candidate) int {
			if x.prevHolder != y.prevHolder {
				if x.prevHolder {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(y.offset, x.offset); c != 0 {
				return c
			}
			return cmp.Compare(x.member, y.member)
		})
		for _, c := range cs {
			a.holders[tp] = append(a.holders[tp], c.member)
		}
	}
	n := len(spec.members)
	if n == 0 {
		return a.active, a.standby
	}
	a.activeQuota = newStreamsQuota(len(tasks), n)
	a.totalQuota = newStreamsQuota(len(tasks)+len(a.statefulTasks)*spec.standbys, n)
	a.assignActive(tasks)
	if spec.standbys > 0 {
		a.assignStandbys()
	}
	return a.active, a.standby
}

// add gives member id the task, active or standby, and updates the quotas.
func (a *streamsAssigner) add(id string, tp topicPartition, active bool) {
	p := a.procOf[id]
	if active {
		a.active[id][tp] = struct{}{}
	} else {
		a.standby[id][tp] = struct{}{}
	}
	p.holds[tp] = struct{}{}
	p.tasks++
	a.count[id]++
	if active {
		a.activeQuota.reached(a.count[id])
	}
	a.totalQuota.reached(a.count[id])
}

// leastLoadedMember is the member of p with the fewest tasks (by id on a tie).
func (a *streamsAssigner) leastLoadedMember(p *streamsProcess) string {
	best := p.members[0]
	for _, id := range p.members[1:] {
		if a.count[id] < a.count[best] {
			best = id
		}
	}
	return best
}

// leastLoadedProcess is the process with the lowest load that ok accepts (by id
// on a tie); nil if none does.
func (a *streamsAssigner) leastLoadedProcess(ok func(*streamsProcess) bool) *streamsProcess {
	var best *streamsProcess
	for _, id := range slices.Sorted(maps.Keys(a.procs)) {
		p := a.procs[id]
		if ok != nil && !ok(p) {
			continue
		}
		if best == nil || p.load() < best.load() {
			best = p
		}
	}
	return best
}

// leastLoadedHolder picks among members holding tp's state (best first) the
// first one, or a later one whose process and own load are both lower; members
// whose process may not take it (skip) are passed over.
func (a *streamsAssigner) leastLoadedHolder(tp topicPartition, skip func(*streamsProcess) bool) string {
	best := ""
	for _, id := range a.holders[tp] {
		p := a.procOf[id]
		if p == nil || (skip != nil && skip(p)) {
			continue
		}
		if best == "" || (p.load() < a.procOf[best].load() && a.count[id] < a.count[best]) {
			best = id
		}
	}
	return best
}

func (a *streamsAssigner) assignActive(tasks []topicPartition) {
	byPartition := slices.Clone(tasks)
	slices.SortFunc(byPartition, func(x, y topicPartition) int {
		return cmp.Or(cmp.Compare(x.partition, y.partition), cmp.Compare(x.topic, y.topic))
	})
	done := partSet{}
	for _, tp := range byPartition { // 1. the previous owner
		if id, ok := a.prevActive[tp]; ok && a.count[id] < a.activeQuota.per {
			a.add(id, tp, true)
			done[tp] = struct{}{}
		}
	}
	for _, tp := range byPartition { // 2. a member with its state
		if done.has(tp) {
			continue
		}
		if id := a.leastLoadedHolder(tp, nil); id != "" && a.count[id] < a.activeQuota.per {
			a.add(id, tp, true)
			done[tp] = struct{}{}
		}
	}
	for _, tp := range tasks { // 3. the least-loaded process
		if !done.has(tp) {
			a.add(a.leastLoadedMember(a.leastLoadedProcess(nil)), tp, true)
		}
	}
}

// diverse reports whether p's rack tags differ, on every key, from those of
// every process already holding tp.
func (a *streamsAssigner) diverse(p *streamsProcess, tp topicPartition) bool {
	for _, q := range a.procs {
		if q == p || !q.holds.has(tp) {
			continue
		}
		for _, k := range a.spec.rackTags {
			if p.tags[k] == q.tags[k] {
				return false
			}
		}
	}
	return true
}

func (a *streamsAssigner) assignStandbys() {
	tasks := slices.Clone(a.statefulTasks)
	slices.SortFunc(tasks, func(x, y topicPartition) int { // partition, then subtopology, descending
		return cmp.Or(cmp.Compare(y.partition, x.partition), cmp.Compare(y.topic, x.topic))
	})
	rackAware := len(a.spec.rackTags) > 0
	type pending struct {
		tp     topicPartition
		copies int
	}
	var rest []pending
	for _, tp := range tasks {
		placed := 0
		room := func(id string) bool { return a.count[id] < a.totalQuota.per }
		taken := func(p *streamsProcess) bool { return p.holds.has(tp) || (rackAware && !a.diverse(p, tp)) }
		if rackAware {
			// Rack diversity first: while a process with other tag values has
			// room, the copy goes there, a previous holder of the task first.
			for placed < a.spec.standbys {
				id := a.stickyStandby(tp, taken, room)
				if id == "" {
					p := a.leastLoadedProcess(func(p *streamsProcess) bool {
						return !taken(p) && room(a.leastLoadedMember(p))
					})
					if p == nil {
						break
					}
					id = a.leastLoadedMember(p)
				}
				a.add(id, tp, false)
				placed++
			}
		}
		for placed < a.spec.standbys {
			id := a.stickyStandby(tp, func(p *streamsProcess) bool { return p.holds.has(tp) }, room)
			if id == "" {
				break
			}
			a.add(id, tp, false)
			placed++
		}
		if placed < a.spec.standbys {
			rest = append(rest, pending{tp, a.spec.standbys - placed})
		}
	}
	slices.SortFunc(rest, func(x, y pending) int { // subtopology, then partition, descending
		return cmp.Or(cmp.Compare(y.tp.topic, x.tp.topic), cmp.Compare(y.tp.partition, x.tp.partition))
	})
	for _, r := range rest {
		for range r.copies {
			p := a.leastLoadedProcess(func(p *streamsProcess) bool { return !p.holds.has(r.tp) })
			if p == nil {
				break // fewer copies: not enough processes
			}
			a.add(a.leastLoadedMember(p), r.tp, false)
		}
	}
}

// stickyStandby is where a standby copy of tp goes back to: the member that held
// it active before, else the best previous holder of its state; only a member
// with room whose process skip does not refuse; "" if none.
func (a *streamsAssigner) stickyStandby(tp topicPartition, skip func(*streamsProcess) bool, room func(string) bool) string {
	if id, ok := a.prevActive[tp]; ok {
		if p := a.procOf[id]; p != nil && !skip(p) && room(id) {
			return id
		}
	}
	if id := a.leastLoadedHolder(tp, skip); id != "" && room(id) {
		return id
	}
	return ""
}
