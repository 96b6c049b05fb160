package server

import (
	"context"
	"testing"

	"github.com/strata-stream/strata/internal/wait"
)

// TestVoterRestartsAtAnotherAddress: a voter restarted at another controller
// address tells the quorum with UpdateRaftVoter (KIP-853), as Kafka's voters
// do when their listeners differ from the voter set's: the active controller
// moves it there, every voter records the new address, and the node finishes
// starting. Before, the quorum kept sending to the old address, and the node,
// hearing from no leader, never finished starting.
func TestVoterRestartsAtAnotherAddress(t *testing.T) {
	c := startCluster(t, 3)
	c.stop(2)
	c.cfgs[2].ControllerAddr = freeAddr(t)
	if err := c.start(2); err != nil {
		t.Fatal(err)
	}
	moved := c.cfgs[2].ControllerAddr
	wait.For(t, "every voter to record node 3 at "+moved, func() bool {
		for _, n := range c.nodes {
			voters, err := n.ctrl.VoterAddrs(context.Background())
			if err != nil || len(voters) != 3 || voters[2].Addr != moved {
				return false
			}
		}
		return true
	})
}
