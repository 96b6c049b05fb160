package metadata

import (
	"errors"
	"slices"
	"testing"
)

// TestClientMetricsSubscriptions: subscriptions are kept by name, parsed,
// rebuilt by a snapshot and forgotten with their last key; bad values and
// names are refused with Kafka's codes (INVALID_REQUEST or INVALID_CONFIG).
func TestClientMetricsSubscriptions(t *testing.T) {
	img := mustApply(t, NewImage(),
		&ConfigRecord{ResourceType: ResourceClientMetrics, ResourceName: "b", Key: ClientMetricsMetrics, Value: "org.apache.kafka.producer., *"},
		&ConfigRecord{ResourceType: ResourceClientMetrics, ResourceName: "b", Key: ClientMetricsMatch, Value: "client_id=p.*"},
		&ConfigRecord{ResourceType: ResourceClientMetrics, ResourceName: "a", Key: ClientMetricsInterval, Value: "1000"})
	check := func(what string, img *Image) {
		t.Helper()
		subs := img.Subscriptions()
		if len(subs) != 2 || subs[0].Name != "a" || subs[0].PushIntervalMs != 1000 || subs[0].Metrics != nil || len(subs[0].Match) != 0 ||
			subs[1].PushIntervalMs != DefaultPushIntervalMs || !slices.Equal(subs[1].Metrics, []string{"org.apache.kafka.producer.", "*"}) ||
			!subs[1].Match["client_id"].MatchString("p1") || subs[1].Match["client_id"].MatchString("xp1") {
			t.Errorf("%s: subscriptions %+v", what, subs)
		}
		if got := img.ClientMetricsNames(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s: names %v", what, got)
		}
	}
	check("applied", img)
	check("snapshot", mustApply(t, NewImage(), img.Records()...))

	img = mustApply(t, img, &ConfigRecord{ResourceType: ResourceClientMetrics, ResourceName: "a", Key: ClientMetricsInterval, Delete: true})
	if img.ClientMetricsConfigs("a") != nil || len(img.Subscriptions()) != 1 {
		t.Errorf("a kept after its last key: %v", img.Subscriptions())
	}

	for _, tc := range []struct {
		rec  ConfigRecord
		want error
	}{
		{ConfigRecord{ResourceName: "b", Key: "foo", Value: "1"}, ErrInvalidRequest},
		{ConfigRecord{ResourceName: "", Key: ClientMetricsInterval, Value: "1000"}, ErrInvalidRequest},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsInterval, Value: "99"}, ErrInvalidRequest},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsInterval, Value: "3600001"}, ErrInvalidRequest},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsInterval, Value: "1e3"}, ErrInvalidConfig},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsMatch, Value: "client_id="}, ErrInvalidConfig},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsMatch, Value: "=x"}, ErrInvalidConfig},
		{ConfigRecord{ResourceName: "b", Key: ClientMetricsMatch, Value: "client_id=(?=x)"}, ErrInvalidConfig}, // Java's lookahead: not RE2
	} {
		tc.rec.ResourceType = ResourceClientMetrics
		if _, err := Apply(img, &tc.rec); !errors.Is(err, tc.want) {
			t.Errorf("%+v: err %v, want %v", tc.rec, err, tc.want)
		}
	}
}
