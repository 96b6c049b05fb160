package handlers

// PushTelemetry (key 72), v0 (flexible; KIP-714). A client pushes its
// subscribed metrics as OTLP MetricsData, compressed with a record-batch codec.
// As Kafka's ClientMetricsManager checks a push, in this order: an instance id
// zero or reserved is INVALID_REQUEST, a push after a terminating one
// INVALID_REQUEST, one sooner than the push interval (and not terminating)
// THROTTLING_QUOTA_EXCEEDED, a stale subscription id UNKNOWN_SUBSCRIPTION_ID,
// an unknown codec UNSUPPORTED_COMPRESSION_TYPE, a payload above the limit
// TELEMETRY_TOO_LARGE. Where Kafka hands the payload to a plugin, Strata
// decodes it (package telemetry) and exposes the series on /metrics; a payload
// that does not decompress or decode is INVALID_RECORD, as Kafka answers a
// plugin's failure. Needs no ACL, as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/telemetry"
)

func (h *Handlers) pushTelemetry(_ context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	if h.cfg.Telemetry == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return reply(resp)
	}
	err := h.cfg.Telemetry.Push(telemetry.Push{
		ClientInstanceID: req.ClientInstanceID, SubscriptionID: req.SubscriptionID, Terminating: req.Terminating,
		CompressionType: req.CompressionType, Metrics: req.Metrics,
	}, telemetryClient(c, r), h.cluster.Image().Subscriptions())
	resp.ErrorCode = telemetry.Code(err)
	return reply(resp)
}
