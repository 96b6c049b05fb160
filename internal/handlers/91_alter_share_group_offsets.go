package handlers

// AlterShareGroupOffsets (key 91), v0: share partitions of an empty share group
// start again at the given offsets, with nothing in flight (package group). A group
// that does not exist is created empty, as Kafka 4.4 does; a non-empty one answers
// NON_EMPTY_GROUP, one that is not a share group GROUP_ID_NOT_FOUND, an unknown topic
// or partition UNKNOWN_TOPIC_OR_PARTITION per partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterShareGroupOffsets(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return waitFor(func(ctx context.Context) kmsg.Response {
		return h.groups.AlterShareGroupOffsets(ctx, r.Msg.(*kmsg.AlterShareGroupOffsetsRequest))
	})
}
