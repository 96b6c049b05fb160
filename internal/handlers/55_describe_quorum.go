package handlers

// DescribeQuorum (key 55), v0-v2 (flexible; KIP-595, KIP-853): the metadata
// quorum, as `kafka-metadata-quorum describe --status|--replication` shows it.
// Answered by the active controller (forwarded from other brokers) for the one
// partition __cluster_metadata-0; any other partition in the request gets
// UNKNOWN_TOPIC_OR_PARTITION, and a node that cannot reach the active
// controller NOT_LEADER_OR_FOLLOWER, as Kafka's quorum does.
//   - LeaderEpoch is the Raft term; offsets are Raft log indexes.
//   - A member's LogEndOffset is the leader's own last index, or the metadata
//     offset a broker reported in its last heartbeat; -1 (and timestamps -1)
//     when unknown, as for a controller-only voter.
//   - v1 adds the timestamps; v2 the Nodes, error messages and directory ids.
//     Nodes are the voters' endpoints (each voter's controller listener, named
//     CONTROLLER as in Kafka) and only theirs: Kafka 4.4's leader knows no
//     endpoint of an observer (RaftUtil.singletonDescribeQuorumResponse). A
//     voter's directory id is the one the quorum recorded for it (zero until
//     recorded, see controller/voter_directory.go), an observer's that of its
//     broker registration.
//   - Observers are the non-voting members the active controller has heard
//     from (a broker registration or heartbeat) in its term within the last
//     five minutes, as Kafka's leader forgets an observer
//     (controller.QuorumState).

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// metadataTopic is the name Kafka gives the metadata log.
const metadataTopic = metadata.ClusterMetadataTopic

func (h *Handlers) describeQuorum(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !isMetadataPartitionOnly(req) {
		return reply(quorumPartitionErrors(req, resp, kerr.UnknownTopicOrPartition.Code))
	}
	if fwd, ok := h.forwardIfNotController(ctx, r); ok {
		return fwd
	}
	st, err := h.cluster.Quorum(ctx)
	if err != nil {
		code := controllerErrorCode(err)
		if code == kerr.NotController.Code {
			code = kerr.NotLeaderForPartition.Code
		}
		return reply(quorumPartitionErrors(req, resp, code))
	}
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = st.LeaderID, st.LeaderEpoch, st.HighWatermark
	p.CurrentVoters = replicaStates(st.Voters)
	p.Observers = replicaStates(st.Observers)
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic, t.Partitions = metadataTopic, []kmsg.DescribeQuorumResponseTopicPartition{p}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{t}
	for _, m := range st.Voters {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = m.ID
		if host, port, err := net.SplitHostPort(m.Addr); err == nil {
			if p, err := strconv.ParseUint(port, 10, 16); err == nil {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = controllerlink.ObserverListener, host, uint16(p)
				n.Listeners = append(n.Listeners, l)
			}
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return reply(resp)
}

func replicaStates(ms []controller.QuorumMember) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	var out []kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	for _, m := range ms {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.ReplicaDirectoryID, s.LogEndOffset = m.ID, m.DirectoryID, m.LogEndOffset
		if !m.LastFetch.IsZero() {
			s.LastFetchTimestamp = m.LastFetch.UnixMilli()
		}
		if !m.LastCaughtUp.IsZero() {
			s.LastCaughtUpTimestamp = m.LastCaughtUp.UnixMilli()
		}
		out = append(out, s)
	}
	return out
}

// isMetadataPartitionOnly reports whether the request asks for
// __cluster_metadata-0 and nothing else.
func isMetadataPartitionOnly(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == metadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
}

// quorumPartitionErrors answers every requested partition with code.
func quorumPartitionErrors(req *kmsg.DescribeQuorumRequest, resp *kmsg.DescribeQuorumResponse, code int16) *kmsg.DescribeQuorumResponse {
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
