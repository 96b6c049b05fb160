package metadata

import (
	"errors"
	"testing"
)

func TestGroupConfigs(t *testing.T) {
	img := mustApply(t, NewImage(),
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareAutoOffsetReset, Value: "earliest"},
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareDeliveryCountLimit, Value: "3"},
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "h", Key: GroupShareRecordLockDuration, Value: "15000"})
	wantEq(t, "g reset", img.GroupConfig("g", GroupShareAutoOffsetReset), "earliest")
	wantEq(t, "g limit", img.GroupConfig("g", GroupShareDeliveryCountLimit), "3")
	wantEq(t, "h reset default", img.GroupConfig("h", GroupShareAutoOffsetReset), "latest")
	wantEq(t, "unknown group lock", img.GroupConfig("nope", GroupShareRecordLockDuration), "30000")
	// The streams warm-up configs: Kafka 4.4's defaults, and values it accepts.
	wantEq(t, "warm-ups default", img.GroupConfig("g", GroupStreamsWarmupReplicas), "2")
	wantEq(t, "recovery lag default", img.GroupConfig("g", GroupStreamsRecoveryLag), "10000")
	img = mustApply(t, img,
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "w", Key: GroupStreamsWarmupReplicas, Value: "20"},
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "w", Key: GroupStreamsRecoveryLag, Value: "9223372036854775807"},
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "w", Key: GroupStreamsRackAwareTags, Value: "zone, rack"})
	if tags, err := ParseRackAwareTags(img.GroupConfig("w", GroupStreamsRackAwareTags)); err != nil || len(tags) != 2 || tags[1] != "rack" {
		t.Errorf("rack-aware tags %q: %v %v", img.GroupConfig("w", GroupStreamsRackAwareTags), tags, err)
	}

	for _, e := range img.GroupConfigEntries("g") {
		if e.Name == GroupShareAutoOffsetReset && (e.Source != SourceGroup || e.IsDefault) {
			t.Errorf("entry %+v: want a group source", e)
		}
		if e.Name == GroupShareRecordLockDuration && !e.IsDefault {
			t.Errorf("entry %+v: want the default", e)
		}
	}

	// A snapshot rebuilds them.
	back := mustApply(t, NewImage(), img.Records()...)
	wantEq(t, "snapshot g reset", back.GroupConfig("g", GroupShareAutoOffsetReset), "earliest")
	wantEq(t, "snapshot h lock", back.GroupConfig("h", GroupShareRecordLockDuration), "15000")

	// Deleting the last key forgets the group.
	img = mustApply(t, img,
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "h", Key: GroupShareRecordLockDuration, Delete: true})
	if img.GroupConfigs("h") != nil {
		t.Errorf("h still has configs %v", img.GroupConfigs("h"))
	}

	for _, bad := range []*ConfigRecord{
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareAutoOffsetReset, Value: "newest"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareDeliveryCountLimit, Value: "1"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareRecordLockDuration, Value: "x"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: "retention.ms", Value: "1"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupStreamsWarmupReplicas, Value: "21"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupStreamsWarmupReplicas, Value: "-1"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupStreamsRecoveryLag, Value: "-1"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupStreamsRecoveryLag, Value: "x"},
		{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupStreamsRackAwareTags, Value: "zone,rack,zone"},
		{ResourceType: ResourceGroup, ResourceName: "", Key: GroupShareAutoOffsetReset, Value: "earliest"},
	} {
		if _, err := Apply(img, bad); !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: err %v, want invalid config or request", bad, err)
		}
	}
}

// TestShareIsolationLevelConfig: share.isolation.level, a group config since
// Kafka 4.1, takes read_committed and read_uncommitted (the default) and
// refuses anything else.
func TestShareIsolationLevelConfig(t *testing.T) {
	const key = "share.isolation.level"
	img := mustApply(t, NewImage(),
		&ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: key, Value: "read_committed"})
	wantEq(t, "g", img.GroupConfig("g", key), "read_committed")
	wantEq(t, "default", img.GroupConfig("h", key), "read_uncommitted")
	if _, err := Apply(img, &ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: key, Value: "serializable"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("serializable: err %v, want invalid config", err)
	}
}

// TestShareAutoOffsetResetByDuration: share.auto.offset.reset takes
// by_duration:<ISO 8601 duration> (Kafka 4.1+, PnDTnHnMn.nS, not negative).
func TestShareAutoOffsetResetByDuration(t *testing.T) {
	for _, v := range []string{"by_duration:PT1H", "by_duration:P2DT3H4M5.5S", "by_duration:PT0S", "by_duration:pt15m"} {
		if _, err := Apply(NewImage(), &ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareAutoOffsetReset, Value: v}); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"by_duration:", "by_duration:-PT1H", "by_duration:PT-1H", "by_duration:1H", "by_duration:P1Y", "by_duration:PT", "by_duration"} {
		if _, err := Apply(NewImage(), &ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupShareAutoOffsetReset, Value: v}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want invalid config", v, err)
		}
	}
}

// TestShareGroupTimeoutConfigs: share.session.timeout.ms and
// share.heartbeat.interval.ms are group configs (Kafka 4.0+), bounded as Kafka
// bounds them by the broker's group.share.min/max.session.timeout.ms
// (45000-60000) and group.share.min/max.heartbeat.interval.ms (5000-15000) at
// their defaults.
func TestShareGroupTimeoutConfigs(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"share.session.timeout.ms", "45000", true},
		{"share.session.timeout.ms", "60000", true},
		{"share.session.timeout.ms", "44999", false},
		{"share.session.timeout.ms", "60001", false},
		{"share.heartbeat.interval.ms", "5000", true},
		{"share.heartbeat.interval.ms", "15000", true},
		{"share.heartbeat.interval.ms", "4999", false},
		{"share.heartbeat.interval.ms", "x", false},
	} {
		if err := ValidateConfig(ResourceGroup, tc.key, tc.value); (err == nil) != tc.ok {
			t.Errorf("%s=%s: err %v, want ok %v", tc.key, tc.value, err, tc.ok)
		}
	}
	img := NewImage()
	wantEq(t, "session default", img.GroupConfig("g", "share.session.timeout.ms"), "45000")
	wantEq(t, "interval default", img.GroupConfig("g", "share.heartbeat.interval.ms"), "5000")
}
