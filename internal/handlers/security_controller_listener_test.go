package handlers

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// TestDescribeControllersNeedsAlterOnTheCluster: on the controller listener,
// DescribeCluster is answered only to a principal with ALTER on the cluster,
// as a Kafka controller answers it (a broker asks DESCRIBE), else
// CLUSTER_AUTHORIZATION_FAILED: a principal with only DESCRIBE on the cluster
// does not learn the controllers' addresses. It used to.
func TestDescribeControllersNeedsAlterOnTheCluster(t *testing.T) {
	h := &Handlers{cfg: Config{ClusterID: "c", NodeID: 1,
		Authorizer: allowAnonymous(kmsg.ACLOperationDescribe, resCluster, acl.ClusterName)},
		cluster: votersCluster{
			imageCluster: imageCluster{img: metadata.NewImage()},
			voters:       []controller.QuorumMember{{ID: 1, Addr: "127.0.0.11:9093", Voter: true}},
		}}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(1)
	req.EndpointType = controllerEndpoint
	resp := h.describeControllers(context.Background(), &protocol.ConnInfo{}, &protocol.Request{Key: 60, Version: 1, Msg: req}).Msg.(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Brokers) != 0 {
		t.Errorf("DescribeCluster on the controller listener without ALTER on the cluster: %v, %d controllers listed; want CLUSTER_AUTHORIZATION_FAILED and none",
			kerr.ErrorForCode(resp.ErrorCode), len(resp.Brokers))
	}
}
