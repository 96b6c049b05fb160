package rebalance

import (
	"fmt"
	"slices"
	"testing"
)

func TestCompute(t *testing.T) {
	brokers := func(racks ...string) []Broker {
		var bs []Broker
		for i, r := range racks {
			bs = append(bs, Broker{ID: int32(i + 1), Rack: r})
		}
		return bs
	}
	parts := func(assignments ...[]int32) []Partition {
		var ps []Partition
		for i, a := range assignments {
			ps = append(ps, Partition{Topic: "t", Index: int32(i), Replicas: a})
		}
		return ps
	}
	repeat := func(n int, a []int32) [][]int32 {
		var out [][]int32
		for range n {
			out = append(out, a)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		brokers    []Broker
		parts      []Partition
		moves      int // partitions whose list changes
		replicaMov int // replicas placed on a new broker
		replicas   []int
		leaders    []int
		want       map[int32][]int32 // some partitions' expected new lists
	}{
		{name: "balanced: nothing moves", brokers: brokers("", "", ""),
			parts:    parts([]int32{1, 2}, []int32{2, 3}, []int32{3, 1}),
			replicas: []int{2, 2, 2}, leaders: []int{1, 1, 1}},
		{name: "a new broker takes its share, no more", brokers: brokers("", "", ""),
			parts: parts([]int32{1, 2}, []int32{2, 1}, []int32{1, 2}),
			moves: 2, replicaMov: 2,
			replicas: []int{2, 2, 2}, leaders: []int{1, 1, 1}},
		{name: "two new brokers: 10 partitions x 3 replicas over 5", brokers: brokers("", "", "", "", ""),
			parts:      parts(slices.Concat(repeat(4, []int32{1, 2, 3}), repeat(3, []int32{2, 3, 1}), repeat(3, []int32{3, 1, 2}))...),
			replicaMov: 12,
			replicas:   []int{6, 6, 6, 6, 6}, leaders: []int{2, 2, 2, 2, 2}},
		{name: "racks: a move never puts two replicas on one rack", brokers: brokers("a", "b", "a", "b"),
			parts: parts([]int32{1, 2}, []int32{2, 1}),
			moves: 2, replicaMov: 2,
			replicas: []int{1, 1, 1, 1}, leaders: []int{1, 1, 0, 0}},
		{name: "racks hold back a move that would lose spread", brokers: brokers("a", "b", "b"),
			parts: parts([]int32{1, 2}, []int32{1, 2}),
			moves: 1, replicaMov: 1,
			replicas: []int{2, 1, 1}, leaders: []int{1, 0, 1},
			want: map[int32][]int32{0: {3, 1}}},
		{name: "leaders only: the order changes, not the set", brokers: brokers("", ""),
			parts:    parts([]int32{1, 2}, []int32{1, 2}, []int32{1, 2}, []int32{1, 2}),
			moves:    2,
			replicas: []int{4, 4}, leaders: []int{2, 2},
			want: map[int32][]int32{0: {2, 1}, 1: {2, 1}}},
		{name: "a partition on an unknown broker is left alone", brokers: brokers("", "", ""),
			parts: parts([]int32{1, 9}, []int32{1, 2}, []int32{2, 1}),
			moves: 1, replicaMov: 1,
			replicas: []int{1, 2, 1}, leaders: []int{1, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(tc.brokers, tc.parts)
			rack := map[int32]string{}
			for _, b := range tc.brokers {
				rack[b.ID] = b.Rack
				if b.Rack == "" {
					rack[b.ID] = fmt.Sprint(b.ID)
				}
			}
			racks := func(rs []int32) int {
				seen := map[string]bool{}
				for _, id := range rs {
					seen[rack[id]] = true
				}
				return len(seen)
			}
			placed := 0
			for _, m := range plan.Moves {
				if len(m.To) != len(m.From) {
					t.Errorf("%s-%d: replication factor %d -> %d", m.Topic, m.Partition, len(m.From), len(m.To))
				}
				if len(slices.Compact(slices.Sorted(slices.Values(m.To)))) != len(m.To) {
					t.Errorf("%s-%d: a broker twice in %v", m.Topic, m.Partition, m.To)
				}
				if racks(m.To) < racks(m.From) {
					t.Errorf("%s-%d: %v -> %v loses rack spread", m.Topic, m.Partition, m.From, m.To)
				}
				for _, id := range m.To {
					if !slices.Contains(m.From, id) {
						placed++
					}
				}
				if w, ok := tc.want[m.Partition]; ok && !slices.Equal(m.To, w) {
					t.Errorf("partition %d -> %v, want %v", m.Partition, m.To, w)
				}
			}
			if tc.moves > 0 && len(plan.Moves) != tc.moves {
				t.Errorf("%d partitions move, want %d: %+v", len(plan.Moves), tc.moves, plan.Moves)
			}
			if tc.moves == 0 && tc.replicaMov == 0 && len(plan.Moves) != 0 {
				t.Errorf("moves %+v, want none", plan.Moves)
			}
			if placed != tc.replicaMov {
				t.Errorf("%d replicas placed on new brokers, want %d (minimal)", placed, tc.replicaMov)
			}
			var gotReplicas, gotLeaders []int
			for _, l := range plan.After {
				gotReplicas = append(gotReplicas, l.Replicas)
				gotLeaders = append(gotLeaders, l.Leaders)
			}
			if !slices.Equal(gotReplicas, tc.replicas) || !slices.Equal(gotLeaders, tc.leaders) {
				t.Errorf("after: replicas %v leaders %v, want %v %v", gotReplicas, gotLeaders, tc.replicas, tc.leaders)
			}
			if len(plan.Before) != len(tc.brokers) {
				t.Errorf("before lists %d brokers", len(plan.Before))
			}
			// Planning again from the result moves nothing.
			var next []Partition
			moved := map[int32][]int32{}
			for _, m := range plan.Moves {
				moved[m.Partition] = m.To
			}
			for _, p := range tc.parts {
				if to, ok := moved[p.Index]; ok {
					p.Replicas = to
				}
				next = append(next, p)
			}
			if again := Compute(tc.brokers, next); len(again.Moves) != 0 {
				t.Errorf("planning again moves %+v", again.Moves)
			}
		})
	}
}
