package interop

import (
	"testing"
	"time"
)

// TestClusterWalkthrough runs the Walkthrough of docs/cluster.md (see
// walkthrough), the operator's runbook: five nodes on 127.0.0.21-25 grow from
// three, move partitions with kafka-reassign-partitions and back with its
// rollback plan (log dirs named), rebalance, move a controller voter, retire
// a broker and replace a dead one, and read back every record.
func TestClusterWalkthrough(t *testing.T) {
	walkthrough{
		page:    "cluster.md",
		ports:   []string{"9092", "8080", "9093"},
		hosts:   []string{"127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24", "127.0.0.25"},
		tools:   []string{"curl"},
		timeout: 10 * time.Minute,
	}.run(t)
}
