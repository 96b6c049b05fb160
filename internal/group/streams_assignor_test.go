package group

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// tasksOfString parses "0/0+1,1/2" ("" or "-": none) into a task set.
func tasksOfString(s string) partSet {
	out := partSet{}
	if s == "" || s == "-" {
		return out
	}
	for _, t := range strings.Split(s, ",") {
		sub, parts, _ := strings.Cut(t, "/")
		for _, p := range strings.Split(parts, "+") {
			out[topicPartition{sub, int32(mustInt(p))}] = struct{}{}
		}
	}
	return out
}

// tasksString prints a task set as "0/0+1,1/2", "-" for none.
func tasksString(ts partSet) string {
	if len(ts) == 0 {
		return "-"
	}
	var out []string
	for _, tp := range ts.sorted() {
		if n := len(out); n > 0 && strings.HasPrefix(out[n-1], tp.topic+"/") {
			out[n-1] += fmt.Sprintf("+%d", tp.partition)
			continue
		}
		out = append(out, fmt.Sprintf("%s/%d", tp.topic, tp.partition))
	}
	return strings.Join(out, ",")
}

// offsetsOfString parses "0/1@100+2@5" into task offsets.
func offsetsOfString(s string) map[topicPartition]int64 {
	if s == "" {
		return nil
	}
	out := map[topicPartition]int64{}
	for _, t := range scriptTaskOffsets(s) {
		out[topicPartition{t.SubtopologyID, t.Partition}] = t.Offset
	}
	return out
}

// assignmentString prints member -> tasks, members sorted: "a=0/0 b=-".
func assignmentString(as map[string]partSet) string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(as)) {
		out = append(out, id+"="+tasksString(as[id]))
	}
	return strings.Join(out, " ")
}

func TestAssignStreamsTasks(t *testing.T) {
	type member struct {
		id, process, tags       string // tags: zone:a+host:x
		active, standby, offset string
	}
	// One task active on a (zone x); b is in zone x too, c in zone y.
	zones := []member{
		{id: "a", process: "p1", tags: "zone:x", active: "0/0"},
		{id: "b", process: "p2", tags: "zone:x"},
		{id: "c", process: "p3", tags: "zone:y"},
	}
	for _, tc := range []struct {
		name     string
		members  []member
		tasks    map[string]int32
		stateful []string
		standbys int
		rackTags []string
		// wantActive and wantStandby: "a=0/0 b=0/1"
		wantActive, wantStandby string
	}{
		{
			name:       "new group: balanced over processes, by subtopology",
			members:    []member{{id: "a", process: "p1"}, {id: "b", process: "p1"}, {id: "c", process: "p2"}},
			tasks:      map[string]int32{"0": 3, "1": 3},
			wantActive: "a=0/0,1/0 b=0/2,1/2 c=0/1,1/1",
		},
		{
			name: "previous owners keep their tasks up to the quota",
			members: []member{
				{id: "a", process: "p1", active: "0/0+1+2"},
				{id: "b", process: "p2"},
			},
			tasks:      map[string]int32{"0": 3},
			wantActive: "a=0/0+1 b=0/2",
		},
		{
			// The old assignor gave the departed member's tasks to the first
			// least-loaded member (b gets 0/1), throwing c's standby state away.
			name: "a departed owner's task goes to the member holding its standby",
			members: []member{
				{id: "b", process: "p1", active: "0/0"},
				{id: "c", process: "p2", active: "0/2", standby: "0/1"},
			},
			tasks:      map[string]int32{"0": 4},
			stateful:   []string{"0"},
			wantActive: "b=0/0+3 c=0/1+2",
		},
		{
			name: "the most caught-up standby wins",
			members: []member{
				{id: "b", process: "p1", standby: "0/0", offset: "0/0@10"},
				{id: "c", process: "p2", standby: "0/0", offset: "0/0@90"},
			},
			tasks:      map[string]int32{"0": 1},
			stateful:   []string{"0"},
			wantActive: "b=- c=0/0",
		},
		{
			// A restarted instance has a new member id and no previous target;
			// the offsets it reports for the state on its disk bring its tasks back.
			name: "a restarted member gets back the tasks it reports state for",
			members: []member{
				{id: "a", process: "p1", active: "0/0+1"},
				{id: "n", process: "p2", offset: "0/2@500+3@400"},
			},
			tasks:      map[string]int32{"0": 4},
			stateful:   []string{"0"},
			wantActive: "a=0/0+1 n=0/2+3",
		},
		{
			name: "standbys on the other process",
			members: []member{
				{id: "a", process: "p1", active: "0/0+1"},
				{id: "c", process: "p2", active: "0/2+3"},
			},
			tasks:       map[string]int32{"0": 4},
			stateful:    []string{"0"},
			standbys:    1,
			wantActive:  "a=0/0+1 c=0/2+3",
			wantStandby: "a=0/2+3 c=0/0+1",
		},
		{
			name: "a moved task's standby goes back to its previous owner",
			members: []member{
				{id: "a", process: "p1", active: "0/0+1"},
				{id: "c", process: "p2"},
			},
			tasks:       map[string]int32{"0": 2},
			stateful:    []string{"0"},
			standbys:    1,
			wantActive:  "a=0/0 c=0/1",
			wantStandby: "a=0/1 c=0/0",
		},
		{
			name:        "no standby without another process",
			members:     []member{{id: "a", process: "p1"}, {id: "b", process: "p1"}},
			tasks:       map[string]int32{"0": 2},
			stateful:    []string{"0"},
			standbys:    1,
			wantActive:  "a=0/0 b=0/1",
			wantStandby: "a=- b=-",
		},
		{
			name: "stateless tasks get no standbys",
			members: []member{
				{id: "a", process: "p1", active: "0/0,1/0"},
				{id: "b", process: "p2"},
			},
			tasks:       map[string]int32{"0": 1, "1": 1},
			stateful:    []string{"1"},
			standbys:    1,
			wantActive:  "a=0/0 b=1/0",
			wantStandby: "a=1/0 b=-",
		},
		{
			name:        "without rack tags a standby goes to the least-loaded process",
			members:     zones,
			tasks:       map[string]int32{"0": 1},
			stateful:    []string{"0"},
			standbys:    1,
			wantActive:  "a=0/0 b=- c=-",
			wantStandby: "a=- b=0/0 c=-",
		},
		{
			name:        "with rack tags a standby goes to another zone first",
			members:     zones,
			tasks:       map[string]int32{"0": 1},
			stateful:    []string{"0"},
			standbys:    1,
			rackTags:    []string{"zone"},
			wantActive:  "a=0/0 b=- c=-",
			wantStandby: "a=- b=- c=0/0",
		},
		{
			name:        "rack tags: the second copy falls back to a same-zone process",
			members:     zones,
			tasks:       map[string]int32{"0": 1},
			stateful:    []string{"0"},
			standbys:    2,
			rackTags:    []string{"zone"},
			wantActive:  "a=0/0 b=- c=-",
			wantStandby: "a=- b=0/0 c=0/0",
		},
		{
			name: "rack tags: a previous standby in a diverse zone stays",
			members: []member{
				{id: "a", process: "p1", tags: "zone:x", active: "0/0"},
				{id: "b", process: "p2", tags: "zone:y"},
				{id: "c", process: "p3", tags: "zone:y", standby: "0/0"},
			},
			tasks:       map[string]int32{"0": 1},
			stateful:    []string{"0"},
			standbys:    1,
			rackTags:    []string{"zone"},
			wantActive:  "a=0/0 b=- c=-",
			wantStandby: "a=- b=- c=0/0",
		},
		{
			name:       "tasks beyond the partitions of a previous target are dropped",
			members:    []member{{id: "a", process: "p1", active: "0/0+5"}},
			tasks:      map[string]int32{"0": 2},
			wantActive: "a=0/0+1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := streamsAssignSpec{tasks: tc.tasks, stateful: map[string]bool{}, standbys: tc.standbys, rackTags: tc.rackTags}
			for _, s := range tc.stateful {
				spec.stateful[s] = true
			}
			for _, m := range tc.members {
				tags := map[string]string{}
				if m.tags != "" {
					for _, kv := range strings.Split(m.tags, "+") {
						k, v, _ := strings.Cut(kv, ":")
						tags[k] = v
					}
				}
				spec.members = append(spec.members, streamsAssignMember{id: m.id, process: m.process, tags: tags,
					active: tasksOfString(m.active), standby: tasksOfString(m.standby), offsets: offsetsOfString(m.offset)})
			}
			active, standby := assignStreamsTasks(spec)
			if got := assignmentString(active); got != tc.wantActive {
				t.Errorf("active:\n got %s\nwant %s", got, tc.wantActive)
			}
			want := tc.wantStandby
			if want == "" {
				want = assignmentString(map[string]partSet{})
				for _, m := range tc.members {
					want = strings.TrimSpace(want + " " + m.id + "=-")
				}
			}
			if got := assignmentString(standby); got != want {
				t.Errorf("standby:\n got %s\nwant %s", got, want)
			}
			checkStreamsAssignment(t, spec, active, standby)
		})
	}
}

// checkStreamsAssignment checks what every target must be: each task active on
// exactly one member, no process holding a task twice, active counts within
// one of each other.
func checkStreamsAssignment(t *testing.T, spec streamsAssignSpec, active, standby map[string]partSet) {
	t.Helper()
	procOf := map[string]string{}
	for _, m := range spec.members {
		procOf[m.id] = m.process
	}
	owner := map[topicPartition]string{}
	held := map[string]partSet{}
	lo, hi := math.MaxInt, 0
	for id, ts := range active {
		lo, hi = min(lo, len(ts)), max(hi, len(ts))
		for tp := range ts {
			if o, ok := owner[tp]; ok {
				t.Errorf("task %v active on %s and %s", tp, o, id)
			}
			owner[tp] = id
		}
	}
	for sub, n := range spec.tasks {
		for p := range n {
			if _, ok := owner[topicPartition{sub, p}]; !ok {
				t.Errorf("task %s/%d assigned to nobody", sub, p)
			}
		}
	}
	if len(spec.members) > 0 && hi-lo > 1 {
		t.Errorf("active counts range from %d to %d", lo, hi)
	}
	for _, as := range []map[string]partSet{active, standby} {
		for id, ts := range as {
			p := procOf[id]
			if held[p] == nil {
				held[p] = partSet{}
			}
			for tp := range ts {
				if held[p].has(tp) {
					t.Errorf("process %s holds task %v twice", p, tp)
				}
				held[p][tp] = struct{}{}
			}
		}
	}
}

func TestRefineStreamsTarget(t *testing.T) {
	type member struct {
		id, process                    string
		standby, warmup, offsets, ends string
	}
	for _, tc := range []struct {
		name    string
		members []member
		// active and standby are the assignor's target; owners "0/0=a 0/1=b".
		active, standby, owners string
		stateful                []string
		warmups                 int
		lag                     int64
		want                    string // "active: ... standby: ... warmup: ... pending=N"
	}{
		{
			name:     "a stateful task moving to another process stays until that process catches up",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2"}},
			active:   "a=0/0 b=0/1",
			standby:  "a=0/1 b=0/0",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  2, lag: 100,
			want: "active: a=0/0+1 b=- standby: a=- b=0/0 warmup: a=- b=0/1 pending=1",
		},
		{
			name:     "caught up: the task moves",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2", warmup: "0/1", offsets: "0/1@950", ends: "0/1@1000"}},
			active:   "a=0/0 b=0/1",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  2, lag: 100,
			want: "active: a=0/0 b=0/1 standby: a=- b=- warmup: a=- b=- pending=0",
		},
		{
			name:     "a lag above the acceptable one: still warming up",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2", warmup: "0/1", offsets: "0/1@850", ends: "0/1@1000"}},
			active:   "a=0/0 b=0/1",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  2, lag: 100,
			want: "active: a=0/0+1 b=- standby: a=- b=- warmup: a=- b=0/1 pending=1",
		},
		{
			name:     "another member of the new process caught up: the task moves",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2"}, {id: "c", process: "p2", offsets: "0/1@-2"}},
			active:   "a=0/0 b=0/1 c=-",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  2, lag: 0,
			want: "active: a=0/0 b=0/1 c=- standby: a=- b=- c=- warmup: a=- b=- c=- pending=0",
		},
		{
			name:     "stateless, unowned and same-process tasks move at once",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2"}, {id: "c", process: "p1"}},
			active:   "a=- b=0/0,1/0 c=1/1",
			owners:   "0/0=a 1/1=a",
			stateful: []string{"1"},
			warmups:  2, lag: 100,
			want: "active: a=- b=0/0,1/0 c=1/1 standby: a=- b=- c=- warmup: a=- b=- c=- pending=0",
		},
		{
			name:     "the warm-up budget is group-wide; running warm-ups keep their place",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2"}, {id: "c", process: "p3", warmup: "0/2"}},
			active:   "a=- b=0/1 c=0/2",
			owners:   "0/1=a 0/2=a",
			stateful: []string{"0"},
			warmups:  1, lag: 100,
			want: "active: a=0/1+2 b=- c=- standby: a=- b=- c=- warmup: a=- b=- c=0/2 pending=2",
		},
		{
			name:     "a process restoring the task as a standby keeps it, without a warm-up",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2", standby: "0/1"}},
			active:   "a=0/0 b=0/1",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  1, lag: 100,
			want: "active: a=0/0+1 b=- standby: a=- b=0/1 warmup: a=- b=- pending=1",
		},
		{
			name:     "no warm-ups configured: the target as it is",
			members:  []member{{id: "a", process: "p1"}, {id: "b", process: "p2"}},
			active:   "a=0/0 b=0/1",
			owners:   "0/0=a 0/1=a",
			stateful: []string{"0"},
			warmups:  0, lag: 100,
			want: "active: a=0/0 b=0/1 standby: a=- b=- warmup: a=- b=- pending=0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(s string) map[string]partSet {
				out := map[string]partSet{}
				for _, f := range strings.Fields(s) {
					id, ts, _ := strings.Cut(f, "=")
					out[id] = tasksOfString(ts)
				}
				return out
			}
			spec := streamsRefineSpec{active: parse(tc.active), standby: parse(tc.standby), owners: map[topicPartition]string{},
				stateful: map[string]bool{}, warmups: tc.warmups, recoveryLag: tc.lag}
			for _, s := range tc.stateful {
				spec.stateful[s] = true
			}
			for _, f := range strings.Fields(tc.owners) {
				ts, id, _ := strings.Cut(f, "=")
				for tp := range tasksOfString(ts) {
					spec.owners[tp] = id
				}
			}
			for _, m := range tc.members {
				spec.members = append(spec.members, streamsRefineMember{id: m.id, process: m.process,
					standby: tasksOfString(m.standby), warmup: tasksOfString(m.warmup),
					offsets: offsetsOfString(m.offsets), endOffsets: offsetsOfString(m.ends)})
			}
			r := refineStreamsTarget(spec)
			got := fmt.Sprintf("active: %s standby: %s warmup: %s pending=%d",
				assignmentString(r.active), assignmentString(r.standby), assignmentString(r.warmup), r.pending)
			if got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
