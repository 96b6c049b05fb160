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

// TestVoterAddressUpdate: a voter asks the quorum to record its controller
// address only where the other nodes can dial it. One whose listener's host is
// unspecified (--controller-addr 0.0.0.0:9093 or :9093 without
// --advertised-controller-addr, reached at the --controllers address) keeps
// the recorded address: the other voters dialing 0.0.0.0 or :: reach their
// own host, and a rolling upgrade moved every such voter there. Before,
// each asked to be moved to its wildcard address.
func TestVoterAddressUpdate(t *testing.T) {
	for _, tt := range []struct {
		recorded, own string
		want          bool
	}{
		{"", "127.0.0.13:9093", false},
		{"127.0.0.13:9093", "127.0.0.13:9093", false},
		{"127.0.0.13:9093", "127.0.0.13:19093", true},
		{"ctrl3:9093", "10.0.0.3:9093", true},
		{"ctrl3:9093", "0.0.0.0:9093", false},
		{"ctrl3:9093", "[::]:9093", false},
		{"ctrl3:9093", ":9093", false},
		{"ctrl3:9093", "no port", false},
	} {
		if _, _, got := voterAddressUpdate(tt.recorded, tt.own); got != tt.want {
			t.Errorf("recorded %q, own %q: update %v, want %v", tt.recorded, tt.own, got, tt.want)
		}
	}
}
