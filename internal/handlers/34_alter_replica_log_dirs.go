package handlers

// AlterReplicaLogDirs (key 34), v1-v2 (v2 flexible), as Kafka 4.4 serves it:
// moves this broker's replicas between its log dirs. A Strata broker has one
// log dir (<data-dir>/logs, as an absolute path, as DescribeLogDirs names it),
// so the answer is the one a Kafka broker with a single log dir gives, per
// partition, in Kafka's order of checks (ReplicaManager.alterReplicaLogDirs):
//   - INVALID_TOPIC_EXCEPTION for a topic name too long for the "-future"
//     directory Kafka would make for the move (KAFKA-4893);
//   - LOG_DIR_NOT_FOUND for any path but the log dir, compared as given;
//   - UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have;
//   - REPLICA_NOT_AVAILABLE for one this broker holds no replica of (yet):
//     kafka-reassign-partitions retries it until the reassignment has created
//     the replica;
//   - none for a replica held here: it is in that dir already, nothing moves.
//
// So a reassignment plan whose log_dirs are "any" or each broker's own log
// dir (the rollback plan the tool prints) executes and verifies as on Kafka.
// ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

// maxLogDirName is the longest directory name Kafka makes for a log dir move:
// "<topic>-<partition>.<32 hex digits>-future" must fit a file name.
const maxLogDirName = 255

func (h *Handlers) alterReplicaLogDirs(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	img := h.cluster.Image()
	logDir := h.logDir()
	byTopic := map[string]int{}
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			i, ok := byTopic[t.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[t.Topic] = i
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			for _, index := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition = index
				switch {
				case len(t.Topic)+1+len(strconv.Itoa(int(index)))+len(".-future")+32 > maxLogDirName:
					rp.ErrorCode = kerr.InvalidTopicException.Code
				case d.Dir != logDir:
					rp.ErrorCode = kerr.LogDirNotFound.Code
				default:
					_, err := h.hostedPartition(img, t.Topic, index)
					rp.ErrorCode = errorCode(err)
					if errors.Is(err, replica.ErrNotLeader) { // not held here
						rp.ErrorCode = kerr.ReplicaNotAvailable.Code
					}
				}
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
			}
		}
	}
	return reply(resp)
}

// logDir is this broker's one log dir as Kafka names a log dir: an absolute
// path.
func (h *Handlers) logDir() string {
	dir := h.replicas.Dir()
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
