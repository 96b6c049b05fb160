package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaListenerChecksClusterAndNode: the node's Kafka listener answers
// ApiVersions v5 naming the cluster and node its own Metadata (v13, as Kafka
// 4.4's clients ask) names, as a Kafka 4.4 or franz-go client sends them once
// it has metadata, and REBOOTSTRAP_REQUIRED to a client that meant another
// cluster or node.
func TestKafkaListenerChecksClusterAndNode(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	meta := rawRequest(t, n.KafkaAddr(), &kmsg.MetadataRequest{Version: 13}).(*kmsg.MetadataResponse)
	if meta.ErrorCode != 0 || meta.ClusterID == nil || len(meta.Brokers) != 1 {
		t.Fatalf("metadata: error %d, cluster %v, brokers %+v", meta.ErrorCode, meta.ClusterID, meta.Brokers)
	}
	cluster, node := *meta.ClusterID, meta.Brokers[0].NodeID
	other := "AAAAAAAAAAAAAAAAAAAAAA"
	for _, tt := range []struct {
		name    string
		cluster *string
		node    int32
		want    int16
	}{
		{"as its metadata names it", &cluster, node, 0},
		{"no cluster or node", nil, -1, 0},
		{"another cluster", &other, node, kerr.RebootstrapRequired.Code},
		{"another node", &cluster, node + 1, kerr.RebootstrapRequired.Code},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 5, "strata-test", "1"
		req.ClusterID, req.NodeID = tt.cluster, tt.node
		resp := rawRequest(t, n.KafkaAddr(), req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != tt.want || (tt.want == 0) != (len(resp.ApiKeys) > 0) {
			t.Errorf("%s: error %d with %d keys, want error %d", tt.name, resp.ErrorCode, len(resp.ApiKeys), tt.want)
		}
	}
}
