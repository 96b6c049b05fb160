package server

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/protocol"
)

// A voter restarted at another controller address than the one the quorum
// records for it (another --advertised-controller-addr, or --controller-addr
// without one) hears from no leader: the leader sends to the recorded
// address. As Kafka's voters do when their listeners differ from the voter
// set's (KIP-853), it sends UpdateRaftVoter at start:
//
//  1. It reads its own entry in the latest Raft configuration it holds;
//     nothing is sent unless it is a voter there at another address, one
//     the other nodes can dial (not an unspecified host such as 0.0.0.0:
//     voterAddressUpdate).
//  2. It asks the other voters of that configuration in turn, on the
//     controller link, at leader epoch -1 (unknown). Each answers with the
//     leader it knows and that leader's epoch (FENCED_LEADER_EPOCH,
//     NOT_LEADER_OR_FOLLOWER); the next attempt goes to that leader at that
//     epoch, and the leader moves the voter (handlers/82_update_raft_voter.go).
//  3. It stops on success, and gives up, saying so, on VOTER_NOT_FOUND (the
//     quorum recorded another data directory for it: see voterRefusals),
//     INVALID_REQUEST or INCONSISTENT_CLUSTER_ID; anything else is tried again
//     until the node stops.

// maybeUpdateVoterAddress applies the steps above.
func (n *Node) maybeUpdateVoterAddress(ctx context.Context) {
	voters, err := n.ctrl.VoterAddrs(ctx)
	if err != nil {
		return
	}
	var others []string
	recorded := ""
	for _, v := range voters {
		if v.ID == n.cfg.NodeID {
			recorded = v.Addr
		} else {
			others = append(others, v.Addr)
		}
	}
	host, port, ok := voterAddressUpdate(recorded, n.raftAddr)
	if !ok || len(others) == 0 {
		return
	}
	n.log.Info("the quorum records this voter at another controller address: asking the leader to update it (UpdateRaftVoter)",
		"recorded", recorded, "controller_addr", n.raftAddr)
	level, _ := protocol.FeatureLevel("kraft.version")
	req := kmsg.NewPtrUpdateRaftVoterRequest()
	req.ClusterID = &n.clusterID
	req.VoterID, req.VoterDirectoryID = n.cfg.NodeID, n.directoryID
	req.Listeners = []kmsg.UpdateRaftVoterRequestListener{{Name: controllerlink.ObserverListener, Host: host, Port: port}}
	req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = level, level
	req.CurrentLeaderEpoch = -1
	leader, next := "", 0 // the leader an answer named, for the next attempt
	err = n.retry(ctx, "updating this voter's controller address", func() error {
		addr := leader
		if addr == "" {
			addr = others[next%len(others)]
			next++
		}
		leader = ""
		tryCtx, cancel := context.WithTimeout(ctx, registerTryTimeout)
		defer cancel()
		resp, err := n.link.RequestTo(tryCtx, addr, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.UpdateRaftVoterResponse)
		if l := r.CurrentLeader; l.LeaderID >= 0 && l.Host != "" {
			leader, req.CurrentLeaderEpoch = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), l.LeaderEpoch
			if l.LeaderID == n.cfg.NodeID {
				leader = n.raftAddr // the recorded address is the stale one
			}
		}
		err = kerr.ErrorForCode(r.ErrorCode)
		if errors.Is(err, kerr.VoterNotFound) || errors.Is(err, kerr.InvalidRequest) || errors.Is(err, kerr.InconsistentClusterID) {
			return permanent(err)
		}
		return err
	})
	switch {
	case err != nil && ctx.Err() != nil: // the node stops
		return
	case err != nil:
		n.log.Warn("could not update this voter's controller address in the quorum", "err", err)
		return
	}
	n.log.Info("the quorum records this voter at its controller address now", "controller_addr", n.raftAddr)
}

// voterAddressUpdate reports whether a voter the quorum records at recorded
// ("" when it is no voter there) and whose controller address is own asks
// the leader to record own instead, and own's host and port. An own address
// with an unspecified host (a listener on 0.0.0.0, :: or every interface,
// without --advertised-controller-addr) names no host another node can dial:
// the voter is reached at the recorded address, as before.
func voterAddressUpdate(recorded, own string) (host string, port uint16, ok bool) {
	host, portText, err := net.SplitHostPort(own)
	p, perr := strconv.ParseUint(portText, 10, 16)
	if recorded == "" || recorded == own || err != nil || perr != nil || host == "" {
		return "", 0, false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", 0, false
	}
	return host, uint16(p), true
}
