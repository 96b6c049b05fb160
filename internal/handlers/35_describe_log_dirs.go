package handlers

// DescribeLogDirs (key 35), v1-v5 (v2+ flexible): the broker's one log dir
// (<data-dir>/logs, as an absolute path) with the size in bytes of each hosted
// partition's log. Null topics describes every hosted partition; partitions
// this broker does not host are left out. v3 adds the top-level error code,
// v4 the volume's total and usable bytes (KIP-827; -1 when the filesystem
// cannot tell, vfs.SpaceReporter), v5 the cordoned flag (always false).
// OffsetLag is 0 and IsFuture false: Strata does not move partitions between
// log dirs (AlterReplicaLogDirs, 34_alter_replica_log_dirs.go).

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

func (h *Handlers) describeLogDirs(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = h.logDir()
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if total, usable, ok := h.replicas.Space(); ok {
		dir.TotalBytes, dir.UsableBytes = total, usable
	}
	wanted := func(p *replica.Partition) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == p.Topic && slices.Contains(t.Partitions, p.Index) {
				return true
			}
		}
		return false
	}
	byTopic := map[string]int{}
	parts := h.replicas.Partitions()
	slices.SortFunc(parts, func(a, b *replica.Partition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Index, b.Index))
	})
	for _, p := range parts {
		if !wanted(p) {
			continue
		}
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			dir.Topics = append(dir.Topics, t)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p.Index, p.Log().Size()
		dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, rp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return reply(resp)
}
