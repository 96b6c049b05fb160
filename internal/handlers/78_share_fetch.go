package handlers

// ShareFetch (key 78), v1-v2: a share-group member fetches records of partitions this
// broker leads, acquiring them under an acquisition lock, and acknowledges earlier
// deliveries (package share).
//   v1: MaxRecords, BatchSize; AcquisitionLockTimeoutMs in the response.
//   v2: ShareAcquireMode (record_limit acquires at most MaxRecords, splitting
//       batches), IsRenewAck and the RENEW acknowledgement type.
// Needs READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request)
// and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
// v0 (Kafka 4.0's early access) is not served. Share sessions: epoch 0 opens one, -1
// acknowledges and closes it, anything else must be the session's next epoch. The
// request may long-poll up to MaxWaitMs, so it finishes off the connection's
// goroutine. A session belongs to the connection that opened it: the server
// ends it, releasing its member's records, when that connection closes
// (share.Manager.ConnectionClosed), as Kafka 4.1+ does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

// Shares is the share-partition leader as the handlers use it.
type Shares interface {
	ShareFetch(ctx context.Context, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse
	ShareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse
}

// noShares answers share-group record requests of handlers built without a
// share-partition leader (some test harnesses): UNSUPPORTED_VERSION.
type noShares struct{}

func (noShares) ShareFetch(_ context.Context, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

func (noShares) ShareAcknowledge(_ context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

func (h *Handlers) shareFetch(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ShareFetchRequest)
	// Topics the member may not READ are answered TOPIC_AUTHORIZATION_FAILED
	// (and never join its session), as Kafka does; unknown topic ids are the
	// share-partition leader's UNKNOWN_TOPIC_ID.
	readable := h.shareTopicCheck(ctx, c)
	var denied []kmsg.ShareFetchResponseTopic
	req.Topics = keep(req.Topics, func(t kmsg.ShareFetchRequestTopic) bool {
		if readable(t.TopicID) {
			return true
		}
		st := kmsg.NewShareFetchResponseTopic()
		st.TopicID = t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewShareFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			if len(p.AcknowledgementBatches) > 0 {
				sp.AcknowledgeErrorCode = sp.ErrorCode
			}
			st.Partitions = append(st.Partitions, sp)
		}
		denied = append(denied, st)
		return false
	})
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := h.cfg.Shares.ShareFetch(share.WithConnection(ctx, c.ID), req)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, denied...)
		}
		return resp
	})
}

// shareTopicCheck reports whether the connection may READ the topic of an id
// (share fetches and acknowledgements name topics by id); ids of no topic pass,
// for the share-partition leader to answer.
func (h *Handlers) shareTopicCheck(ctx context.Context, c *protocol.ConnInfo) func(id [16]byte) bool {
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	img := h.cluster.Image()
	return func(id [16]byte) bool {
		t := img.TopicByID(metadata.UUID(id))
		return t == nil || readable(t.Name)
	}
}
