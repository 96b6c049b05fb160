package handlers

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
)

// unavailableReassignments is a planCluster whose controller call for
// AlterPartitionReassignments fails as a whole.
type unavailableReassignments struct {
	*planCluster
	err error
}

func (c unavailableReassignments) AlterPartitionReassignments(context.Context, []controller.Reassignment) ([]error, error) {
	return nil, c.err
}

// TestReassignmentWholeRequestErrorsNameEachPartition: an
// AlterPartitionReassignments refused as a whole (not authorized, or the
// controller failing it) carries the code at the top and on every partition
// asked about, as Kafka's AlterPartitionReassignmentsRequest.getErrorResponse
// does: Kafka's AdminClient counts the partitions of such an answer and, with
// none, reports "The server returned too less results" instead of the error.
func TestReassignmentWholeRequestErrorsNameEachPartition(t *testing.T) {
	request := func() *kmsg.AlterPartitionAssignmentsRequest {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 5000
		for _, topic := range []string{"t", "t_x"} {
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			for _, p := range []int32{0, 1} {
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Partition, rp.Replicas = p, []int32{2, 1}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	denied := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationDescribe, resCluster, "kafka-cluster")})
	failing := newAdminHandlers(t)
	failing.cluster = unavailableReassignments{failing.cluster.(waitingCluster).Cluster.(*planCluster), &metadata.KafkaError{Code: kerr.RequestTimedOut.Code, Msg: "no quorum"}}
	for _, tc := range []struct {
		name string
		h    *Handlers
		want *kerr.Error
	}{
		{"not authorized", denied, kerr.ClusterAuthorizationFailed},
		{"the controller failing it", failing, kerr.RequestTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := serve(t, tc.h, request()).(*kmsg.AlterPartitionAssignmentsResponse)
			if resp.ErrorCode != tc.want.Code {
				t.Errorf("top-level %v, want %v", kerr.ErrorForCode(resp.ErrorCode), tc.want)
			}
			var got []string
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got = append(got, fmt.Sprintf("%s-%d %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode)))
				}
			}
			want := fmt.Sprint([]string{"t-0 " + tc.want.Error(), "t-1 " + tc.want.Error(), "t_x-0 " + tc.want.Error(), "t_x-1 " + tc.want.Error()})
			if fmt.Sprint(got) != want {
				t.Errorf("partitions %v, want %v", got, want)
			}
		})
	}
}
