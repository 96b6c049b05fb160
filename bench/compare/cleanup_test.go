package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMadeSince(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after holdings
		want          holdings
	}{
		{"nothing new", holdings{topics: []string{"a"}, groups: []string{"g"}}, holdings{topics: []string{"a"}, groups: []string{"g"}}, holdings{}},
		{"new topics and groups", holdings{topics: []string{"a"}}, holdings{topics: []string{"a", "b", "c"}, groups: []string{"g"}},
			holdings{topics: []string{"b", "c"}, groups: []string{"g"}}},
		{"internal topics stay", holdings{}, holdings{topics: []string{"__consumer_offsets", "__share_group_state", "r1"}},
			holdings{topics: []string{"r1"}}},
		{"one gone meanwhile", holdings{topics: []string{"a", "b"}}, holdings{topics: []string{"b", "c"}}, holdings{topics: []string{"c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := madeSince(tc.before, tc.after)
			if !slices.Equal(got.topics, tc.want.topics) || !slices.Equal(got.groups, tc.want.groups) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fakeCluster is a one-broker kfake cluster with a one-partition topic, and
// an admin client of it; both close at the end of the test.
func fakeCluster(t *testing.T, topic string) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, kadm.NewClient(cl)
}

// TestScopeDeletesWhatItMade: a scope deletes exactly the topics and groups
// made after it opened, and the ones it reports are the ones gone.
func TestScopeDeletesWhatItMade(t *testing.T) {
	c, adm := fakeCluster(t, "kept")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	commit := func(group, topic string) {
		t.Helper()
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, group, o); err != nil {
			t.Fatalf("committing for %s: %v", group, err)
		}
	}
	commit("kept-group", "kept")
	sys := &system{name: "fake", seeds: c.ListenAddrs()}

	sc := openScope(ctx, "test", false, sys)
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, "made-1", "made-2"); err != nil {
		t.Fatal(err)
	}
	commit("made-group", "made-1")
	made := sc.close(ctx)[sys]
	if want := (holdings{topics: []string{"made-1", "made-2"}, groups: []string{"made-group"}}); !slices.Equal(made.topics, want.topics) || !slices.Equal(made.groups, want.groups) {
		t.Fatalf("deleted %+v, want %+v", made, want)
	}
	left, err := sys.holdings(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left.topics, []string{"kept"}) || !slices.Equal(left.groups, []string{"kept-group"}) {
		t.Fatalf("left %+v, want only what was there before the scope", left)
	}
}

// TestScopeReportsRetriedGroups: a group deleted on a retry (a member's
// leave still on its way) is reported once, beside the ones deleted at once.
func TestScopeReportsRetriedGroups(t *testing.T) {
	c, adm := fakeCluster(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys := &system{name: "fake", seeds: c.ListenAddrs()}
	sc := openScope(ctx, "test", false, sys)
	for _, g := range []string{"made-a", "made-b"} {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, g, o); err != nil {
			t.Fatalf("committing for %s: %v", g, err)
		}
	}
	// The first DeleteGroups answers that made-b is not empty yet (and, as
	// an answer only, that made-a went); the retry reaches the cluster.
	c.ControlKey(kmsg.DeleteGroups.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.(*kmsg.DeleteGroupsRequest).ResponseKind().(*kmsg.DeleteGroupsResponse)
		resp.SetVersion(req.GetVersion())
		for _, g := range req.(*kmsg.DeleteGroupsRequest).Groups {
			r := kmsg.NewDeleteGroupsResponseGroup()
			r.Group = g
			if g == "made-b" {
				r.ErrorCode = kerr.NonEmptyGroup.Code
			}
			resp.Groups = append(resp.Groups, r)
		}
		return resp, nil, true
	})
	made := sc.close(ctx)[sys]
	if want := []string{"made-a", "made-b"}; !slices.Equal(made.groups, want) {
		t.Fatalf("reported deleting groups %v, want %v", made.groups, want)
	}
	left, err := sys.holdings(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(left.groups, "made-b") {
		t.Fatalf("made-b left after the retry: %v", left.groups)
	}
}

func TestUnfreed(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{
		"data/logs/r1-0",                         // a partition of a deleted topic
		"data/logs/r1-0.1a2b.delete",             // Strata freeing one
		"kafka/node-1/data/r2-3.0c4f9e1a-delete", // Kafka freeing one
		"data/logs/r10-0", "data/logs/r1-x-0",    // other topics' partitions
	} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := unfreed(dir, []string{"r1"})
	slices.Sort(got)
	want := []string{"r1-0", "r1-0.1a2b.delete", "r2-3.0c4f9e1a-delete"}
	if !slices.Equal(got, want) {
		t.Fatalf("unfreed %v, want %v", got, want)
	}
	for _, d := range want {
		matches, _ := filepath.Glob(filepath.Join(dir, "*", "*", d))
		matches2, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*", d))
		for _, m := range append(matches, matches2...) {
			os.RemoveAll(m)
		}
	}
	if got := unfreed(dir, []string{"r1"}); len(got) != 0 {
		t.Fatalf("unfreed after removal: %v", got)
	}
}
