package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/report"
)

// groupReads pairs each client with the client whose topic it reads as the only member
// of a consumer group.
var groupReads = []struct{ reader, writer string }{
	{"java", "python"},
	{"kcat", "java"},
	{"python", "node"},
	{"node", "kcat"},
}

// testGroups: each client reads another client's topic in a group of its own, twice.
// The first run must read every record exactly once and leave the end offsets
// committed; the second must resume there and read nothing. The pairs share nothing
// and mostly wait (for JVM start-up, the initial rebalance delay), so they run in
// parallel.
func testGroups(t *testing.T, tgt *target, written map[string]*report.Summary) {
	adm := newAdmin(t, tgt.bootstrap)
	for _, g := range groupReads {
		t.Run(g.reader+"-reads-"+g.writer, func(t *testing.T) {
			t.Parallel()
			ws := written[g.writer]
			if ws == nil {
				t.Skipf("%s wrote nothing to read (see its own subtest)", g.writer)
			}
			r := clientNamed(t, g.reader)
			requireClient(t, r)
			topic, group := topicFor(g.writer), "interop-group-"+g.reader
			j := job{bootstrap: tgt.bootstrap, topic: topic, mode: "group", args: []string{"--group", group}}

			first := runClient(t, r, j)
			for _, err := range report.CheckGroup(partitions, ws.Produced, map[string][]report.Consumed{r.name: first.Consumed}) {
				t.Error(err)
			}
			expectCommittedAtEnd(t, adm, group, topic)

			second := runClient(t, r, j)
			if n := len(second.Consumed); n > 0 {
				c := second.Consumed[0]
				t.Errorf("second run of group %s read %d records, the first at %d/%d; want none: it must resume at the committed offsets",
					group, n, c.Partition, c.Offset)
			}
			expectCommittedAtEnd(t, adm, group, topic)
		})
	}
}

// testMixedGroup: the Java client and kcat join one group before anything is written,
// split the partitions, and together read what Python then writes: every record once,
// by the member that owns its partition.
func testMixedGroup(t *testing.T, tgt *target) {
	members := []client{clientNamed(t, "java"), clientNamed(t, "kcat")}
	writer := clientNamed(t, "python")
	for _, c := range append(slices.Clone(members), writer) {
		requireClient(t, c)
	}
	const topic, group = "interop-mixed", "interop-mixed"
	createTopics(t, tgt.bootstrap, partitions, topic)
	adm := newAdmin(t, tgt.bootstrap)

	j := job{bootstrap: tgt.bootstrap, topic: topic, mode: "group", args: []string{"--group", group}}
	runs := map[string]*clientRun{}
	for _, c := range members {
		runs[c.name] = startClient(t, c, j)
	}
	// Writing starts only once both members own partitions: then each record is read
	// in the one generation that has both, by the member owning its partition.
	d := waitForMembers(t, adm, group, topic, runs)
	t.Logf("group %s stable: protocol %s, %d members", group, d.Protocol, len(d.Members))

	w := runClient(t, writer, job{bootstrap: tgt.bootstrap, topic: topic, mode: "produce"})
	reads := map[string][]report.Consumed{}
	for name, r := range runs {
		reads[name] = r.wait(t).Consumed
	}
	for _, err := range report.CheckGroup(partitions, w.Produced, reads) {
		t.Error(err)
	}
	owner := map[int32]string{}
	for _, name := range slices.Sorted(maps.Keys(reads)) {
		if len(reads[name]) == 0 {
			t.Errorf("%s read nothing: the partitions were not split", name)
		}
		for _, c := range reads[name] {
			if o, ok := owner[c.Partition]; ok && o != name {
				t.Errorf("partition %d read by both %s and %s", c.Partition, o, name)
				break
			}
			owner[c.Partition] = name
		}
	}
	expectCommittedAtEnd(t, adm, group, topic)
}

// waitForMembers waits until group is Stable with one member per run, each owning at
// least one partition of topic, and returns the group; it fails the test if a member
// exits first.
func waitForMembers(t *testing.T, adm *kadm.Client, group, topic string, runs map[string]*clientRun) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		for _, r := range runs {
			if !r.running() {
				r.wait(t) // fails the test with the client's error, if any
				t.Fatalf("%s left the group before the others joined", r.c.name)
			}
		}
		d, why := describeMembers(adm, group, topic, len(runs))
		if why == "" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s never had %d members with partitions: %s", group, len(runs), why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeMembers returns the group and "" when it is Stable with n members that each
// own a partition of topic, else why not.
func describeMembers(adm *kadm.Client, group, topic string, n int) (kadm.DescribedGroup, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, err.Error()
	}
	d := ds[group]
	if d.Err != nil {
		return d, d.Err.Error()
	}
	if d.State != "Stable" || len(d.Members) != n {
		return d, fmt.Sprintf("state %s with %d members", d.State, len(d.Members))
	}
	for _, m := range d.Members {
		a, ok := m.Assigned.AsConsumer()
		owns := false
		for _, at := range a.Topics {
			owns = owns || (at.Topic == topic && len(at.Partitions) > 0)
		}
		if !ok || !owns {
			return d, fmt.Sprintf("member %s (%s) owns no partition of %s", m.MemberID, m.ClientID, topic)
		}
	}
	return d, ""
}

// expectCommittedAtEnd checks that group has committed the end offset of every
// partition of topic.
func expectCommittedAtEnd(t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	end, committed, err := endAndCommitted(adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(end, committed) {
		t.Errorf("group %s committed %v on %s, want the end offsets %v", group, committed, topic, end)
	}
}

// waitCommittedAtEnd waits until group has committed the end offset of every
// partition of topic.
func waitCommittedAtEnd(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration) {
	t.Helper()
	testcluster.Eventually(t, timeout, fmt.Sprintf("group %s to commit the end offsets of %s", group, topic), func() error {
		end, committed, err := endAndCommitted(adm, group, topic)
		if err != nil {
			return err
		}
		if !maps.Equal(committed, end) {
			return fmt.Errorf("committed %v, end %v", committed, end)
		}
		return nil
	})
}

// endAndCommitted returns topic's end offsets and group's committed offsets on it, by
// partition.
func endAndCommitted(adm *kadm.Client, group, topic string) (end, committed map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("offsets committed by %s: %w", group, err)
	}
	end, committed = map[int32]int64{}, map[int32]int64{}
	listed.Each(func(l kadm.ListedOffset) { end[l.Partition] = l.Offset })
	fetched.Each(func(r kadm.OffsetResponse) {
		if r.Topic == topic {
			committed[r.Partition] = r.At
		}
	})
	if len(end) == 0 {
		return nil, nil, errors.New("no partitions listed for " + topic)
	}
	return end, committed, nil
}

// newAdmin returns an admin client on bootstrap, closed when the test ends.
func newAdmin(t *testing.T, bootstrap ...string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}
