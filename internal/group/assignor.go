package group

import (
	"cmp"
	"slices"
)

// Server-side assignors of KIP-848 consumer groups, named as Kafka names them.
const (
	uniformAssignor = "uniform" // Kafka's default: balanced and sticky
	rangeAssignor   = "range"   // co-partitioned ranges per topic
)

// assignorSupported reports whether name is a server assignor this coordinator has.
func assignorSupported(name string) bool {
	return name == uniformAssignor || name == rangeAssignor
}

// partSet is a set of partitions.
type partSet map[topicPartition]struct{}

func (s partSet) has(tp topicPartition) bool { _, ok := s[tp]; return ok }

// sorted returns the partitions ordered by topic and partition.
func (s partSet) sorted() []topicPartition {
	out := make([]topicPartition, 0, len(s))
	for tp := range s {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

// equal reports whether both sets hold the same partitions.
func (s partSet) equal(o partSet) bool {
	if len(s) != len(o) {
		return false
	}
	for tp := range s {
		if !o.has(tp) {
			return false
		}
	}
	return true
}

func (s partSet) clone() partSet {
	out := make(partSet, len(s))
	for tp := range s {
		out[tp] = struct{}{}
	}
	return out
}

// assignSpec is an assignor's input: every member's subscribed topics (existing
// ones only), each topic's partition count, and the previous target assignment.
type assignSpec struct {
	members    []string            // member ids, sorted
	subscribed map[string][]string // member id -> sorted topics
	partitions map[string]int32    // topic -> partition count
	previous   map[string]partSet  // member id -> previous target (may be stale)
}

// assign computes the target assignment of every member with the named assignor.
// Every partition of a subscribed topic goes to exactly one member subscribed to it.
func assign(name string, spec assignSpec) map[string]partSet {
	if name == rangeAssignor {
		return assignRange(spec)
	}
	return assignUniform(spec)
}

// assignRange gives each member of a topic's subscribers (sorted by member id) a
// contiguous range of its partitions; the first partitions%members get one more.
// Members subscribed to the same co-partitioned topics get the same partition
// numbers of each, as the classic range assignor does.
func assignRange(spec assignSpec) map[string]partSet {
	out := make(map[string]partSet, len(spec.members))
	subscribers := make(map[string][]string)
	for _, m := range spec.members {
		out[m] = partSet{}
		for _, t := range spec.subscribed[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t, ms := range subscribers {
		n := spec.partitions[t]
		per, extra := n/int32(len(ms)), n%int32(len(ms))
		next := int32(0)
		for i, m := range ms {
			count := per
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[m][topicPartition{t, p}] = struct{}{}
			}
			next += count
		}
	}
	return out
}

// assignUniform spreads the partitions so that no two members eligible for a
// partition differ by more than one in their counts where their subscriptions allow,
// keeping partitions where they were (sticky): a member first keeps its previous
// partitions up to the balanced share, the rest go to the least-loaded eligible
// member, and a final pass moves partitions from members holding at least two more
// than another eligible member.
func assignUniform(spec assignSpec) map[string]partSet {
	out := make(map[string]partSet, len(spec.members))
	eligible := make(map[string]map[string]bool) // topic -> member -> subscribed
	total := 0
	for _, m := range spec.members {
		out[m] = partSet{}
		for _, t := range spec.subscribed[m] {
			if eligible[t] == nil {
				eligible[t] = make(map[string]bool)
				total += int(spec.partitions[t])
			}
			eligible[t][m] = true
		}
	}
	if len(spec.members) == 0 {
		return out
	}
	share := (total + len(spec.members) - 1) / len(spec.members)
	taken := partSet{}
	for _, m := range spec.members {
		for _, tp := range spec.previous[m].sorted() {
			if len(out[m]) >= share {
				break
			}
			if eligible[tp.topic][m] && tp.partition < spec.partitions[tp.topic] && !taken.has(tp) {
				out[m][tp] = struct{}{}
				taken[tp] = struct{}{}
			}
		}
	}
	topics := make([]string, 0, len(eligible))
	for t := range eligible {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	leastLoaded := func(t string, except string) string {
		best := ""
		for _, m := range spec.members {
			if m == except || !eligible[t][m] {
				continue
			}
			if best == "" || len(out[m]) < len(out[best]) {
				best = m
			}
		}
		return best
	}
	for _, t := range topics {
		for p := range spec.partitions[t] {
			tp := topicPartition{t, p}
			if !taken.has(tp) {
				out[leastLoaded(t, "")][tp] = struct{}{}
				taken[tp] = struct{}{}
			}
		}
	}
	// Balance: move a partition from a member to an eligible one holding at least
	// two fewer, most-loaded members first, until no such move exists. Each move
	// lowers the sum of squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		ms := slices.Clone(spec.members)
		slices.SortStableFunc(ms, func(a, b string) int { return cmp.Compare(len(out[b]), len(out[a])) })
		for _, from := range ms {
			for _, tp := range out[from].sorted() {
				to := leastLoaded(tp.topic, from)
				if to != "" && len(out[to])+1 < len(out[from]) {
					delete(out[from], tp)
					out[to][tp] = struct{}{}
					moved = true
					break
				}
			}
			if moved {
				break
			}
		}
	}
	return out
}
