package handlers

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/telemetry"
)

func incrementalAlter(rt kmsg.ConfigResourceType, name string, op kmsg.IncrementalAlterConfigOp, key string, value *string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = rt, name
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, op, value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	return req
}

// TestClientMetricsConfigsAsKafka: the codes Kafka 4.4.0 answered side by side
// (interop/cmd/configcompare) for client metrics subscriptions, with its
// messages in comments.
func TestClientMetricsConfigsAsKafka(t *testing.T) {
	h := newAdminHandlers(t)
	cm := kmsg.ConfigResourceTypeClientMetrics
	set, app := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend
	for _, tt := range []struct {
		name       string
		resource   string
		op         kmsg.IncrementalAlterConfigOp
		key, value string
		want       *kerr.Error
	}{
		{"unknown key", "m", set, "foo", "1", kerr.InvalidRequest},               // "Unknown client metrics configuration: foo"
		{"interval too low", "m", set, "interval.ms", "99", kerr.InvalidRequest}, // "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"
		{"interval too high", "m", set, "interval.ms", "3600001", kerr.InvalidRequest},
		{"interval not a number", "m", set, "interval.ms", "x", kerr.InvalidConfig},  // "Invalid value x for configuration interval.ms: Not a number of type INT"
		{"match unknown selector", "m", set, "match", "foo=bar", kerr.InvalidConfig}, // "Illegal client matching pattern: foo=bar"
		{"match without =", "m", set, "match", "client_id", kerr.InvalidConfig},
		{"match bad regex", "m", set, "match", "client_id=[", kerr.InvalidConfig},
		{"match two =", "m", set, "match", "client_id=a=b", kerr.InvalidConfig},
		{"empty name", "", set, "interval.ms", "1000", kerr.InvalidRequest},                          // "Subscription name can't be empty"
		{"append to metrics", "m", app, "metrics", "org.apache.kafka.producer.", kerr.InvalidConfig}, // "Can't APPEND to key metrics because its type is not LIST."
		{"interval", "m", set, "interval.ms", "60000", nil},
		{"match", "m", set, "match", "client_id=abc.*,client_software_name=apache-kafka-java", nil},
		{"metrics", "m", set, "metrics", "org.apache.kafka.producer., org.apache.kafka.consumer.", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := serve(t, h, incrementalAlter(cm, tt.resource, tt.op, tt.key, &tt.value)).(*kmsg.IncrementalAlterConfigsResponse)
			if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
				t.Errorf("got %v (%v), want %v", err, resp.Resources[0].ErrorMessage, tt.want)
			}
		})
	}
	subs := h.cluster.Image().Subscriptions()
	if len(subs) != 1 || subs[0].PushIntervalMs != 60000 || len(subs[0].Match) != 2 ||
		!slices.Equal(subs[0].Metrics, []string{"org.apache.kafka.producer.", "org.apache.kafka.consumer."}) {
		t.Fatalf("subscriptions %+v", subs)
	}
}

// TestDescribeClientMetricsAsKafka: every key, a key set as
// CLIENT_METRICS_CONFIG (7) with itself as synonym, the others DEFAULT_CONFIG
// (5) without one, none flagged default, an unknown subscription at its
// defaults (Kafka 4.4.0, side by side).
func TestDescribeClientMetricsAsKafka(t *testing.T) {
	h := newAdminHandlers(t)
	serve(t, h, incrementalAlter(kmsg.ConfigResourceTypeClientMetrics, "m", kmsg.IncrementalAlterConfigOpSet, "interval.ms", kmsg.StringPtr("60000")))
	for _, tt := range []struct {
		name string
		want string
	}{
		{"m", "interval.ms=60000 src=7 type=3 syn[interval.ms=60000/7]; match= src=5 type=7 syn[]; metrics= src=5 type=7 syn[]"},
		{"nosuch", "interval.ms=300000 src=5 type=3 syn[]; match= src=5 type=7 syn[]; metrics= src=5 type=7 syn[]"},
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, tt.name
		req.Resources = append(req.Resources, rr)
		res := serve(t, h, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		var got []string
		for _, c := range res.Configs {
			var syns []string
			for _, s := range c.ConfigSynonyms {
				syns = append(syns, fmt.Sprintf("%s=%s/%d", s.Name, *s.Value, s.Source))
			}
			if c.IsDefault || c.Documentation == nil || *c.Documentation == "" {
				t.Errorf("%s: %s default %v, documentation %v", tt.name, c.Name, c.IsDefault, c.Documentation)
			}
			got = append(got, fmt.Sprintf("%s=%s src=%d type=%d syn[%s]", c.Name, *c.Value, c.Source, c.ConfigType, strings.Join(syns, " ")))
		}
		if g := strings.Join(got, "; "); res.ErrorCode != 0 || g != tt.want {
			t.Errorf("%s: code %d, configs\n%s\nwant\n%s", tt.name, res.ErrorCode, g, tt.want)
		}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeClientMetrics
	req.Resources = append(req.Resources, rr)
	if code := serve(t, h, req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("empty name: code %d, want INVALID_REQUEST", code) // "Client metrics subscription name must not be empty"
	}
}

// TestListConfigResourcesAsKafka: what Kafka 4.4.0 listed side by side
// (interop/cmd/configcompare): v0 the subscriptions only; v1 the types asked
// for, all five when none, in the order group, client metrics, broker logger,
// broker, topic; any other type UNSUPPORTED_VERSION for the whole request.
func TestListConfigResourcesAsKafka(t *testing.T) {
	h := newAdminHandlers(t)
	set := kmsg.IncrementalAlterConfigOpSet
	for _, req := range []*kmsg.IncrementalAlterConfigsRequest{
		incrementalAlter(kmsg.ConfigResourceTypeClientMetrics, "m2", set, "interval.ms", kmsg.StringPtr("1000")),
		incrementalAlter(kmsg.ConfigResourceTypeClientMetrics, "m1", set, "metrics", kmsg.StringPtr("*")),
		incrementalAlter(kmsg.ConfigResourceType(32), "g", set, "consumer.session.timeout.ms", kmsg.StringPtr("50000")),
	} {
		if code := serve(t, h, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
			t.Fatalf("setting up: code %d", code)
		}
	}
	for _, tt := range []struct {
		name    string
		version int16
		types   []int8
		want    string
	}{
		{"v0", 0, nil, "16:m1 16:m2"},
		{"v1 every type", 1, nil, "32:g 16:m1 16:m2 8:1 8:2 4:1 4:2 2:t 2:t_x"},
		{"v1 client metrics", 1, []int8{16}, "16:m1 16:m2"},
		{"v1 topics then groups", 1, []int8{2, 32}, "32:g 2:t 2:t_x"},
		{"v1 brokers", 1, []int8{4}, "4:1 4:2"},
		{"v1 an unknown type", 1, []int8{16, 64}, "UNSUPPORTED_VERSION"},
		{"v1 the unknown type 1", 1, []int8{1}, "UNSUPPORTED_VERSION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrListConfigResourcesRequest()
			req.SetVersion(tt.version)
			req.ResourceTypes = tt.types
			resp := serve(t, h, req).(*kmsg.ListConfigResourcesResponse)
			var got []string
			if resp.ErrorCode != 0 {
				got = append(got, kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error).Message)
			}
			for _, c := range resp.ConfigResources {
				got = append(got, fmt.Sprintf("%d:%s", c.Type, c.Name))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("got %s, want %s", g, tt.want)
			}
		})
	}
}

// TestTelemetryRequests: a client gets its subscription, pushes gzip'd OTLP,
// and the pushed metric is kept with its client id; without a telemetry
// manager both APIs are UNSUPPORTED_VERSION (Kafka's answer with no receiver).
func TestTelemetryRequests(t *testing.T) {
	off := newAdminHandlers(t)
	if code := serve(t, off, kmsg.NewPtrGetTelemetrySubscriptionsRequest()).(*kmsg.GetTelemetrySubscriptionsResponse).ErrorCode; code != kerr.UnsupportedVersion.Code {
		t.Errorf("no manager: GetTelemetrySubscriptions code %d", code)
	}
	mgr := telemetry.New(telemetry.Config{})
	h := newAdminHandlersWith(t, Config{Telemetry: mgr})
	serve(t, h, incrementalAlter(kmsg.ConfigResourceTypeClientMetrics, "p", kmsg.IncrementalAlterConfigOpSet, "metrics", kmsg.StringPtr("org.apache.kafka.producer.")))
	clientID := "cm-producer"
	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	sub := serveRequest(t, h, &protocol.ConnInfo{}, &protocol.Request{Key: 71, ClientID: &clientID, Msg: get}).(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub.ErrorCode != 0 || sub.ClientInstanceID == ([16]byte{}) || !slices.Equal(sub.RequestedMetrics, []string{"org.apache.kafka.producer."}) ||
		sub.PushIntervalMillis != 300000 || sub.DeltaTemporality {
		t.Fatalf("subscription %+v", sub)
	}
	raw, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
		Name: "org.apache.kafka.producer.record.send.total",
		Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
			DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 42}}}}},
	}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID, push.SubscriptionID, push.CompressionType, push.Metrics = sub.ClientInstanceID, sub.SubscriptionID, 1, buf.Bytes()
	if code := serveRequest(t, h, &protocol.ConnInfo{}, &protocol.Request{Key: 72, ClientID: &clientID, Msg: push}).(*kmsg.PushTelemetryResponse).ErrorCode; code != 0 {
		t.Fatalf("push: code %d", code)
	}
	series := mgr.Snapshot()
	if len(series) != 1 || series[0].Value != 42 || series[0].Labels[0] != (telemetry.Label{Name: "client_id", Value: clientID}) {
		t.Fatalf("series %+v", series)
	}
	if code := serve(t, h, push).(*kmsg.PushTelemetryResponse).ErrorCode; code != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("second push at once: code %d", code)
	}
	push.SubscriptionID++
	push.Terminating = true // a terminating push is not throttled
	if code := serve(t, h, push).(*kmsg.PushTelemetryResponse).ErrorCode; code != kerr.UnknownSubscriptionID.Code {
		t.Errorf("stale subscription id: code %d", code)
	}
}
