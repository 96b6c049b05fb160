package admin

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupNotFoundIsDead: DescribeGroups v6 answers GROUP_ID_NOT_FOUND for a
// group id with no classic group; DescribeGroups and GroupLag take it as a
// Dead group with no members (GroupLag with the lag of what is committed under
// the id), and leave every other answer as it was.
func TestGroupNotFoundIsDead(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(group string, at int64) {
		t.Helper()
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, group, o); err != nil {
			t.Fatalf("committing for %s: %v", group, err)
		}
	}
	commit("classic", 3) // an Empty classic group: described as it is
	// Offsets committed under "kip848", which the broker describes as Kafka 4.4
	// and Strata do a KIP-848 group (DescribeGroups v6: not a classic group).
	commit("kip848", 1)
	c.ControlKey(int16(kmsg.DescribeGroups), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeGroupsRequest)
		if !slices.Contains(req.Groups, "kip848") {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group, sg.State, sg.ErrorCode = g, "Dead", kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil, true
	})

	raw, err := adm.DescribeGroups(ctx, "none")
	if err != nil {
		t.Fatal(err)
	}
	if g := raw["none"]; !errors.Is(g.Err, kerr.GroupIDNotFound) {
		t.Fatalf("kfake answered %+v, not GROUP_ID_NOT_FOUND: the test does not reach the rule", g)
	}

	for _, groups := range [][]string{{"none", "kip848"}, {"classic"}} {
		described, err := DescribeGroups(ctx, adm, groups...)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range groups {
			g := described[name]
			want := "Dead"
			if name == "classic" {
				want = "Empty" // as the broker answered
			}
			if g.Err != nil || g.State != want || len(g.Members) != 0 {
				t.Fatalf("DescribeGroups %s: %+v, want %s with no members and no error", name, g, want)
			}
		}
	}

	lags, err := GroupLag(ctx, adm, "none", "kip848")
	if err != nil {
		t.Fatal(err)
	}
	classic, err := GroupLag(ctx, adm, "classic")
	if err != nil {
		t.Fatal(err)
	}
	lags["classic"] = classic["classic"]
	for _, tc := range []struct {
		group, state string
		lag          int64 // on t-0; -1: no lag listed
	}{{"none", "Dead", -1}, {"kip848", "Dead", 4}, {"classic", "Empty", 2}} {
		l := lags[tc.group]
		if err := l.Error(); err != nil || l.State != tc.state || len(l.Members) != 0 {
			t.Fatalf("GroupLag %s: %+v, want %s with no members and no error", tc.group, l, tc.state)
		}
		got := int64(-1)
		if ml, ok := l.Lag.Lookup("t", 0); ok {
			got = ml.Lag
		}
		if got != tc.lag {
			t.Fatalf("GroupLag %s: lag %d on t-0, want %d", tc.group, got, tc.lag)
		}
	}
}
