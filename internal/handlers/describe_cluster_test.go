package handlers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
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

// votersCluster is a Cluster that knows its controller voters.
type votersCluster struct {
	imageCluster
	voters []controller.QuorumMember
}

func (c votersCluster) VoterAddrs(context.Context) ([]controller.QuorumMember, error) {
	return c.voters, nil
}

// TestDescribeControllers: DescribeCluster on the controller listener lists
// the voters at their controller addresses as endpoint type 2, and refuses
// a request for brokers (MISMATCHED_ENDPOINT_TYPE; INVALID_REQUEST on v0,
// which asks for brokers) or an unknown type. As Kafka's AuthHelper, a refusal
// carries the schema's default endpoint type (1); it answered 2, and
// MISMATCHED_ENDPOINT_TYPE on v0.
func TestDescribeControllers(t *testing.T) {
	h := &Handlers{cfg: Config{ClusterID: "c", NodeID: 1}, cluster: votersCluster{
		imageCluster: imageCluster{img: metadata.NewImage()},
		voters:       []controller.QuorumMember{{ID: 1, Addr: "127.0.0.11:9093", Voter: true}, {ID: 3, Addr: "127.0.0.13:9093", Voter: true}},
	}}
	for _, tc := range []struct {
		name         string
		version      int16
		endpointType int8
		wantErr      int16
		want         []string
	}{
		{"controllers", 1, controllerEndpoint, 0, []string{"1 127.0.0.11:9093", "3 127.0.0.13:9093"}},
		{"brokers", 1, brokerEndpoint, kerr.MismatchedEndpointType.Code, nil},
		{"an unknown type", 1, 7, kerr.UnsupportedEndpointType.Code, nil},
		{"v0", 0, brokerEndpoint, kerr.InvalidRequest.Code, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(tc.version)
			req.EndpointType = tc.endpointType
			resp := h.describeControllers(context.Background(), nil, &protocol.Request{Key: 60, Version: tc.version, Msg: req}).Msg.(*kmsg.DescribeClusterResponse)
			wantType := int8(controllerEndpoint)
			if tc.wantErr != 0 {
				wantType = kmsg.NewDescribeClusterResponse().EndpointType
			}
			if resp.ErrorCode != tc.wantErr || resp.EndpointType != wantType {
				t.Fatalf("error code %d, endpoint type %d; want %d, %d", resp.ErrorCode, resp.EndpointType, tc.wantErr, wantType)
			}
			var got []string
			for _, b := range resp.Brokers {
				got = append(got, fmt.Sprintf("%d %s:%d", b.NodeID, b.Host, b.Port))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("controllers %v, want %v", got, tc.want)
			}
			if tc.wantErr == 0 && (resp.ClusterID != "c" || resp.ControllerID != 1) {
				t.Errorf("cluster %q controller %d, want c and 1", resp.ClusterID, resp.ControllerID)
			}
		})
	}
}

// TestControllerListenerVersions: the controller listener lists the keys a
// Kafka 4.4 controller answers clients with that Strata serves there, at the
// Kafka listener's versions, and nothing else; UpdateRaftVoter, which only a
// controller serves, at Kafka's v0 (before, it was not served).
func TestControllerListenerVersions(t *testing.T) {
	broker := map[int16]protocol.VersionRange{}
	for _, v := range Versions() {
		broker[v.Key] = v
	}
	var keys []int16
	for _, v := range ControllerListenerVersions() {
		keys = append(keys, v.Key)
		if v.Key == 82 { // UpdateRaftVoter: a Kafka controller's only, not a broker's
			if v != (protocol.VersionRange{Key: 82, Min: 0, Max: 0}) {
				t.Errorf("UpdateRaftVoter listed as %+v on the controller listener, want v0, Kafka 4.4's", v)
			}
			continue
		}
		if v != broker[v.Key] {
			t.Errorf("key %d listed as %+v on the controller listener, %+v on the Kafka listener", v.Key, v, broker[v.Key])
		}
	}
	slices.Sort(keys)
	if want := []int16{29, 30, 31, 32, 33, 44, 55, 57, 60, 64, 80, 81, 82, 94}; !slices.Equal(keys, want) {
		t.Errorf("controller listener keys %v, want %v", keys, want)
	}
}
