package handlers

// ShareGroupDescribe (key 77), v1: members, epochs and assignments of share groups.
// A group that is not a share group answers GROUP_ID_NOT_FOUND.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareGroupDescribe(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return reply(h.groups.ShareGroupDescribe(ctx, r.Msg.(*kmsg.ShareGroupDescribeRequest)))
}
