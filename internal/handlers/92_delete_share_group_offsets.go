package handlers

// DeleteShareGroupOffsets (key 92), v0: the share-partition state of an empty share
// group goes for every partition of the named topics (package group), so they start
// again at share.auto.offset.reset. GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP at the top;
// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist or has no state.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) deleteShareGroupOffsets(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return waitFor(func(ctx context.Context) kmsg.Response {
		return h.groups.DeleteShareGroupOffsets(ctx, r.Msg.(*kmsg.DeleteShareGroupOffsetsRequest))
	})
}
