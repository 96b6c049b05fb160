package controllerlink

// Retrying while the active controller changes: an election, a paused or
// cut-off controller deposed, a removed voter handing over. Every caller that
// sends an admin request to the controller for someone else (a forwarded Kafka
// request, the console's forms) resends it on the new active controller, as a
// Kafka broker's forwarding retries until the request times out, instead of
// passing the change on as an error.

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request is sent again every RetryInterval, at most RetryAttempts times
// (about ten seconds).
const (
	RetryAttempts = 100
	RetryInterval = 100 * time.Millisecond
)

// Retry sends req through t, and sends it again while no controller answers
// (an error) or the answer says NOT_CONTROLLER (AnswersNotController), every
// RetryInterval, at most RetryAttempts more times, or until ctx ends. It
// returns the last answer, or the last error when none came, and whether req
// was sent more than once: an earlier attempt, its outcome unknown (a deposed
// controller may have committed it; an answer may have been lost), may have
// done what the last answer says is done already. waiting, when not nil, is
// called as each pause starts and the function it returns as it ends.
func Retry(ctx context.Context, t Transport, req kmsg.Request, waiting func() (done func())) (resp kmsg.Response, resent bool, err error) {
	tick := time.NewTicker(RetryInterval)
	defer tick.Stop()
	for i := 0; ; i++ {
		resent = i > 0
		resp, err = t.Request(ctx, req)
		if err == nil && !AnswersNotController(resp) {
			return resp, resent, nil
		}
		if i >= RetryAttempts || ctx.Err() != nil {
			return resp, resent, err
		}
		done := func() {}
		if waiting != nil {
			done = waiting()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		done()
	}
}

// Retrying is a Transport whose requests are retried (Retry) while the active
// controller changes.
type Retrying struct{ Transport }

// Request implements Transport.
func (r Retrying) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := Retry(ctx, r.Transport, req, nil)
	return resp, err
}

// AnswersNotController reports whether a controller's response says
// it is not the active controller (a node that lost the leadership, or a
// change refused while it did), anywhere in the response.
func AnswersNotController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return anyCode(r.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return anyCode(r.Topics, func(t kmsg.DeleteTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return anyCode(r.Topics, func(t kmsg.CreatePartitionsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.AlterConfigsResponse:
		return anyCode(r.Resources, func(x kmsg.AlterConfigsResponseResource) int16 { return x.ErrorCode })
	case *kmsg.IncrementalAlterConfigsResponse:
		return anyCode(r.Resources, func(x kmsg.IncrementalAlterConfigsResponseResource) int16 { return x.ErrorCode })
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == nc || slices.ContainsFunc(r.Topics, func(t kmsg.ElectLeadersResponseTopic) bool {
			return anyCode(t.Partitions, func(p kmsg.ElectLeadersResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == nc || slices.ContainsFunc(r.Topics, func(t kmsg.AlterPartitionAssignmentsResponseTopic) bool {
			return anyCode(t.Partitions, func(p kmsg.AlterPartitionAssignmentsResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.UnregisterBrokerResponse:
		return r.ErrorCode == nc
	case *kmsg.UnregisterControllerResponse:
		return r.ErrorCode == nc
	case *kmsg.AddRaftVoterResponse:
		return r.ErrorCode == nc
	case *kmsg.RemoveRaftVoterResponse:
		return r.ErrorCode == nc
	case *kmsg.DescribeQuorumResponse:
		// A node that does not lead the quorum answers NOT_LEADER_OR_FOLLOWER.
		return r.ErrorCode == nc || slices.ContainsFunc(r.Topics, func(t kmsg.DescribeQuorumResponseTopic) bool {
			return slices.ContainsFunc(t.Partitions, func(p kmsg.DescribeQuorumResponseTopicPartition) bool {
				return p.ErrorCode == kerr.NotLeaderForPartition.Code
			})
		})
	case *kmsg.CreateACLsResponse:
		return anyCode(r.Results, func(x kmsg.CreateACLsResponseResult) int16 { return x.ErrorCode })
	case *kmsg.DeleteACLsResponse:
		return anyCode(r.Results, func(x kmsg.DeleteACLsResponseResult) int16 { return x.ErrorCode })
	case *kmsg.AlterClientQuotasResponse:
		return anyCode(r.Entries, func(x kmsg.AlterClientQuotasResponseEntry) int16 { return x.ErrorCode })
	case *kmsg.CreateDelegationTokenResponse:
		return r.ErrorCode == nc
	case *kmsg.RenewDelegationTokenResponse:
		return r.ErrorCode == nc
	case *kmsg.ExpireDelegationTokenResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return anyCode(r.Results, func(x kmsg.AlterUserSCRAMCredentialsResponseResult) int16 { return x.ErrorCode })
	}
	return false
}

// anyCode reports whether code gives NOT_CONTROLLER for one of xs.
func anyCode[T any](xs []T, code func(T) int16) bool {
	return slices.ContainsFunc(xs, func(x T) bool { return code(x) == kerr.NotController.Code })
}
