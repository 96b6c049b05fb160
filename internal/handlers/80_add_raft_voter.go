package handlers

// AddRaftVoter (key 80), v0-v1 (flexible; KIP-853): makes a node a controller
// voter, as `strata cluster add-controller` asks. The node must be a
// non-voting member of the quorum already (a running broker-only node) with a
// live broker session, caught up lately, Kafka's rule that a new voter has
// caught up first (controller/voters.go); otherwise REQUEST_TIMED_OUT, Kafka's
// answer for a replica it has not seen catch up ("lagging behind").
// INCONSISTENT_CLUSTER_ID for another cluster's id; then, as Kafka 4.4 checks a
// request before anything else, INVALID_REQUEST with Kafka's message for:
//   - no voter key: a negative node id or no (zero) directory id;
//   - no endpoint named as the controller listener, CONTROLLER, the name every
//     Strata node gives its controller listener (controllerlink.ObserverListener).
//     Its endpoint is taken, wherever it stands among the listeners.
//
// DUPLICATE_VOTER for a voter, REQUEST_TIMED_OUT while another voter change
// is in flight (Kafka's "previous voter change request"). Answered by the active controller (forwarded
// from other brokers) once the new configuration is committed, whatever
// AckWhenCommitted (v1) says. The directory id must be the one the node
// registered with (REQUEST_TIMED_OUT otherwise, as Kafka, which sees no
// replica of that id and directory catch up); the quorum records the voter
// with that directory (controller/voter_directory.go). `kafka-metadata-quorum
// add-controller` sends the directory id of the node's meta.properties,
// `strata cluster add-controller` the one DescribeQuorum shows for it.
// An addition the forwarding node had to send again answers success, not
// DUPLICATE_VOTER, when the node is a voter by then (see voterChange).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) addRaftVoter(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	if code, msg := h.checkClusterID(req.ClusterID); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return reply(resp)
	}
	if req.VoterID < 0 || req.VoterDirectoryID == [16]byte{} {
		msg := "Add voter request didn't include a valid voter"
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return reply(resp)
	}
	addr, ok := voterControllerAddr(req.Listeners)
	if !ok {
		msg := fmt.Sprintf("Add voter request didn't include the endpoint (%s) for the default listener %s",
			listenerList(req.Listeners), controllerlink.ObserverListener)
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return reply(resp)
	}
	resp.ErrorCode, resp.ErrorMessage = h.voterChange(ctx, r, kerr.DuplicateVoter.Code, func() error { return h.cluster.AddVoter(ctx, req.VoterID, req.VoterDirectoryID, addr) })
	return reply(resp)
}

// voterControllerAddr returns the host:port of the listener named as the
// controller listener. Names compare as Kafka normalises them (upper case), and
// of two with the same name the last counts, as Kafka reads them into a map.
func voterControllerAddr(ls []kmsg.AddRaftVoterRequestListener) (string, bool) {
	addr, ok := "", false
	for _, l := range ls {
		if strings.ToUpper(l.Name) == controllerlink.ObserverListener {
			addr, ok = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), true
		}
	}
	return addr, ok
}

// listenerList renders listeners as NAME://host:port, comma separated.
func listenerList(ls []kmsg.AddRaftVoterRequestListener) string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Name+"://"+net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))))
	}
	return strings.Join(out, ",")
}

// voterChange runs change on the active controller: locally when this node is
// it, else forwarded (forward retries while leadership moves, a removed
// leader handing over first, so the client sees the outcome on the new
// controller). done is the code that says the change is in place already
// (DUPLICATE_VOTER for an addition, VOTER_NOT_FOUND for a removal): after a
// resend it is success, since the earlier attempt, its outcome unknown, may
// have made the change (a removal committed as its controller was deposed).
func (h *Handlers) voterChange(ctx context.Context, r *protocol.Request, done int16, change func() error) (int16, *string) {
	if fwd, ok, resent := h.forward(ctx, r); ok {
		code, msg := voterChangeResult(fwd.Msg)
		if resent && code == done {
			return 0, nil
		}
		return code, msg
	}
	if err := change(); err != nil {
		var msg *string
		if !errors.Is(err, controller.ErrNotController) {
			s := err.Error()
			msg = &s
		}
		return controllerErrorCode(err), msg
	}
	return 0, nil
}

// checkClusterID answers INCONSISTENT_CLUSTER_ID for a cluster id, when one
// is given, that is not this cluster's.
func (h *Handlers) checkClusterID(clusterID *string) (int16, *string) {
	if clusterID != nil && *clusterID != h.cfg.ClusterID {
		msg := "cluster id " + *clusterID + " is not this cluster's"
		return kerr.InconsistentClusterID.Code, &msg
	}
	return 0, nil
}

func voterChangeResult(resp kmsg.Response) (int16, *string) {
	switch resp := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		return resp.ErrorCode, resp.ErrorMessage
	case *kmsg.RemoveRaftVoterResponse:
		return resp.ErrorCode, resp.ErrorMessage
	}
	return kerr.UnknownServerError.Code, nil
}
