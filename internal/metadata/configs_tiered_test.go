package metadata

import (
	"errors"
	"testing"
)

func TestCheckTopicConfigs(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		cluster   map[string]string
		ok        bool
	}{
		{"not tiered: anything goes", map[string]string{"cleanup.policy": "compact", "local.retention.ms": "-1"}, nil, true},
		{"tiered with defaults", map[string]string{"remote.storage.enable": "true"}, nil, true},
		{"tiered compacted", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}, nil, false},
		{"tiered compact,delete", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "delete,compact"}, nil, false},
		{"compaction from the cluster default", map[string]string{"remote.storage.enable": "true"}, map[string]string{"log.cleanup.policy": "compact"}, false},
		{"local below total", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "local.retention.bytes": "100", "retention.bytes": "1000"}, nil, true},
		{"local ms above total", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "retention.ms": "999"}, nil, false},
		{"local bytes above total", map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "1001", "retention.bytes": "1000"}, nil, false},
		{"local unbounded under a bounded total", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "-1"}, nil, false},
		{"both unbounded", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "-1", "retention.ms": "-1"}, nil, true},
		{"local from the cluster default", map[string]string{"remote.storage.enable": "true", "retention.ms": "10"}, map[string]string{"log.local.retention.ms": "20"}, false},
		// Kafka's validateRemoteCopyLag{Time,Size}: a positive copy lag may
		// not exceed the effective local retention when that is bounded.
		{"copy lag ms at local", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "remote.copy.lag.ms": "1000"}, nil, true},
		{"copy lag ms above local", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "remote.copy.lag.ms": "1001"}, nil, false},
		{"copy lag ms above total (local -2)", map[string]string{"remote.storage.enable": "true", "retention.ms": "1000", "remote.copy.lag.ms": "1001"}, nil, false},
		{"copy lag ms under unbounded local", map[string]string{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1", "remote.copy.lag.ms": "99999999999"}, nil, true},
		{"copy lag ms -1", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "remote.copy.lag.ms": "-1"}, nil, true},
		{"copy lag bytes above local", map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "100", "retention.bytes": "1000", "remote.copy.lag.bytes": "101"}, nil, false},
		{"copy lag bytes under unbounded total", map[string]string{"remote.storage.enable": "true", "remote.copy.lag.bytes": "1000000"}, nil, true},
		{"copy lag bytes above local from the cluster default", map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "100", "retention.bytes": "1000"}, map[string]string{"log.remote.copy.lag.bytes": "200"}, false},
		{"copy lag above retention, not tiered", map[string]string{"retention.ms": "1000", "remote.copy.lag.ms": "2000"}, nil, true},
		// Kafka's LogConfig.validateValues, on every topic.
		{"min compaction lag above max", map[string]string{"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "999"}, nil, false},
		{"min compaction lag at max", map[string]string{"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "1000"}, nil, true},
		{"max compaction lag from the cluster default", map[string]string{"min.compaction.lag.ms": "1000"}, map[string]string{"log.cleaner.max.compaction.lag.ms": "10"}, false},
		{"min compaction lag above max from the cluster default", map[string]string{"max.compaction.lag.ms": "1000"}, map[string]string{"log.cleaner.min.compaction.lag.ms": "2000"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTopicConfigs(tt.overrides, tt.cluster, true)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("CheckTopicConfigs = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestLocalRetention(t *testing.T) {
	c := DefaultTopicConfig()
	if ms, b := c.LocalRetention(); ms != c.RetentionMs || b != c.RetentionBytes {
		t.Fatalf("defaults resolve to %d, %d; want the totals %d, %d", ms, b, c.RetentionMs, c.RetentionBytes)
	}
	c.LocalRetentionMs, c.LocalRetentionBytes = 5, 6
	if ms, b := c.LocalRetention(); ms != 5 || b != 6 {
		t.Fatalf("explicit local retention resolves to %d, %d", ms, b)
	}
	if _, ok := LookupBrokerConfig(""); ok {
		t.Fatal("the topic-only key remote.storage.enable has a broker synonym")
	}
	for _, e := range NewImage().BrokerConfigEntries("") {
		if e.Name == "" {
			t.Fatal("a broker config entry without a name")
		}
	}
}

// TestCheckTopicConfigsDisablingTiers covers KIP-950's rules, as Kafka's
// LogConfig.validateTopicLogConfigValues checks them: remote storage is
// turned off only with remote.log.delete.on.disable=true, and a tiered
// topic that stops copying keeps no local retention apart from its total.
func TestCheckTopicConfigsDisablingTiers(t *testing.T) {
	tiered := map[string]string{"remote.storage.enable": "true"}
	tests := []struct {
		name      string
		previous  map[string]string
		overrides map[string]string
		ok        bool
	}{
		{"turning off without deleting", tiered, map[string]string{"remote.storage.enable": "false"}, false},
		{"turning off by removing the key", tiered, map[string]string{}, false},
		{"turning off and deleting", tiered, map[string]string{"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}, true},
		{"never tiered", map[string]string{}, map[string]string{"remote.storage.enable": "false"}, true},
		{"created untiered", nil, map[string]string{"remote.storage.enable": "false"}, true},
		{"turning back on", map[string]string{"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}, tiered, true},
		{"copy disabled", tiered, map[string]string{"remote.storage.enable": "true", "remote.log.copy.disable": "true"}, true},
		{"copy disabled with local ms below total", tiered,
			map[string]string{"remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.ms": "1000"}, false},
		{"copy disabled with local bytes below total", tiered,
			map[string]string{"remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.bytes": "10", "retention.bytes": "100"}, false},
		{"copy disabled with local equal to total", tiered,
			map[string]string{"remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.ms": "1000", "retention.ms": "1000"}, true},
		{"copy disabled on an untiered topic", nil, map[string]string{"remote.log.copy.disable": "true", "local.retention.ms": "1000"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTopicConfigChange(tt.previous, tt.overrides, nil, true)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("CheckTopicConfigChange = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	for _, key := range []string{"remote.log.copy.disable", "remote.log.delete.on.disable"} {
		if err := ValidateConfigChange(ResourceTopic, key, "true"); err != nil {
			t.Errorf("%s=true: %v", key, err)
		}
	}
}

// TestRemoteCopyLag: remote.copy.lag.ms / .bytes of -1 stand for the
// effective local retention, as Kafka 4.4's LogConfig.remoteCopyLagMs /
// remoteCopyLagBytes resolve them; other values are themselves.
func TestRemoteCopyLag(t *testing.T) {
	for _, tc := range []struct {
		name                string
		lagMs, lagBytes     int64
		localMs, localBytes int64
		totalMs, totalBytes int64
		wantMs, wantBytes   int64
	}{
		{"defaults", 0, -1, -2, -2, 604800000, -1, 0, -1},
		{"explicit", 5, 6, 100, 200, 1000, 2000, 5, 6},
		{"-1 is the local retention", -1, -1, 100, 200, 1000, 2000, 100, 200},
		{"-1 with -2 local is the total", -1, -1, -2, -2, 1000, 2000, 1000, 2000},
		{"-1 with unbounded local", -1, -1, -1, -1, -1, -1, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultTopicConfig()
			c.RemoteCopyLagMs, c.RemoteCopyLagBytes = tc.lagMs, tc.lagBytes
			c.LocalRetentionMs, c.LocalRetentionBytes = tc.localMs, tc.localBytes
			c.RetentionMs, c.RetentionBytes = tc.totalMs, tc.totalBytes
			if ms, b := c.RemoteCopyLag(); ms != tc.wantMs || b != tc.wantBytes {
				t.Fatalf("RemoteCopyLag() = %d, %d; want %d, %d", ms, b, tc.wantMs, tc.wantBytes)
			}
		})
	}
}
