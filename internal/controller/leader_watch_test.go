package controller

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestLeaderWatchSteps: a follower voter probes a silent leader, lowers its
// election timeouts only once the leader's address refused connections and
// the lease is over, and restores them once a leader is heard from.
func TestLeaderWatchSteps(t *testing.T) {
	const (
		suspect = 300 * time.Millisecond
		lower   = 500 * time.Millisecond
	)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	type tick struct {
		in      watchInput
		refused bool // a probe of the leader was refused before this tick
		want    watchAction
	}
	follower := func(leader string, silent time.Duration) watchInput {
		return watchInput{leader: raft.ServerID(leader), silent: silent, voter: true}
	}
	tests := []struct {
		name  string
		ticks []tick
	}{
		{"a leader in contact is left alone", []tick{
			{in: follower("1", ms(50)), want: watchNothing},
			{in: follower("1", ms(299)), want: watchNothing},
		}},
		{"a silent leader is probed until proven dead or heard from", []tick{
			{in: follower("1", ms(300)), want: watchProbe},
			{in: follower("1", ms(400)), want: watchProbe}, // the probe was accepted: try again
			{in: follower("1", ms(20)), want: watchNothing},
		}},
		{"refused, then the lease runs out: lower", []tick{
			{in: follower("1", ms(300)), want: watchProbe},
			{in: follower("1", ms(400)), refused: true, want: watchNothing},
			{in: follower("1", ms(500)), want: watchLower},
			{in: follower("1", ms(600)), want: watchNothing},
			{in: follower("", ms(700)), want: watchNothing}, // electing
			{in: follower("2", ms(10)), want: watchRestore},
			{in: follower("2", ms(10)), want: watchNothing},
		}},
		{"this node wins the election: restore", []tick{
			{in: follower("1", ms(350)), refused: true, want: watchNothing},
			{in: follower("1", ms(550)), want: watchLower},
			{in: watchInput{leader: raft.ServerID("3"), isLeader: true, voter: true}, want: watchRestore},
		}},
		{"the refused leader is heard from again: restore", []tick{
			{in: follower("1", ms(350)), refused: true, want: watchNothing},
			{in: follower("1", ms(550)), want: watchLower},
			{in: follower("1", ms(30)), want: watchRestore},
		}},
		{"a refusal is forgotten once the leader is heard from", []tick{
			{in: follower("1", ms(350)), refused: true, want: watchNothing},
			{in: follower("1", ms(10)), want: watchNothing},
			{in: follower("1", ms(550)), want: watchProbe},
		}},
		{"a refusal of the old leader says nothing of a new one", []tick{
			{in: follower("1", ms(350)), refused: true, want: watchNothing},
			{in: follower("2", ms(550)), want: watchProbe},
		}},
		{"a non-voter never elects", []tick{
			{in: watchInput{leader: raft.ServerID("1"), silent: time.Second}, want: watchNothing},
		}},
		{"no leader known: nothing to prove", []tick{
			{in: follower("", time.Second), want: watchNothing},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w leaderWatch
			for i, tk := range tt.ticks {
				if tk.refused {
					w.refusedBy(tk.in.leader)
				}
				if got := w.step(tk.in, suspect, lower); got != tk.want {
					t.Fatalf("tick %d (%+v): action %d, want %d", i, tk.in, got, tk.want)
				}
			}
		})
	}
}
