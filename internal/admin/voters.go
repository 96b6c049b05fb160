package admin

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controllerlink"
)

// AddVoterRequest builds the AddRaftVoter request that makes node id, whose
// controller listener is at controllerAddr (host:port, the node's advertised
// controller address), a controller voter. The request must carry the node's
// voter key (its id and directory id) and its controller listener (Kafka
// refuses one without either: INVALID_REQUEST), as kafka-metadata-quorum
// add-controller sends the new controller's directory id and listeners from
// its config and data dir. The directory id is read from DescribeQuorum, where
// a running broker-only node is an observer; its listener is not there, since
// DescribeQuorum, as Kafka's, lists the endpoints of voters only. A node the
// quorum does not list is an error wrapping kerr.InvalidRequest, as is an
// address that is not host:port.
func AddVoterRequest(ctx context.Context, cl *kgo.Client, id int32, controllerAddr string) (*kmsg.AddRaftVoterRequest, error) {
	host, portText, err := net.SplitHostPort(controllerAddr)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil || host == "" {
		return nil, fmt.Errorf("%w: controller address %q: want host:port", kerr.InvalidRequest, controllerAddr)
	}
	_, p, err := describeQuorum(ctx, cl)
	if err != nil {
		return nil, err
	}
	members := slices.Concat(p.CurrentVoters, p.Observers)
	i := slices.IndexFunc(members, func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState) bool { return r.ReplicaID == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: node %d is not a member of the quorum: start it as a broker-only node (--roles broker) first", kerr.InvalidRequest, id)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, members[i].ReplicaDirectoryID
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = controllerlink.ObserverListener, host, uint16(port)
	req.Listeners = []kmsg.AddRaftVoterRequestListener{l}
	return req, nil
}

// RemoveVoterRequest builds the RemoveRaftVoter request that takes node id
// out of the controller voters. The request must carry the voter key, the
// node id and the directory id the quorum recorded for it (Kafka refuses one
// without a directory id: INVALID_REQUEST), as kafka-metadata-quorum
// remove-controller sends its --controller-directory-id; here it is read from
// DescribeQuorum. A node that is not a voter is an error wrapping
// kerr.VoterNotFound; a voter whose directory the quorum has not recorded yet
// (it has not run since it became a voter) one wrapping kerr.InvalidRequest.
func RemoveVoterRequest(ctx context.Context, cl *kgo.Client, id int32) (*kmsg.RemoveRaftVoterRequest, error) {
	_, p, err := describeQuorum(ctx, cl)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(p.CurrentVoters, func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState) bool { return r.ReplicaID == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: node %d is not a controller voter", kerr.VoterNotFound, id)
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, p.CurrentVoters[i].ReplicaDirectoryID
	if req.VoterDirectoryID == [16]byte{} {
		return nil, fmt.Errorf("%w: the quorum has not recorded voter %d's data directory yet: it is recorded once the node runs", kerr.InvalidRequest, id)
	}
	return req, nil
}

// describeQuorum asks for the metadata quorum and returns the answer and its
// one partition.
func describeQuorum(ctx context.Context, cl *kgo.Client) (*kmsg.DescribeQuorumResponse, *kmsg.DescribeQuorumResponseTopicPartition, error) {
	dq := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	resp, err := dq.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("describing the quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, nil, fmt.Errorf("describing the quorum: %d topics in the answer, want the metadata partition", len(resp.Topics))
	}
	p := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("describing the quorum: %w", err)
	}
	return resp, p, nil
}

// AddVoterLagging reports whether an AddRaftVoter answer refuses the node
// because it has not caught up yet: REQUEST_TIMED_OUT saying "lagging
// behind", Kafka's words and Strata's (a node just started has not
// heartbeated yet). Other REQUEST_TIMED_OUT answers (an unknown node or
// directory) do not get better by waiting.
func AddVoterLagging(resp *kmsg.AddRaftVoterResponse) bool {
	return resp.ErrorCode == kerr.RequestTimedOut.Code && resp.ErrorMessage != nil &&
		strings.Contains(*resp.ErrorMessage, "lagging behind")
}

// AddVoterWhenCaughtUp sends an AddRaftVoter request with add, again every
// interval while the answer is AddVoterLagging, until ctx ends; lagging, if
// set, is told each such answer's message. It returns the last answer: a
// lagging one when ctx ended first, also in the middle of a request.
func AddVoterWhenCaughtUp(ctx context.Context, interval time.Duration, add func(context.Context) (*kmsg.AddRaftVoterResponse, error), lagging func(msg string)) (*kmsg.AddRaftVoterResponse, error) {
	var last *kmsg.AddRaftVoterResponse
	for {
		resp, err := add(ctx)
		if err != nil && last != nil && ctx.Err() != nil {
			return last, nil
		}
		if err != nil || !AddVoterLagging(resp) {
			return resp, err
		}
		last = resp
		if lagging != nil {
			lagging(*resp.ErrorMessage)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, nil
		case <-t.C:
		}
	}
}
