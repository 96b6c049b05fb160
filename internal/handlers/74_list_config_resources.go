package handlers

// ListConfigResources (key 74), v0-v1 (flexible). v0 is KIP-714's
// ListClientMetricsResources: the client metrics subscriptions. v1 (KIP-1142)
// takes resource types: none means every type; any type but topic, broker,
// broker logger, client metrics and group makes the whole answer
// UNSUPPORTED_VERSION. As Kafka 4.4 answers (interop/cmd/configcompare), the
// types come in the order group (groups with dynamic configs), client metrics,
// broker logger and broker (each an id of an unfenced broker), topic (every
// topic, internal ones too); names within a type in name order (Kafka's is a
// hash map's). Needs DESCRIBE_CONFIGS on the cluster (authorize.go).

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// listableTypes are the resource types v1 lists, in Kafka's answer order.
var listableTypes = []metadata.ResourceType{
	metadata.ResourceGroup, metadata.ResourceClientMetrics, metadata.ResourceBrokerLogger,
	metadata.ResourceBroker, metadata.ResourceTopic,
}

func (h *Handlers) listConfigResources(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	resp.ConfigResources = []kmsg.ListConfigResourcesResponseConfigResource{}
	want := []metadata.ResourceType{metadata.ResourceClientMetrics}
	if req.Version >= 1 && len(req.ResourceTypes) > 0 {
		want = want[:0]
		for _, t := range req.ResourceTypes {
			if !slices.Contains(listableTypes, metadata.ResourceType(t)) {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return reply(resp)
			}
			want = append(want, metadata.ResourceType(t))
		}
	} else if req.Version >= 1 {
		want = listableTypes
	}
	img := h.cluster.Image()
	add := func(rt metadata.ResourceType, names ...string) {
		for _, n := range names {
			c := kmsg.NewListConfigResourcesResponseConfigResource()
			c.Name, c.Type = n, int8(rt)
			resp.ConfigResources = append(resp.ConfigResources, c)
		}
	}
	var brokers []string
	for _, b := range img.Brokers() {
		if !b.Fenced {
			brokers = append(brokers, strconv.Itoa(int(b.ID)))
		}
	}
	for _, rt := range listableTypes {
		if !slices.Contains(want, rt) {
			continue
		}
		switch rt {
		case metadata.ResourceGroup:
			add(rt, img.GroupConfigNames()...)
		case metadata.ResourceClientMetrics:
			add(rt, img.ClientMetricsNames()...)
		case metadata.ResourceBrokerLogger, metadata.ResourceBroker:
			add(rt, brokers...)
		case metadata.ResourceTopic:
			for _, t := range img.Topics() {
				add(rt, t.Name)
			}
		}
	}
	return reply(resp)
}
