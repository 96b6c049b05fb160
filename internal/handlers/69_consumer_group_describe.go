package handlers

// ConsumerGroupDescribe (key 69), v0-v1: members, epochs, current and target
// assignments of KIP-848 consumer groups (v1: each member's type). A classic or
// unknown group answers GROUP_ID_NOT_FOUND, which makes admin clients fall back to
// DescribeGroups.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) consumerGroupDescribe(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return reply(h.groups.ConsumerGroupDescribe(ctx, r.Msg.(*kmsg.ConsumerGroupDescribeRequest)))
}
