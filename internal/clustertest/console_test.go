package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestGroupsListAcrossCoordinators: every node's console lists every group of
// the cluster with its lag, whichever node coordinates it. The list used to
// read the node's own coordinator, so each node showed only its own groups.
func TestGroupsListAcrossCoordinators(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	const topic = "console-groups"
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, minISR2)
	cl := c.Client(kgo.DefaultProduceTopic(topic))
	for i := range 5 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := c.Admin()
	var groups []string
	for i := range 8 {
		g := fmt.Sprintf("console-g%d", i)
		groups = append(groups, g)
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, g, o); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	coordinators := map[int32]bool{}
	for _, g := range groups {
		coordinators[listed[g].Coordinator] = true
	}
	if len(coordinators) < 2 {
		t.Fatalf("all %d groups are coordinated by one node (%v): the test needs two coordinators at least", len(groups), coordinators)
	}
	for _, n := range c.Nodes() {
		body := getPage(t, "http://"+n.HTTPAddr+"/console/groups")
		for _, g := range groups {
			row := regexp.MustCompile(`(?s)<tr data-group="` + g + `">.*?</tr>`).FindString(body)
			if row == "" {
				t.Errorf("node %d's console does not list %s (coordinated by node %d)", n.ID, g, listed[g].Coordinator)
				continue
			}
			if !regexp.MustCompile(`data-field="lag">3<`).MatchString(row) {
				t.Errorf("node %d's console shows %s without its lag of 3:\n%s", n.ID, g, row)
			}
		}
	}
}

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return string(b)
}
