package handlers

// GetTelemetrySubscriptions (key 71), v0 (flexible; KIP-714). A client asks
// which of its metrics to push and how often; package telemetry matches it to
// the client metrics subscriptions of the metadata image, from the
// connection's client id, software name and version (ApiVersions v3+) and
// address. Kafka advertises 71 and 72 only with a telemetry receiver plugin
// configured, whether or not any subscription exists; Strata always has its
// receiver (the series on /metrics), so it always advertises them. With no
// subscription a client is answered no metrics and pushes nothing. Needs no
// ACL, as in Kafka. A request sooner than the push interval is
// THROTTLING_QUOTA_EXCEEDED. Strata asks for cumulative sums
// (DeltaTemporality false; Kafka asks for deltas), which Prometheus counters are.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/telemetry"
)

func (h *Handlers) getTelemetrySubscriptions(_ context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	if h.cfg.Telemetry == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return reply(resp)
	}
	sub, err := h.cfg.Telemetry.Subscriptions(req.ClientInstanceID, telemetryClient(c, r), h.cluster.Image().Subscriptions())
	if err != nil {
		resp.ErrorCode = telemetry.Code(err)
		return reply(resp)
	}
	resp.ClientInstanceID, resp.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
	resp.AcceptedCompressionTypes = sub.AcceptedCompression
	resp.PushIntervalMillis, resp.TelemetryMaxBytes = sub.PushIntervalMs, sub.MaxBytes
	resp.DeltaTemporality = sub.DeltaTemporality
	resp.RequestedMetrics = sub.Metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	return reply(resp)
}

// telemetryClient is what a subscription's match selects on: the request's
// client id, the connection's client software and remote address.
func telemetryClient(c *protocol.ConnInfo, r *protocol.Request) telemetry.Client {
	var tc telemetry.Client
	if r.ClientID != nil {
		tc.ClientID = *r.ClientID
	}
	if c == nil {
		return tc
	}
	tc.SoftwareName, tc.SoftwareVersion = c.ClientSoftware()
	if a, ok := c.RemoteAddr.(*net.TCPAddr); ok {
		tc.SourceAddress, tc.SourcePort = a.IP.String(), strconv.Itoa(a.Port)
	}
	return tc
}
