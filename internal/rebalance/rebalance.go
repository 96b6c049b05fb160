// Package rebalance plans an even spread of partition replicas and preferred
// leaders over a cluster's brokers, as few moves as it takes, for
// `strata cluster rebalance`. It is pure: brokers and partitions in, moves out.
//
// The plan, in two steps on the partitions' replica lists:
//
//  1. Replicas: while one broker holds at least two replicas more than
//     another, one replica moves from the most loaded broker to the least
//     loaded one that does not hold the partition yet and whose rack keeps the
//     partition's rack spread (its number of distinct racks never drops; a
//     broker without a rack is a rack of its own). The new broker takes the
//     old one's place in the list, and a follower is moved before a preferred
//     leader. Every move narrows the gap, so the plan ends, with every
//     broker's count within one of every other's where the racks allow.
//  2. Leaders: while one broker is the preferred leader (first replica) of at
//     least two partitions more than another replica of one of them, the two
//     swap places in that partition's list: the order changes, not the set.
//
// Replication factors never change. A partition with a replica on a broker
// that is not in the given set (fenced, unregistered) is left alone and its
// replicas are not counted: moving it is a repair, not a rebalance.
package rebalance

import (
	"cmp"
	"slices"
	"strconv"
)

// Broker is a broker replicas may go to.
type Broker struct {
	ID   int32
	Rack string // "" for none
}

// Partition is a partition and its replica list (preferred leader first).
type Partition struct {
	Topic    string
	Index    int32
	Replicas []int32
}

// Move is one partition's new replica list.
type Move struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// Load is one broker's replicas and preferred leaderships.
type Load struct {
	Broker   int32 `json:"broker"`
	Replicas int   `json:"replicas"`
	Leaders  int   `json:"leaders"`
}

// Plan is the outcome: the moves, and each broker's load before and after.
type Plan struct {
	Moves  []Move `json:"moves"`
	Before []Load `json:"before"`
	After  []Load `json:"after"`
}

type planner struct {
	ids    []int32 // ascending
	rackOf map[int32]string
	parts  []*Partition // the movable ones, replicas being edited
	load   map[int32]int
	leads  map[int32]int
}

// Compute plans the moves that spread partitions' replicas and preferred
// leaders evenly over brokers.
func Compute(brokers []Broker, partitions []Partition) Plan {
	pl := &planner{rackOf: map[int32]string{}, load: map[int32]int{}, leads: map[int32]int{}}
	for _, b := range brokers {
		if _, dup := pl.rackOf[b.ID]; dup {
			continue
		}
		r := b.Rack
		if r == "" {
			r = "\x00broker " + strconv.Itoa(int(b.ID))
		}
		pl.rackOf[b.ID] = r
		pl.ids = append(pl.ids, b.ID)
		pl.load[b.ID], pl.leads[b.ID] = 0, 0
	}
	slices.Sort(pl.ids)
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Index, b.Index))
	})
	var orig [][]int32
	for _, p := range sorted {
		if len(p.Replicas) == 0 || slices.ContainsFunc(p.Replicas, func(id int32) bool { _, ok := pl.rackOf[id]; return !ok }) {
			continue
		}
		q := p
		q.Replicas = slices.Clone(p.Replicas)
		pl.parts = append(pl.parts, &q)
		orig = append(orig, p.Replicas)
		for _, id := range q.Replicas {
			pl.load[id]++
		}
		pl.leads[q.Replicas[0]]++
	}
	plan := Plan{Before: pl.loads()}
	for pl.moveReplica() {
	}
	for pl.moveLeader() {
	}
	plan.After = pl.loads()
	for i, p := range pl.parts {
		if !slices.Equal(p.Replicas, orig[i]) {
			plan.Moves = append(plan.Moves, Move{Topic: p.Topic, Partition: p.Index, From: slices.Clone(orig[i]), To: p.Replicas})
		}
	}
	return plan
}

func (pl *planner) loads() []Load {
	out := make([]Load, len(pl.ids))
	for i, id := range pl.ids {
		out[i] = Load{Broker: id, Replicas: pl.load[id], Leaders: pl.leads[id]}
	}
	return out
}

// byLoad returns the broker ids ordered by count, descending or ascending,
// lowest id first on a tie.
func (pl *planner) byLoad(count map[int32]int, desc bool) []int32 {
	ids := slices.Clone(pl.ids)
	slices.SortStableFunc(ids, func(a, b int32) int {
		if desc {
			return cmp.Compare(count[b], count[a])
		}
		return cmp.Compare(count[a], count[b])
	})
	return ids
}

// racks counts the distinct racks of a replica list.
func (pl *planner) racks(replicas []int32) int {
	seen := map[string]bool{}
	for _, id := range replicas {
		seen[pl.rackOf[id]] = true
	}
	return len(seen)
}

// moveReplica makes one replica move, reporting false when none narrows the
// spread.
func (pl *planner) moveReplica() bool {
	for _, src := range pl.byLoad(pl.load, true) {
		for _, dst := range pl.byLoad(pl.load, false) {
			if pl.load[src]-pl.load[dst] < 2 {
				break
			}
			// Followers first, then preferred leaders.
			for _, leaderToo := range []bool{false, true} {
				for _, p := range pl.parts {
					i := slices.Index(p.Replicas, src)
					if i < 0 || (i == 0) != leaderToo || slices.Contains(p.Replicas, dst) {
						continue
					}
					next := slices.Clone(p.Replicas)
					next[i] = dst
					if pl.racks(next) < pl.racks(p.Replicas) {
						continue
					}
					p.Replicas = next
					pl.load[src]--
					pl.load[dst]++
					if i == 0 {
						pl.leads[src]--
						pl.leads[dst]++
					}
					return true
				}
			}
		}
	}
	return false
}

// moveLeader makes one preferred-leader swap, reporting false when none
// narrows the spread.
func (pl *planner) moveLeader() bool {
	for _, src := range pl.byLoad(pl.leads, true) {
		for _, p := range pl.parts {
			if p.Replicas[0] != src {
				continue
			}
			best := -1
			for i, id := range p.Replicas[1:] {
				if pl.leads[src]-pl.leads[id] >= 2 && (best < 0 || pl.leads[id] < pl.leads[p.Replicas[best]]) {
					best = i + 1
				}
			}
			if best < 0 {
				continue
			}
			dst := p.Replicas[best]
			p.Replicas[0], p.Replicas[best] = dst, src
			pl.leads[src]--
			pl.leads[dst]++
			return true
		}
	}
	return false
}
