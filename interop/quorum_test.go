package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaMetadataQuorum describes the metadata quorum of a cluster with two
// combined nodes, a controller-only voter and a broker-only observer using
// Kafka 4.4's kafka-metadata-quorum: --status names the leader, its epoch and
// every voter and observer; --replication lists each member's role and data
// directory id, with the log end offsets of the brokers (which report theirs
// in heartbeats) and -1 for the controller-only voter, which sends none.
func TestKafkaMetadataQuorum(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("the metadata quorum is Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3, testcluster.WithControllerOnly(3))
	c.AddBroker()
	bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap(), ",")}

	var status string
	testcluster.Eventually(t, 30*time.Second, "--status to list voters 1-3 and observer 4", func() error {
		status = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--status")...)
		voters := regexp.MustCompile(`CurrentVoters:\s*\[(.*)\]`).FindStringSubmatch(status)
		observers := regexp.MustCompile(`CurrentObservers:\s*\[(.*)\]`).FindStringSubmatch(status)
		if voters == nil || observers == nil {
			return fmt.Errorf("%s", status)
		}
		for _, id := range []string{"1", "2", "3"} {
			if !strings.Contains(voters[1], `"id": `+id) {
				return fmt.Errorf("voter %s missing:\n%s", id, status)
			}
		}
		if !strings.Contains(observers[1], `"id": 4`) || strings.Contains(observers[1], `"id": 1`) {
			return fmt.Errorf("observers:\n%s", status)
		}
		return nil
	})
	leader := regexp.MustCompile(`LeaderId:\s*(\d+)`).FindStringSubmatch(status)
	if leader == nil {
		t.Fatalf("no LeaderId:\n%s", status)
	}
	expectContains(t, status, "LeaderEpoch:")
	expectContains(t, status, "HighWatermark:")

	// Every broker reports its metadata offset within a heartbeat or two.
	row := regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+(-?\d+)\s+(-?\d+)\s+\S+\s+\S+\s+(Leader|Follower|Observer)\s*$`)
	testcluster.Eventually(t, 30*time.Second, "--replication to show each member's progress", func() error {
		out := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--replication")...)
		roles := map[string]string{}
		for _, m := range row.FindAllStringSubmatch(out, -1) {
			roles[m[1]] = m[5]
			known := m[3] != "-1"
			if (m[1] == "3" && m[1] != leader[1]) == known {
				return fmt.Errorf("node %s log end offset %s:\n%s", m[1], m[3], out)
			}
			// Every member's directory id is its data dir's: a voter's as
			// the quorum recorded it (the controller-only voter 3 reports
			// its own), the observer's from its broker registration.
			if id, _ := strconv.Atoi(m[1]); m[2] != directoryID(t, c.Node(int32(id))) {
				return fmt.Errorf("node %s directory id %s, want its data dir's:\n%s", m[1], m[2], out)
			}
		}
		want := map[string]string{"1": "Follower", "2": "Follower", "3": "Follower", "4": "Observer"}
		want[leader[1]] = "Leader"
		for id, role := range want {
			if roles[id] != role {
				return fmt.Errorf("node %s is %q, want %s:\n%s", id, roles[id], role, out)
			}
		}
		t.Logf("%s\n%s", status, out)
		return nil
	})

	// UnregisterController: a voter's registration is its membership, so
	// unregistering voter 3 is refused; remove-controller --unregister
	// removes it and then unregisters it, both reported done.
	ctx, cancel := context.WithTimeout(context.Background(), kafkatools.DefaultTimeout)
	defer cancel()
	res, err := kafkatools.Run(ctx, "kafka-cluster", append([]string{"unregister-controller", "--id", "3"}, bs...)...)
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "remove it from the voters first") {
		t.Fatalf("unregister-controller of voter 3: %v %+v", err, res)
	}
	out := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "remove-controller", "--controller-id", "3",
		"--controller-directory-id", directoryID(t, c.Node(3)), "--unregister")...)
	expectContains(t, out, "Removed KRaft controller 3")
	expectContains(t, out, "Unregistered KRaft controller 3")
	t.Logf("unregister-controller --id 3 (a voter):\n%s%s\nremove-controller --unregister:\n%s", res.Stdout, res.Stderr, out)
	status = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bs, "describe", "--status")...)
	if voters := regexp.MustCompile(`CurrentVoters:\s*\[(.*)\]`).FindStringSubmatch(status); voters == nil || strings.Contains(voters[1], `"id": 3`) {
		t.Fatalf("voter 3 still listed after remove-controller:\n%s", status)
	}
}

// directoryID is the directory id in node n's data dir.
func directoryID(t *testing.T, n *testcluster.Node) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.DataDir, "directory.id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
