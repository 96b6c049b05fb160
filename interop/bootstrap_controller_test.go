package interop

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaToolsBootstrapController runs Kafka 4.4's tools with
// --bootstrap-controller (KIP-919) against the controller listener of a
// controller-only voter (node 3) and of a combined node: the quorum, the
// cluster id and the controllers' endpoints, the features, broker configs and
// ACLs (refused without an authorizer, as on the Kafka listener); then it
// removes the controller-only voter with remove-controller --unregister.
func TestKafkaToolsBootstrapController(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("the controller listener is Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3, testcluster.WithControllerOnly(3))
	for _, n := range []*testcluster.Node{c.Node(3), c.Node(1)} {
		bc := []string{"--bootstrap-controller", n.ControllerAddr}
		t.Run(fmt.Sprintf("node %d", n.ID), func(t *testing.T) {
			var status string
			testcluster.Eventually(t, 30*time.Second, "describe --status to list voters 1-3", func() error {
				status = kafkatools.MustRun(t, "kafka-metadata-quorum", append(bc, "describe", "--status")...)
				voters := regexp.MustCompile(`CurrentVoters:\s*\[(.*)\]`).FindStringSubmatch(status)
				if voters == nil || strings.Count(voters[1], `"id": `) != 3 {
					return fmt.Errorf("%s", status)
				}
				return nil
			})
			expectContains(t, status, "LeaderId:")

			expectContains(t, kafkatools.MustRun(t, "kafka-cluster", append([]string{"cluster-id"}, bc...)...),
				"Cluster ID: "+testcluster.ClusterID)
			endpoints := kafkatools.MustRun(t, "kafka-cluster", append([]string{"list-endpoints"}, bc...)...)
			for _, v := range []*testcluster.Node{c.Node(1), c.Node(2), c.Node(3)} {
				host, port, _ := strings.Cut(v.ControllerAddr, ":")
				if !regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+%s\s+%s\s+\S+\s+controller\s*$`, v.ID, regexp.QuoteMeta(host), port)).MatchString(endpoints) {
					t.Errorf("list-endpoints lacks controller %d at %s:\n%s", v.ID, v.ControllerAddr, endpoints)
				}
			}
			expectContains(t, kafkatools.MustRun(t, "kafka-features", append(bc, "describe")...), "Feature: transaction.version")
			expectContains(t, kafkatools.MustRun(t, "kafka-configs", append(bc, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "1")...),
				"message.max.bytes=")
			res, err := kafkatools.Run(t.Context(), "kafka-acls", append(bc, "--list")...)
			if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "SecurityDisabledException") {
				t.Errorf("kafka-acls --list without an authorizer: %v %+v", err, res)
			}
		})
	}

	// The controller-only voter removed and unregistered through node 1's
	// controller listener; the quorum then lists two voters.
	bc := []string{"--bootstrap-controller", c.Node(1).ControllerAddr}
	out := kafkatools.MustRun(t, "kafka-metadata-quorum", append(bc, "remove-controller", "--controller-id", "3",
		"--controller-directory-id", directoryID(t, c.Node(3)), "--unregister")...)
	expectContains(t, out, "Removed KRaft controller 3")
	expectContains(t, out, "Unregistered KRaft controller 3")
	testcluster.Eventually(t, 30*time.Second, "list-endpoints to list controllers 1 and 2", func() error {
		out := kafkatools.MustRun(t, "kafka-cluster", append([]string{"list-endpoints"}, bc...)...)
		if strings.Count(out, " controller") != 2 || regexp.MustCompile(`(?m)^3\s`).MatchString(out) {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
}
