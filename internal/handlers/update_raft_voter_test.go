package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// updateVoterCluster is a quorum member that records the UpdateVoter calls
// that reach it.
type updateVoterCluster struct {
	*planCluster
	leader  controller.RaftLeader
	leading bool
	err     error // UpdateVoter's answer
	updated []string
}

func (c *updateVoterCluster) IsLeader() bool                    { return c.leading }
func (c *updateVoterCluster) RaftLeader() controller.RaftLeader { return c.leader }
func (c *updateVoterCluster) UpdateVoter(_ context.Context, id int32, dir metadata.UUID, addr string, kraftOK bool) error {
	c.updated = append(c.updated, fmt.Sprintf("%d/%v@%s kraft %v", id, dir, addr, kraftOK))
	return c.err
}

// TestUpdateRaftVoter: UpdateRaftVoter (82), on the controller listener and
// the controller link, is checked in Kafka 4.4's order
// (KafkaRaftClient.handleUpdateVoterRequest): the cluster id
// (INCONSISTENT_CLUSTER_ID), the leader epoch against this node's
// (FENCED_LEADER_EPOCH below, UNKNOWN_LEADER_EPOCH above), leadership
// (NOT_LEADER_OR_FOLLOWER), then INVALID_REQUEST for no voter key, no
// endpoint of the controller listener or an invalid kraft.version range,
// before the controller sees it; a range that leaves out the finalized
// kraft.version reaches it as such. Every answer names the leader this node
// knows, with its epoch and controller listener. Before, key 82 was served
// nowhere.
func TestUpdateRaftVoter(t *testing.T) {
	dir7 := metadata.UUID{7}
	other := "nope"
	listener := func(name string) []kmsg.UpdateRaftVoterRequestListener {
		return []kmsg.UpdateRaftVoterRequestListener{{Name: name, Host: "127.0.0.1", Port: 29999}}
	}
	for _, tt := range []struct {
		name      string
		leading   bool
		err       error
		clusterID *string
		epoch     int32
		voter     int32
		dir       metadata.UUID
		listeners []kmsg.UpdateRaftVoterRequestListener
		min, max  int16
		want      *kerr.Error
		updated   string
	}{
		{"another cluster", true, nil, &other, 4, 7, dir7, listener("CONTROLLER"), 0, 1, kerr.InconsistentClusterID, ""},
		{"an older epoch", true, nil, nil, 4, -1, dir7, nil, 0, 1, kerr.FencedLeaderEpoch, ""},
		{"a newer epoch", true, nil, nil, 6, -1, dir7, nil, 0, 1, kerr.UnknownLeaderEpoch, ""},
		{"not the leader", false, nil, nil, 5, -1, dir7, nil, 0, 1, kerr.NotLeaderForPartition, ""},
		{"a negative node id", true, nil, nil, 5, -1, dir7, listener("CONTROLLER"), 0, 1, kerr.InvalidRequest, ""},
		{"no directory id", true, nil, nil, 5, 7, metadata.UUID{}, listener("CONTROLLER"), 0, 1, kerr.InvalidRequest, ""},
		{"no controller listener", true, nil, nil, 5, 7, dir7, listener("BROKER"), 0, 1, kerr.InvalidRequest, ""},
		{"a negative kraft.version", true, nil, nil, 5, 7, dir7, listener("CONTROLLER"), -1, 1, kerr.InvalidRequest, ""},
		{"an empty kraft.version range", true, nil, nil, 5, 7, dir7, listener("CONTROLLER"), 1, 0, kerr.InvalidRequest, ""},
		{"kraft.version 0 only", true, nil, nil, 5, 7, dir7, listener("controller"), 0, 0, nil,
			fmt.Sprintf("7/%v@127.0.0.1:29999 kraft false", dir7)},
		{"a voter key and its controller listener", true, nil, nil, 5, 7, dir7, listener("CONTROLLER"), 0, 1, nil,
			fmt.Sprintf("7/%v@127.0.0.1:29999 kraft true", dir7)},
		{"the controller lost the lead", true, controller.ErrNotController, nil, 5, 7, dir7, listener("CONTROLLER"), 1, 1, kerr.NotLeaderForPartition,
			fmt.Sprintf("7/%v@127.0.0.1:29999 kraft true", dir7)},
		{"not a voter", true, controller.ErrVoterNotFound, nil, 5, 7, dir7, listener("CONTROLLER"), 1, 1, kerr.VoterNotFound,
			fmt.Sprintf("7/%v@127.0.0.1:29999 kraft true", dir7)},
	} {
		for _, on := range []string{"controller listener", "controller link"} {
			t.Run(tt.name+" on the "+on, func(t *testing.T) {
				vc := &updateVoterCluster{planCluster: &planCluster{img: metadata.NewImage()},
					leader: controller.RaftLeader{ID: 2, Epoch: 5, Addr: "127.0.0.2:9093"}, leading: tt.leading, err: tt.err}
				h := New(Config{ClusterID: "c", NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, vc, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
				req := kmsg.NewPtrUpdateRaftVoterRequest()
				req.ClusterID, req.CurrentLeaderEpoch, req.VoterID, req.VoterDirectoryID, req.Listeners = tt.clusterID, tt.epoch, tt.voter, tt.dir, tt.listeners
				req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = tt.min, tt.max
				handler := h.ControllerListenerHandler()
				if on == "controller link" {
					handler = h.LinkHandler()
				}
				r := handler.Handle(context.Background(), &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req})
				resp, ok := r.Msg.(*kmsg.UpdateRaftVoterResponse)
				if !ok {
					t.Fatalf("answer %T, want an UpdateRaftVoterResponse", r.Msg)
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
					t.Errorf("got %v, want %v", err, tt.want)
				}
				if l := resp.CurrentLeader; l.LeaderID != 2 || l.LeaderEpoch != 5 || l.Host != "127.0.0.2" || l.Port != 9093 {
					t.Errorf("current leader %+v, want node 2 in epoch 5 at 127.0.0.2:9093", l)
				}
				got := ""
				if len(vc.updated) > 0 {
					got = vc.updated[0]
				}
				if got != tt.updated || len(vc.updated) > 1 {
					t.Errorf("controller asked %q, want %q", vc.updated, tt.updated)
				}
			})
		}
	}
}
