package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The lines below are what kcat 1.7.1 writes at its default verbosity.
func TestMemberFollowsKcat(t *testing.T) {
	end := map[int32]int64{0: 80, 1: 50, 2: 70}
	done := map[int32]int64{0: 80, 1: 50, 2: 70}
	for _, c := range []struct {
		name      string
		lines     []string
		committed map[int32]int64
		behind    string // a fragment of the answer; "" for caught up
		history   [][]int32
	}{
		{
			name:      "not joined",
			lines:     []string{"% Waiting for group rebalance"},
			committed: done,
			behind:    "first assignment",
		},
		{
			name: "caught up",
			lines: []string{
				"% Waiting for group rebalance",
				"% Group g rebalanced (memberid rdkafka-fd26): assigned: t [0], t [1], t [2]",
				"% Reached end of topic t [1] at offset 50",
				"% Reached end of topic t [2] at offset 70",
				"% Reached end of topic t [0] at offset 80",
			},
			committed: done,
			history:   [][]int32{{0, 1, 2}},
		},
		{
			name: "one partition short of its end",
			lines: []string{
				"% Group g rebalanced (memberid m): assigned: t [0], t [1], t [2]",
				"% Reached end of topic t [1] at offset 50",
				"% Reached end of topic t [2] at offset 69",
				"% Reached end of topic t [0] at offset 80",
			},
			committed: done,
			behind:    "partition 2 not read",
			history:   [][]int32{{0, 1, 2}},
		},
		{
			name: "group has not committed another member's partition",
			lines: []string{
				"% Group g rebalanced (memberid m): assigned: t [2]",
				"% Reached end of topic t [2] at offset 70",
			},
			committed: map[int32]int64{0: 80, 2: 70},
			behind:    "committed partition 1",
			history:   [][]int32{{2}},
		},
		{
			name: "a new assignment must reach the end again",
			lines: []string{
				"% Group g rebalanced (memberid m): assigned: t [0], t [1], t [2]",
				"% Reached end of topic t [0] at offset 80",
				"% Reached end of topic t [1] at offset 50",
				"% Reached end of topic t [2] at offset 70",
				"% Group g rebalanced (memberid m): revoked: t [0], t [1], t [2]",
				"% Group g rebalanced (memberid m): assigned: t [1], t [2]",
				"% Reached end of topic t [2] at offset 70",
			},
			committed: done,
			behind:    "partition 1 not read",
			history:   [][]int32{{0, 1, 2}, {1, 2}},
		},
		{
			name: "cooperative protocol",
			lines: []string{
				"% Group g rebalanced: incremental assignment of 2 partition(s) (memberid m, COOPERATIVE rebalance protocol): t [0], t [1]",
				"% Group g rebalanced: incremental revoke of 1 partition(s) (memberid m, COOPERATIVE rebalance protocol): t [0]",
				"% Reached end of topic t [1] at offset 50",
			},
			committed: done,
			history:   [][]int32{{0, 1}},
		},
		{
			name: "other topics are ignored",
			lines: []string{
				"% Group g rebalanced (memberid m): assigned: other [0], t [1]",
				"% Reached end of topic other [0] at offset 0",
			},
			committed: done,
			behind:    "partition 1 not read",
			history:   [][]int32{{1}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMember("t")
			for _, l := range c.lines {
				m.observe(l)
			}
			got := m.behind(end, c.committed, 200)
			if (got == "") != (c.behind == "") || !strings.Contains(got, c.behind) {
				t.Errorf("behind = %q, want %q", got, c.behind)
			}
			if h := m.history(); !slices.EqualFunc(h, c.history, slices.Equal) {
				t.Errorf("history = %v, want %v", h, c.history)
			}
		})
	}
}

func TestMemberWaitsForEnoughRecords(t *testing.T) {
	m := newMember("t")
	m.observe("% Group g rebalanced (memberid m): assigned: t [0]")
	m.observe("% Reached end of topic t [0] at offset 0")
	for _, want := range []struct {
		end    int64
		behind bool
	}{{0, true}, {199, true}, {200, false}} {
		t.Run(fmt.Sprint(want.end), func(t *testing.T) {
			m.observe(fmt.Sprintf("%% Reached end of topic t [0] at offset %d", want.end))
			got := m.behind(map[int32]int64{0: want.end}, map[int32]int64{0: want.end}, 200)
			if (got != "") != want.behind {
				t.Fatalf("topic of %d records, want 200: behind = %q", want.end, got)
			}
		})
	}
}
