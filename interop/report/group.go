package report

import (
	"cmp"
	"slices"
)

// CheckGroup checks what the members of one consumer group read from a topic that one
// producer wrote, each member's reads in its own read order, for groups whose members
// commit what they read before they can lose a partition (commit after every poll, no
// member evicted): every acknowledged record must have been read exactly once, by
// exactly one member. It adds two anomalies to Check's, which it runs over the union of
// the reads in offset order:
//
//   - duplicate: a position read twice, by one member or by two;
//   - nonmonotonic-poll: one member read a partition at an offset not above the last
//     one it read there. Skipping forward is allowed: a partition can move to another
//     member and back.
//
// Check's own poll-skip then flags offsets that no member read.
func CheckGroup(n int32, produced []Produced, members map[string][]Consumed) []error {
	var a anomalies
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	readBy := make(map[pos]string)
	var union []Consumed
	for _, name := range names {
		last := make(map[int32]int64)
		for _, c := range members[name] {
			at := pos{c.Partition, c.Offset}
			if l, ok := last[c.Partition]; ok && c.Offset <= l {
				a.add("nonmonotonic-poll", "%s read %d/%d after %d/%d", name, at.p, at.o, at.p, l)
			}
			last[c.Partition] = max(last[c.Partition], c.Offset)
			if first, ok := readBy[at]; ok {
				a.add("duplicate", "%d/%d read by %s and again by %s", at.p, at.o, first, name)
				continue
			}
			readBy[at] = name
			union = append(union, c)
		}
	}
	a.check(n, produced, inOffsetOrder(union))
	return a.errs
}

// CheckAtLeastOnce checks reads that may legitimately repeat: a group consumer that
// lost a partition before committing (a rebalance, a coordinator failover) reads it
// again from the last commit. Every acknowledged record must still have been read, and
// with an idempotent producer every record must sit at exactly one offset. It adds two
// anomalies to Check's, which it runs over the distinct positions read, in offset order:
//
//   - inconsistent-offsets: one position read twice with different contents;
//   - duplicate: one value read at two positions (a retried send written twice),
//     telling records apart by value (the interop clients send unique values).
//
// Check's phantom also flags the second copy of a duplicate, which no acknowledged
// send put there.
func CheckAtLeastOnce(n int32, produced []Produced, consumed []Consumed) []error {
	var a anomalies
	first := make(map[pos]Consumed, len(consumed))
	valueAt := make(map[string]pos, len(consumed))
	var distinct []Consumed
	for _, c := range consumed {
		at := pos{c.Partition, c.Offset}
		if prev, ok := first[at]; ok {
			if diff := diffAgainst("first read", prev.Key, prev.Value, prev.Headers, c); diff != "" {
				a.add("inconsistent-offsets", "%d/%d read again: %s", at.p, at.o, diff)
			}
			continue
		}
		first[at] = c
		if c.Value != nil {
			if other, ok := valueAt[string(c.Value)]; ok {
				a.add("duplicate", "value %q read at %d/%d and at %d/%d", c.Value, other.p, other.o, at.p, at.o)
			} else {
				valueAt[string(c.Value)] = at
			}
		}
		distinct = append(distinct, c)
	}
	a.check(n, produced, inOffsetOrder(distinct))
	return a.errs
}

// inOffsetOrder sorts reads by partition, then offset, keeping equal positions in
// read order.
func inOffsetOrder(cs []Consumed) []Consumed {
	slices.SortStableFunc(cs, func(x, y Consumed) int {
		return cmp.Or(cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Offset, y.Offset))
	})
	return cs
}
