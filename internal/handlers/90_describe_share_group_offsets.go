package handlers

// DescribeShareGroupOffsets (key 90), v0-v1: the start offset (and leader epoch) of
// share partitions, served by the group's coordinator (package group), which reads
// the share-partition state wherever it lives. A group naming no topics describes
// every share partition of the group with state; one without state answers start
// offset -1, not an error.
//   v1: the share-partition lag (KIP-1226), -1 when unknown.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) describeShareGroupOffsets(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return reply(h.groups.DescribeShareGroupOffsets(ctx, r.Msg.(*kmsg.DescribeShareGroupOffsetsRequest)))
}
