package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/metadata"
)

// nameVoter is controller.Config.NameVoter on the controller listener's
// stream layer.
func nameVoter(addr raft.ServerAddress, id int32, dir metadata.UUID) raft.ServerAddress {
	return raft.ServerAddress(controllerlink.VoterAddr(string(addr), controllerlink.VoterKey{NodeID: id, DirectoryID: dir}))
}

// refusalNote is how often a refused voter key is logged again.
const refusalNote = time.Minute

// voterRefusals logs the Raft connections the controller listener refuses
// because they are for another voter key than self's (a node restarted under
// a voter's id on an empty data dir, see controller/voter_directory.go): what
// happened and what to run, at most once a refusalNote per key.
type voterRefusals struct {
	log  *slog.Logger
	self controllerlink.VoterKey
	// raftAddr is this node's advertised controller address, which
	// add-controller names.
	raftAddr string
	mu       sync.Mutex
	last     map[controllerlink.VoterKey]time.Time
}

func (v *voterRefusals) refused(want controllerlink.VoterKey, remote net.Addr) {
	v.mu.Lock()
	now := time.Now()
	if at, ok := v.last[want]; ok && now.Sub(at) < refusalNote {
		v.mu.Unlock()
		return
	}
	if v.last == nil {
		v.last = make(map[controllerlink.VoterKey]time.Time)
	}
	v.last[want] = now
	v.mu.Unlock()
	if want.NodeID != v.self.NodeID {
		v.log.Warn("refused a Raft connection for another node's controller voter: this address is this node's",
			"voter", want.NodeID, "from", remote.String())
		return
	}
	v.log.Warn(fmt.Sprintf("this node is not controller voter %[1]d: the quorum recorded voter %[1]d with another data directory "+
		"(this data dir is empty or replaced, and the voter's Raft log and votes were lost with the old one). "+
		"It refuses the quorum's Raft connections for that voter, so it neither votes nor counts towards a commit as it. "+
		"To make this node a voter again, run `strata cluster remove-controller %[1]d` (removes the old incarnation; "+
		"a broker stays an observer and this node then follows the metadata log), then `strata cluster add-controller %[1]d --controller-addr %[2]s` "+
		"once `kafka-metadata-quorum describe --replication` lists node %[1]d as an observer", want.NodeID, v.raftAddr),
		"node", want.NodeID, "voter_directory_id", metadata.UUID(want.DirectoryID),
		"this_directory_id", metadata.UUID(v.self.DirectoryID), "from", remote.String())
}

// registerController reports a controller-only node's data directory to the
// active controller (ControllerRegistration on the controller link), which
// records it as the voter's directory; a node with the broker role reports its
// directory when it registers as a broker. It retries until answered, and
// gives up, saying so, when the quorum recorded another directory for this
// voter (the node then refuses the quorum's connections, voterRefusals).
func (n *Node) registerController(ctx context.Context) {
	req := kmsg.NewPtrControllerRegistrationRequest()
	req.ControllerID, req.IncarnationID = n.cfg.NodeID, n.directoryID
	if host, portStr, err := net.SplitHostPort(n.raftAddr); err == nil {
		port, _ := strconv.Atoi(portStr)
		l := kmsg.NewControllerRegistrationRequestListener()
		l.Name, l.Host, l.Port = controllerlink.ObserverListener, host, uint16(port)
		req.Listeners = append(req.Listeners, l)
	}
	for _, name := range slices.Sorted(maps.Keys(metadata.SupportedFeatures)) {
		f := kmsg.NewControllerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, 1, int16(metadata.SupportedFeatures[name])
		req.Features = append(req.Features, f)
	}
	err := n.retry(ctx, "registering the controller", func() error {
		resp, err := n.link.Request(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.ControllerRegistrationResponse)
		err = kerr.ErrorForCode(r.ErrorCode)
		if errors.Is(err, kerr.InvalidVoterKey) {
			return permanent(err)
		}
		return err
	})
	switch {
	case err == nil:
		n.log.Info("controller registered: the quorum knows this voter's data directory", "directory_id", n.directoryID)
	case errors.Is(err, kerr.InvalidVoterKey):
		n.log.Warn("the quorum recorded another data directory for this controller voter", "directory_id", n.directoryID, "err", err)
	}
}
