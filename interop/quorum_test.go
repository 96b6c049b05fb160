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
// in heartbeats, and reach the leader's with nothing new to apply) and -1 for
// the controller-only voter, which sends none.
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
			// A broker that has applied everything is at the leader's
			// end: Raft's own entries count, as Kafka's control records.
			if known && m[4] != "0" {
				return fmt.Errorf("node %s lags by %s:\n%s", m[1], m[4], out)
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

// TestKafkaMetadataQuorumAddController grows the quorum of three combined
// nodes with Kafka 4.4's `kafka-metadata-quorum add-controller`, as a Kafka
// operator does: broker-only node 4 joins as an observer, and a
// controller.properties names its node id, controller listener and data dir,
// from whose meta.properties the tool reads the directory id. The tool's
// request for a node outside the quorum, and for node 4 with another data
// directory, gets Kafka's answer (REQUEST_TIMED_OUT: not caught up), one with
// another address INVALID_REQUEST, and a file without the controller listener
// is refused by the tool. A file whose controller listener is named otherwise
// than CONTROLLER, the name of Strata's controller listener, gets Kafka's
// INVALID_REQUEST ("didn't include the endpoint ... for the default
// listener"); one with two controller listeners, CONTROLLER second, makes node
// 4 a voter at CONTROLLER's address (describe --status and --replication); a
// second time gets DUPLICATE_VOTER.
func TestKafkaMetadataQuorumAddController(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("the metadata quorum is Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	n4 := c.AddBroker()
	bc := []string{"--bootstrap-controller", c.Node(1).ControllerAddr}
	testcluster.Eventually(t, 30*time.Second, "node 4 to be an observer", func() error {
		status := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bc, "describe", "--status")...)
		if observers := regexp.MustCompile(`CurrentObservers:\s*\[(.*)\]`).FindStringSubmatch(status); observers == nil || !strings.Contains(observers[1], `"id": 4`) {
			return fmt.Errorf("%s", status)
		}
		return nil
	})

	dir := t.TempDir()
	// config writes a controller.properties; names are its
	// controller.listener.names, listeners its listeners.
	config := func(name string, node int32, names, listeners, dataDir string) string {
		path := filepath.Join(dir, name)
		props := fmt.Sprintf("process.roles=controller\nnode.id=%d\ncontroller.listener.names=%s\nlisteners=%s\nmetadata.log.dir=%s\n",
			node, names, listeners, dataDir)
		if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	addController := func(configPath string) (kafkatools.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), kafkatools.DefaultTimeout)
		defer cancel()
		return kafkatools.Run(ctx, "kafka-metadata-quorum", append(bc, "--command-config", configPath, "add-controller")...)
	}
	// Another data dir of node 4: a meta.properties with a directory id
	// that is not node 4's.
	otherDir := filepath.Join(dir, "other")
	if err := os.MkdirAll(otherDir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=4\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n", testcluster.ClusterID)
	if err := os.WriteFile(filepath.Join(otherDir, "meta.properties"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	listener := "CONTROLLER://" + n4.ControllerAddr
	for _, tc := range []struct{ name, config, want string }{
		{"a node outside the quorum", config("node9.properties", 9, "CONTROLLER", listener, n4.DataDir), "TimeoutException: not caught up"},
		{"another data directory", config("otherdir.properties", 4, "CONTROLLER", listener, otherDir), "TimeoutException: not caught up"},
		{"another address", config("otheraddr.properties", 4, "CONTROLLER", "CONTROLLER://127.0.0.1:1", n4.DataDir), "InvalidRequestException: invalid request: node 4 is at"},
		{"no controller listener", config("nolistener.properties", 4, "CONTROLLER", "PLAINTEXT://"+n4.ControllerAddr, n4.DataDir), "Cannot find information about controller listener name"},
		{"another controller listener name", config("othername.properties", 4, "OTHER", "OTHER://"+n4.ControllerAddr, n4.DataDir),
			"InvalidRequestException: Add voter request didn't include the endpoint (OTHER://" + n4.ControllerAddr + ") for the default listener CONTROLLER"},
	} {
		res, err := addController(tc.config)
		if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, tc.want) {
			t.Fatalf("add-controller for %s: %v %+v", tc.name, err, res)
		}
		t.Logf("add-controller for %s:\n%s", tc.name, res.Stderr)
	}

	// Two controller listeners, CONTROLLER second: the quorum takes its
	// endpoint, not the first one's.
	controllerProps := config("controller.properties", 4, "OTHER,CONTROLLER", "OTHER://127.0.0.1:1,"+listener, n4.DataDir)
	for _, path := range []string{controllerProps, filepath.Join(n4.DataDir, "meta.properties")} {
		if b, err := os.ReadFile(path); err == nil {
			t.Logf("%s:\n%s", path, b)
		}
	}
	// Kafka's tool asks once; as an operator would, ask again while node 4
	// is refused as not caught up yet ("lagging behind").
	var out string
	testcluster.Eventually(t, 30*time.Second, "add-controller to add node 4", func() error {
		res, err := addController(controllerProps)
		switch {
		case err == nil && res.ExitCode == 0:
			out = res.Stdout
			return nil
		case err == nil && strings.Contains(res.Stdout+res.Stderr, "lagging behind"):
			return fmt.Errorf("%s", res.Stderr)
		}
		t.Fatalf("add-controller: %v %+v", err, res)
		return nil
	})
	expectContains(t, out, fmt.Sprintf("Added controller 4 with directory id %s and endpoints: OTHER://127.0.0.1:1, CONTROLLER://%s", directoryID(t, n4), n4.ControllerAddr))
	t.Logf("add-controller:\n%s", out)

	// Once add-controller has answered, the very next describe lists node 4
	// as a voter with its directory id, as Kafka's voter set holds it.
	voter4 := `"id": 4, "directoryId": "` + directoryID(t, n4) + `", "endpoints": ["CONTROLLER://` + n4.ControllerAddr + `"]`
	status := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bc, "describe", "--status")...)
	if voters := regexp.MustCompile(`CurrentVoters:\s*\[(.*)\]`).FindStringSubmatch(status); voters == nil || strings.Count(voters[1], `"id": `) != 4 || !strings.Contains(voters[1], voter4) {
		t.Fatalf("--status right after add-controller does not list voters 1-4 with node 4 at its directory and controller listener:\n%s", status)
	}
	row := regexp.MustCompile(`(?m)^4\s+` + regexp.QuoteMeta(directoryID(t, n4)) + `\s+\d+\s+\d+\s+\S+\s+\S+\s+(Leader|Follower)\s*$`)
	var replication string
	testcluster.Eventually(t, 30*time.Second, "--replication to show node 4 as a voter", func() error {
		replication = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bc, "describe", "--replication")...)
		if !row.MatchString(replication) {
			return fmt.Errorf("%s", replication)
		}
		return nil
	})
	t.Logf("%s\n%s", status, replication)

	res, err := addController(controllerProps)
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "DuplicateVoterException") {
		t.Fatalf("add-controller again: %v %+v", err, res)
	}
	t.Logf("add-controller again:\n%s", res.Stderr)
}
