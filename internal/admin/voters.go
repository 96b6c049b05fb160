package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddVoterRequest builds the AddRaftVoter request that makes node id a
// controller voter. The request must carry the node's voter key (its id and
// directory id) and its controller listener (Kafka refuses one without
// either: INVALID_REQUEST), as kafka-metadata-quorum add-controller sends the
// new controller's directory id and listeners from its config and data dir;
// here they are read from DescribeQuorum, where a running broker-only node is
// an observer with its directory id and listener. A node the quorum does not
// know is an error wrapping kerr.InvalidRequest.
func AddVoterRequest(ctx context.Context, cl *kgo.Client, id int32) (*kmsg.AddRaftVoterRequest, error) {
	dq := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	resp, err := dq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("describing the quorum: %w", err)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID = id
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("describing the quorum: %w", err)
			}
			for _, r := range slices.Concat(p.CurrentVoters, p.Observers) {
				if r.ReplicaID == id {
					req.VoterDirectoryID = r.ReplicaDirectoryID
				}
			}
		}
	}
	for _, n := range resp.Nodes {
		if n.NodeID != id {
			continue
		}
		for _, l := range n.Listeners {
			rl := kmsg.NewAddRaftVoterRequestListener()
			rl.Name, rl.Host, rl.Port = l.Name, l.Host, l.Port
			req.Listeners = append(req.Listeners, rl)
		}
	}
	if len(req.Listeners) == 0 {
		return nil, fmt.Errorf("%w: node %d is not a member of the quorum: start it as a broker-only node (--roles broker) first", kerr.InvalidRequest, id)
	}
	return req, nil
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
