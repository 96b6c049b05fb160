package handlers

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// imageCluster is a Cluster that only holds an image; DescribeCluster needs no more.
type imageCluster struct {
	Cluster
	img *metadata.Image
}

func (c imageCluster) Image() *metadata.Image { return c.img }
func (c imageCluster) LeaderID() int32        { return 1 }

func TestDescribeCluster(t *testing.T) {
	var recs []metadata.Record
	for _, id := range []int32{1, 2, 3} {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "h", Port: 9090 + id, Fenced: id == 3})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handlers{cfg: Config{ClusterID: "c", NodeID: 1}, cluster: imageCluster{img: img}}
	for _, tc := range []struct {
		name         string
		version      int16
		endpointType int8
		fenced       bool
		wantErr      int16
		wantBrokers  map[int32]bool // id -> IsFenced
	}{
		{"v0 lists live brokers", 0, 0, false, 0, map[int32]bool{1: false, 2: false}},
		{"v1 broker endpoint", 1, 1, false, 0, map[int32]bool{1: false, 2: false}},
		{"v1 asks for controllers", 1, 2, false, kerr.MismatchedEndpointType.Code, nil},
		{"v2 without fenced brokers", 2, 1, false, 0, map[int32]bool{1: false, 2: false}},
		{"v2 with fenced brokers", 2, 1, true, 0, map[int32]bool{1: false, 2: false, 3: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(tc.version)
			req.EndpointType, req.IncludeFencedBrokers = tc.endpointType, tc.fenced
			resp := h.describeCluster(context.Background(), nil, &protocol.Request{Key: 60, Version: tc.version, Msg: req}).Msg.(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != tc.wantErr {
				t.Fatalf("error code %d, want %d", resp.ErrorCode, tc.wantErr)
			}
			if resp.EndpointType != brokerEndpoint {
				t.Errorf("endpoint type %d, want %d", resp.EndpointType, brokerEndpoint)
			}
			got := map[int32]bool{}
			for _, b := range resp.Brokers {
				got[b.NodeID] = b.IsFenced
			}
			if len(got) != len(tc.wantBrokers) {
				t.Fatalf("brokers %v, want %v", got, tc.wantBrokers)
			}
			for id, fenced := range tc.wantBrokers {
				if f, ok := got[id]; !ok || f != fenced {
					t.Errorf("brokers %v, want %v", got, tc.wantBrokers)
				}
			}
			if tc.wantErr == 0 && (resp.ClusterID != "c" || resp.ControllerID != 1) {
				t.Errorf("cluster %q controller %d, want c and 1", resp.ClusterID, resp.ControllerID)
			}
		})
	}
}
