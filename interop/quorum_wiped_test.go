package interop

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaMetadataQuorumWipedVoter runs Kafka 4.4's kafka-metadata-quorum
// against a cluster whose voter 3 came back under its node id on an empty
// data dir (docs/cluster.md, "A voter on an empty data dir"): --replication
// lists voter 3 with the directory id the quorum recorded, not the new one,
// while the new node waits and says what to run;
// `kafka-metadata-quorum remove-controller` with the old directory id takes
// the old incarnation out, the node then follows as an Observer with its new
// directory id, and AddRaftVoter (as `strata cluster add-controller` sends it)
// makes it a voter again with that id.
func TestKafkaMetadataQuorumWipedVoter(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("the metadata quorum is Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	// Nodes 1 and 2 only: node 3 will not serve clients while it waits.
	bs := []string{"--bootstrap-server", c.Node(1).KafkaAddr + "," + c.Node(2).KafkaAddr}
	n3 := c.Node(3)
	dir := func(n *testcluster.Node) string { return directoryID(t, n) }
	row := regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+-?\d+\s+-?\d+\s+\S+\s+\S+\s+(Leader|Follower|Observer)\s*$`)
	// waitMembers waits until --replication lists exactly these members,
	// each with its directory id and role (Voter: Leader or Follower).
	waitMembers := func(what string, want map[string][2]string) string {
		t.Helper()
		var out string
		testcluster.Eventually(t, 60*time.Second, what, func() error {
			out = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--replication")...)
			got := map[string][2]string{}
			for _, m := range row.FindAllStringSubmatch(out, -1) {
				role := m[3]
				if role != "Observer" {
					role = "Voter"
				}
				got[m[1]] = [2]string{m[2], role}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("members %v, want %v:\n%s", got, want, out)
			}
			return nil
		})
		return out
	}
	old := dir(n3)
	waitMembers("every voter's directory id to be recorded", map[string][2]string{
		"1": {dir(c.Node(1)), "Voter"}, "2": {dir(c.Node(2)), "Voter"}, "3": {old, "Voter"}})

	c.Stop(n3)
	if err := os.RemoveAll(n3.DataDir); err != nil {
		t.Fatal(err)
	}
	n3.Start()
	testcluster.Eventually(t, 60*time.Second, "the wiped node to say it is not voter 3", func() error {
		b, _ := os.ReadFile(n3.LogPath)
		if !strings.Contains(string(b), "this node is not controller voter 3") {
			return fmt.Errorf("not in %s yet", n3.LogPath)
		}
		return nil
	})
	waiting := waitMembers("voter 3 to keep its recorded directory id", map[string][2]string{
		"1": {dir(c.Node(1)), "Voter"}, "2": {dir(c.Node(2)), "Voter"}, "3": {old, "Voter"}})
	status := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--status")...)
	t.Logf("node 3 wiped and waiting:\n%s\n%s", status, waiting)

	removed := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "remove-controller",
		"--controller-id", "3", "--controller-directory-id", old)...)
	t.Logf("remove-controller: %s", removed)
	n3.WaitReady()
	newDir := dir(n3)
	if newDir == old {
		t.Fatal("the wiped data dir kept its directory id")
	}
	observer := waitMembers("node 3 to follow as an observer with its new directory id", map[string][2]string{
		"1": {dir(c.Node(1)), "Voter"}, "2": {dir(c.Node(2)), "Voter"}, "3": {newDir, "Observer"}})
	t.Logf("after remove-controller:\n%s", observer)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.Client()
	req, err := admin.AddVoterRequest(ctx, cl, 3, c.Node(3).ControllerAddr)
	if err != nil {
		t.Fatal(err)
	}
	// As `strata cluster add-controller` does: again while node 3, just
	// started, is refused as not caught up yet.
	resp, err := admin.AddVoterWhenCaughtUp(ctx, 100*time.Millisecond, func(ctx context.Context) (*kmsg.AddRaftVoterResponse, error) {
		return req.RequestWith(ctx, cl)
	}, nil)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddRaftVoter(3): %v %+v", err, resp)
	}
	again := waitMembers("node 3 to be a voter with its new directory id", map[string][2]string{
		"1": {dir(c.Node(1)), "Voter"}, "2": {dir(c.Node(2)), "Voter"}, "3": {newDir, "Voter"}})
	status = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--status")...)
	if !strings.Contains(status, newDir) {
		t.Errorf("--status does not show voter 3's new directory id %s:\n%s", newDir, status)
	}
	t.Logf("after add-controller:\n%s\n%s", status, again)
}
