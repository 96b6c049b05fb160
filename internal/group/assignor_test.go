package group

import (
	"fmt"
	"strings"
	"testing"
)

func fmtAssignment(members []string, a map[string]partSet) string {
	var parts []string
	for _, m := range members {
		var ps []string
		for _, tp := range a[m].sorted() {
			ps = append(ps, fmt.Sprintf("%s%d", tp.topic, tp.partition))
		}
		parts = append(parts, m+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

func TestAssignors(t *testing.T) {
	both := []string{"a", "b"}
	tests := []struct {
		name       string
		assignor   string
		members    []string
		subscribed map[string][]string
		partitions map[string]int32
		previous   map[string]partSet
		want       string
	}{
		{"range co-partitions", rangeAssignor, []string{"m1", "m2"},
			map[string][]string{"m1": both, "m2": both}, map[string]int32{"a": 3, "b": 3}, nil,
			"m1:a0,a1,b0,b1 m2:a2,b2"},
		{"range more members than partitions", rangeAssignor, []string{"m1", "m2", "m3"},
			map[string][]string{"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, map[string]int32{"a": 2}, nil,
			"m1:a0 m2:a1 m3:"},
		{"uniform even", uniformAssignor, []string{"m1", "m2"},
			map[string][]string{"m1": both, "m2": both}, map[string]int32{"a": 3, "b": 1}, nil,
			"m1:a0,a2 m2:a1,b0"},
		{"uniform sticky when a member joins", uniformAssignor, []string{"m1", "m2", "m3"},
			map[string][]string{"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, map[string]int32{"a": 6},
			map[string]partSet{
				"m1": {{"a", 0}: {}, {"a", 2}: {}, {"a", 4}: {}},
				"m2": {{"a", 1}: {}, {"a", 3}: {}, {"a", 5}: {}},
			},
			"m1:a0,a2 m2:a1,a3 m3:a4,a5"},
		{"uniform drops vanished partitions", uniformAssignor, []string{"m1"},
			map[string][]string{"m1": {"a"}}, map[string]int32{"a": 2},
			map[string]partSet{"m1": {{"a", 0}: {}, {"a", 5}: {}, {"b", 0}: {}}},
			"m1:a0,a1"},
		{"uniform heterogeneous", uniformAssignor, []string{"m1", "m2"},
			map[string][]string{"m1": {"a"}, "m2": both}, map[string]int32{"a": 2, "b": 2}, nil,
			"m1:a0,a1 m2:b0,b1"},
		{"uniform no subscribers", uniformAssignor, []string{"m1"},
			map[string][]string{"m1": nil}, map[string]int32{}, nil, "m1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := assignSpec{members: tt.members, subscribed: tt.subscribed, partitions: tt.partitions, previous: tt.previous}
			got := assign(tt.assignor, spec)
			if s := fmtAssignment(tt.members, got); s != tt.want {
				t.Fatalf("got  %s\nwant %s", s, tt.want)
			}
			// Every subscribed partition is assigned exactly once.
			seen := partSet{}
			for _, m := range tt.members {
				for tp := range got[m] {
					if seen.has(tp) {
						t.Fatalf("%v assigned twice", tp)
					}
					seen[tp] = struct{}{}
				}
			}
			for tp := range seen {
				if tp.partition >= tt.partitions[tp.topic] {
					t.Fatalf("%v does not exist", tp)
				}
			}
		})
	}
}
