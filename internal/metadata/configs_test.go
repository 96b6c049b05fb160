package metadata

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/strata-stream/strata/internal/throttle"
)

func TestConfigTableSortedAndDefaultsParse(t *testing.T) {
	defs := TopicConfigDefs()
	if !sort.SliceIsSorted(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name }) {
		t.Error("topic config table is not sorted by name")
	}
	brokerNames := map[string]bool{}
	for _, d := range defs {
		if err := d.Validate(d.Default); err != nil {
			t.Errorf("default of %s does not validate: %v", d.Name, err)
		}
		if d.Doc() == "" {
			t.Errorf("%s has no documentation", d.Name)
		}
		switch d.Name {
		case "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
			"leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
			TopicDeadLetterGroupEnable, TopicInternalSegmentBytes:
			if d.BrokerName != "" {
				t.Errorf("%s has a broker synonym %q; it is topic-only in Kafka", d.Name, d.BrokerName)
			}
			continue
		}
		if d.BrokerName == "" || brokerNames[d.BrokerName] {
			t.Errorf("%s: broker synonym %q empty or repeated", d.Name, d.BrokerName)
		}
		brokerNames[d.BrokerName] = true
	}
	want := TopicConfig{
		CleanupPolicy: CleanupDelete, CompressionType: "producer",
		DeleteRetentionMs: 86400000, FileDeleteDelayMs: 60000,
		FlushMessages: maxInt64, FlushMs: maxInt64, IndexIntervalBytes: 4096,
		LocalRetentionBytes: -2, LocalRetentionMs: -2,
		MaxCompactionLagMs: maxInt64, MaxMessageBytes: 1048588,
		MessageTimestampAfterMaxMs: 3600000, MessageTimestampBeforeMaxMs: maxInt64,
		MessageTimestampType: CreateTime, MinCleanableDirtyRatio: 0.5, MinInsyncReplicas: 1,
		RetentionBytes: -1, RetentionMs: 604800000, SegmentBytes: 1073741824,
		SegmentIndexBytes: 10485760, SegmentMs: 604800000,
		CompressionGzipLevel: -1, CompressionLz4Level: 9, CompressionZstdLevel: 3,
		MaxDecompressedMessageBytes: 2147483639, RemoteCopyLagMs: 0, RemoteCopyLagBytes: -1,
	}
	if got := DefaultTopicConfig(); got != want {
		t.Errorf("DefaultTopicConfig() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestTopicConfigKeysAreKafkas: the topic keys DescribeConfigs lists are
// Kafka 4.4's LogConfig keys (internal.segment.bytes, listed only where set,
// aside), each with Kafka's broker synonym.
func TestTopicConfigKeysAreKafkas(t *testing.T) {
	want := map[string]string{ // Kafka 4.4's ServerTopicConfigSynonyms; "" for a topic-only key
		"cleanup.policy": "log.cleanup.policy", "compression.gzip.level": "compression.gzip.level",
		"compression.lz4.level": "compression.lz4.level", "compression.type": "compression.type",
		"compression.zstd.level": "compression.zstd.level", "delete.retention.ms": "log.cleaner.delete.retention.ms",
		"errors.deadletterqueue.group.enable": "", "file.delete.delay.ms": "log.segment.delete.delay.ms",
		"flush.messages": "log.flush.interval.messages", "flush.ms": "log.flush.interval.ms",
		"follower.replication.throttled.replicas": "", "index.interval.bytes": "log.index.interval.bytes",
		"leader.replication.throttled.replicas": "", "local.retention.bytes": "log.local.retention.bytes",
		"local.retention.ms": "log.local.retention.ms", "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
		"max.decompressed.message.bytes": "max.decompressed.message.bytes", "max.message.bytes": "message.max.bytes",
		"message.timestamp.after.max.ms":  "log.message.timestamp.after.max.ms",
		"message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
		"message.timestamp.type":          "log.message.timestamp.type", "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
		"min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms", "min.insync.replicas": "min.insync.replicas",
		"preallocate": "log.preallocate", "remote.copy.lag.bytes": "log.remote.copy.lag.bytes",
		"remote.copy.lag.ms": "log.remote.copy.lag.ms", "remote.log.copy.disable": "",
		"remote.log.delete.on.disable": "", "remote.storage.enable": "", "retention.bytes": "log.retention.bytes",
		"retention.ms": "log.retention.ms", "segment.bytes": "log.segment.bytes",
		"segment.index.bytes": "log.index.size.max.bytes", "segment.jitter.ms": "log.roll.jitter.ms",
		"segment.ms": "log.roll.ms", "unclean.leader.election.enable": "unclean.leader.election.enable",
	}
	got := map[string]string{}
	for _, d := range TopicConfigDefs() {
		if d.Name != TopicInternalSegmentBytes {
			got[d.Name] = d.BrokerName
		}
	}
	if len(want) != 37 {
		t.Fatalf("the test lists %d keys, Kafka 4.4 37", len(want))
	}
	for k, b := range want {
		if g, ok := got[k]; !ok || g != b {
			t.Errorf("%s: in table %v, broker synonym %q; want %q", k, ok, g, b)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s is not a Kafka 4.4 topic key", k)
		}
	}
}

func TestValidateConfig(t *testing.T) {
	tests := []struct {
		rt         ResourceType
		key, value string
		wantErr    error
	}{
		{ResourceTopic, "retention.ms", "1000", nil},
		{ResourceTopic, "retention.ms", "-1", nil},
		{ResourceTopic, "retention.ms", " 42 ", nil},
		{ResourceTopic, "retention.ms", "-2", ErrInvalidConfig},
		{ResourceTopic, "retention.ms", "1h", ErrInvalidConfig},
		{ResourceTopic, "retention.ms", "", ErrInvalidConfig},
		{ResourceTopic, "retention.bytes", "-1", nil},
		// Kafka's LogConfig puts no bound on retention.bytes (any negative
		// value is no limit) and takes an empty cleanup.policy (neither
		// delete nor compact: the log is kept whole).
		{ResourceTopic, "retention.bytes", "-5", nil},
		{ResourceTopic, "retention.bytes", "0", nil},
		{ResourceBroker, "log.retention.bytes", "-5", nil},
		{ResourceTopic, "cleanup.policy", "", nil},
		{ResourceTopic, "cleanup.policy", " ", nil},
		{ResourceBroker, "log.cleanup.policy", "", nil},
		{ResourceTopic, "segment.bytes", "1048576", nil},
		{ResourceTopic, "segment.bytes", "13", ErrInvalidConfig},
		{ResourceTopic, "segment.bytes", "2147483648", ErrInvalidConfig},
		{ResourceTopic, "segment.ms", "0", ErrInvalidConfig},
		{ResourceTopic, "cleanup.policy", "compact", nil},
		{ResourceTopic, "cleanup.policy", "compact,delete", nil},
		{ResourceTopic, "cleanup.policy", "delete, compact", nil},
		// Kafka 4.4's ConfigDef.parseValue drops a ValidList key's repeated
		// items (KAFKA-19875) before its validator sees them.
		{ResourceTopic, "cleanup.policy", "compact,compact", nil},
		{ResourceTopic, "cleanup.policy", "delete,compact,delete", nil},
		{ResourceBroker, "log.cleanup.policy", "delete,delete", nil},
		{ResourceTopic, "cleanup.policy", "shred", ErrInvalidConfig},
		{ResourceTopic, "max.message.bytes", "0", nil},
		{ResourceTopic, "max.message.bytes", "-1", ErrInvalidConfig},
		{ResourceTopic, "min.insync.replicas", "2", nil},
		{ResourceTopic, "min.insync.replicas", "0", ErrInvalidConfig},
		{ResourceTopic, "message.timestamp.type", "LogAppendTime", nil},
		{ResourceTopic, "message.timestamp.type", "logappendtime", ErrInvalidConfig},
		{ResourceTopic, "unclean.leader.election.enable", "TRUE", nil},
		{ResourceTopic, "unclean.leader.election.enable", "yes", ErrInvalidConfig},
		{ResourceTopic, "min.cleanable.dirty.ratio", "0.9", nil},
		{ResourceTopic, "min.cleanable.dirty.ratio", "1.5", ErrInvalidConfig},
		{ResourceTopic, "min.cleanable.dirty.ratio", "NaN", ErrInvalidConfig},
		{ResourceTopic, "compression.type", "zstd", nil},
		{ResourceTopic, "compression.type", "brotli", ErrInvalidConfig},
		{ResourceTopic, "flush.messages", "0", ErrInvalidConfig},
		// Kafka 4.4's levels per codec: gzip 1-9 or -1, lz4 1-17, zstd
		// -131072-22.
		{ResourceTopic, "compression.gzip.level", "-1", nil},
		{ResourceTopic, "compression.gzip.level", "9", nil},
		{ResourceTopic, "compression.gzip.level", "0", ErrInvalidConfig},
		{ResourceTopic, "compression.gzip.level", "10", ErrInvalidConfig},
		{ResourceTopic, "compression.gzip.level", "-2", ErrInvalidConfig},
		{ResourceTopic, "compression.lz4.level", "1", nil},
		{ResourceTopic, "compression.lz4.level", "17", nil},
		{ResourceTopic, "compression.lz4.level", "0", ErrInvalidConfig},
		{ResourceTopic, "compression.lz4.level", "18", ErrInvalidConfig},
		{ResourceTopic, "compression.zstd.level", "-131072", nil},
		{ResourceTopic, "compression.zstd.level", "22", nil},
		{ResourceTopic, "compression.zstd.level", "5", nil},
		{ResourceTopic, "compression.zstd.level", "-131073", ErrInvalidConfig},
		{ResourceTopic, "compression.zstd.level", "23", ErrInvalidConfig},
		{ResourceBroker, "compression.zstd.level", "23", ErrInvalidRequest},
		{ResourceBroker, "compression.gzip.level", "5", nil},
		{ResourceTopic, "max.decompressed.message.bytes", "1", nil},
		{ResourceTopic, "max.decompressed.message.bytes", "2147483639", nil},
		{ResourceTopic, "max.decompressed.message.bytes", "0", ErrInvalidConfig},
		{ResourceTopic, "max.decompressed.message.bytes", "2147483640", ErrInvalidConfig},
		{ResourceBroker, "max.decompressed.message.bytes", "1000", nil},
		{ResourceTopic, "remote.copy.lag.ms", "-1", nil},
		{ResourceTopic, "remote.copy.lag.ms", "0", nil},
		{ResourceTopic, "remote.copy.lag.ms", "-2", ErrInvalidConfig},
		{ResourceTopic, "remote.copy.lag.bytes", "-1", nil},
		{ResourceTopic, "remote.copy.lag.bytes", "1048576", nil},
		{ResourceTopic, "remote.copy.lag.bytes", "-2", ErrInvalidConfig},
		{ResourceBroker, "log.remote.copy.lag.ms", "60000", nil},
		{ResourceBroker, "log.remote.copy.lag.bytes", "-2", ErrInvalidRequest},
		{ResourceTopic, "no.such.key", "1", ErrInvalidConfig},
		{ResourceTopic, "log.retention.ms", "1", ErrInvalidConfig},
		{ResourceTopic, TopicInternalSegmentBytes, "2048", nil},
		{ResourceTopic, TopicInternalSegmentBytes, "0", nil},
		{ResourceTopic, TopicInternalSegmentBytes, "2047", ErrInvalidConfig},
		{ResourceTopic, TopicInternalSegmentBytes, "-1", ErrInvalidConfig},
		{ResourceBroker, "log.retention.ms", "1000", nil},
		// A broker key or value refused is INVALID_REQUEST in Kafka 4.4.0 (side
		// by side, interop/cmd/configcompare): "Invalid value x for
		// configuration log.retention.ms", "Cannot update these configs
		// dynamically: [log.dirs]".
		{ResourceBroker, "log.retention.ms", "x", ErrInvalidRequest},
		{ResourceBroker, "retention.ms", "1000", ErrInvalidRequest},
		{ResourceBroker, "log.dirs", "/x", ErrInvalidRequest},
		{ResourceBroker, "message.max.bytes", "2000000", nil},
		{ResourceType(3), "retention.ms", "1", ErrInvalidRequest},
	}
	for _, tt := range tests {
		err := ValidateConfig(tt.rt, tt.key, tt.value)
		if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("ValidateConfig(%v, %q, %q) = %v, want %v", tt.rt, tt.key, tt.value, err, tt.wantErr)
		}
	}
}

// TestUnknownConfigNameMessage: an unknown topic or group key is INVALID_CONFIG
// with Kafka 4.4's message, which kafka-configs prints (side by side with a
// Kafka 4.4 node, session 17).
func TestUnknownConfigNameMessage(t *testing.T) {
	tests := []struct {
		rt   ResourceType
		key  string
		want string
	}{
		{ResourceTopic, "nosuch.cfg", "Unknown topic config name: nosuch.cfg"},
		{ResourceGroup, "bogus", "Unknown group config name: bogus"},
	}
	for _, tt := range tests {
		err := ValidateConfig(tt.rt, tt.key, "1")
		if !errors.Is(err, ErrInvalidConfig) || err.Error() != tt.want {
			t.Errorf("ValidateConfig(%v, %q) = %v, want INVALID_CONFIG %q", tt.rt, tt.key, err, tt.want)
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"a", []string{"a"}},
		{"a, b ,c", []string{"a", "b", "c"}},
		{"a,,b", []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		if got := ParseList(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestResolveTopicConfig(t *testing.T) {
	c := resolveTopicConfig(
		map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"},
		map[string]string{"log.retention.ms": "5000", "log.segment.bytes": "1048576", "log.cleanup.policy": "compact"})
	if c.RetentionMs != 1000 {
		t.Errorf("RetentionMs = %d, want the override 1000", c.RetentionMs)
	}
	if c.SegmentBytes != 1048576 {
		t.Errorf("SegmentBytes = %d, want the cluster default 1048576", c.SegmentBytes)
	}
	if c.CleanupPolicy != CleanupCompact|CleanupDelete {
		t.Errorf("CleanupPolicy = %b, want both", c.CleanupPolicy)
	}
	if c.MaxMessageBytes != 1048588 {
		t.Errorf("MaxMessageBytes = %d, want the built-in default", c.MaxMessageBytes)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{ErrTopicExists, 36},
		{ValidateTopicName(""), 17},
		{ValidateConfig(ResourceTopic, "retention.ms", "x"), 40},
		{errors.New("plain"), -1},
		{ErrCorrupt, -1},
		{fmt.Errorf("%w: broker 1", ErrDuplicateBrokerRegistration), 101},
		{ErrIneligibleReplica, 107},
		{ErrElectionNotNeeded, 84},
		{ErrPreferredLeaderNotAvailable, 80},
	}
	for _, tt := range tests {
		if got := ErrorCode(tt.err); got != tt.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestReplicationThrottleConfigs(t *testing.T) {
	img := NewImage()
	if l, f := img.ReplicationThrottleRates(1); l != throttle.Unlimited || f != throttle.Unlimited {
		t.Fatalf("no throttle configs: rates %d, %d", l, f)
	}
	img, err := ApplyAll(img, []Record{
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Key: LeaderReplicationThrottledRate, Value: "500"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Key: LeaderReplicationThrottledRate, Value: "100"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Key: FollowerReplicationThrottledRate, Value: "200"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, f := img.ReplicationThrottleRates(1); l != 100 || f != 200 {
		t.Errorf("broker 1: rates %d, %d; want its own 100, 200", l, f)
	}
	if l, f := img.ReplicationThrottleRates(2); l != 500 || f != throttle.Unlimited {
		t.Errorf("broker 2: rates %d, %d; want the cluster-wide 500 and unlimited", l, f)
	}
	// Kafka 4.4 defines the rates outside KafkaConfig's ConfigDef (QuotaConfig.
	// brokerQuotaConfigs), so ConfigHelper lists them for a broker only where
	// set, for it or cluster-wide, with no default synonym, and not read-only
	// (DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS holds them).
	for _, tt := range []struct {
		broker string
		want   map[string]ConfigEntry
	}{
		{"1", map[string]ConfigEntry{
			LeaderReplicationThrottledRate:   {Value: "100", Source: SourceBroker, Synonyms: []ConfigSynonym{{LeaderReplicationThrottledRate, "100", SourceBroker}, {LeaderReplicationThrottledRate, "500", SourceClusterDefault}}},
			FollowerReplicationThrottledRate: {Value: "200", Source: SourceBroker, Synonyms: []ConfigSynonym{{FollowerReplicationThrottledRate, "200", SourceBroker}}},
		}},
		{"2", map[string]ConfigEntry{
			LeaderReplicationThrottledRate: {Value: "500", Source: SourceClusterDefault, Synonyms: []ConfigSynonym{{LeaderReplicationThrottledRate, "500", SourceClusterDefault}}},
		}},
		{"", map[string]ConfigEntry{
			LeaderReplicationThrottledRate: {Value: "500", Source: SourceClusterDefault, Synonyms: []ConfigSynonym{{LeaderReplicationThrottledRate, "500", SourceClusterDefault}}},
		}},
	} {
		got := map[string]ConfigEntry{}
		for _, e := range img.BrokerConfigEntries(tt.broker) {
			if e.Name == LeaderReplicationThrottledRate || e.Name == FollowerReplicationThrottledRate {
				got[e.Name] = ConfigEntry{Value: e.Value, Source: e.Source, Synonyms: e.Synonyms}
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("broker %q describes the rates\n%+v\nwant\n%+v", tt.broker, got, tt.want)
		}
	}
	if es := NewImage().BrokerConfigEntries("1"); slices.ContainsFunc(es, func(e ConfigEntry) bool { return e.Name == LeaderReplicationThrottledRate }) {
		t.Errorf("a broker with no rate set lists %s", LeaderReplicationThrottledRate)
	}
	for _, v := range []string{"-1", "x", ""} {
		if err := ValidateConfig(ResourceBroker, LeaderReplicationThrottledRate, v); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("rate %q: err %v", v, err)
		}
	}
	c := resolveTopicConfig(map[string]string{"leader.replication.throttled.replicas": "0:1,2:3", "follower.replication.throttled.replicas": "*"}, nil)
	if !c.LeaderThrottledReplicas.Has(2, 3) || c.LeaderThrottledReplicas.Has(0, 3) || !c.FollowerThrottledReplicas.Has(9, 9) {
		t.Errorf("resolved throttled replicas %+v %+v", c.LeaderThrottledReplicas, c.FollowerThrottledReplicas)
	}
}

func TestCanonicalValue(t *testing.T) {
	for _, tt := range []struct{ key, value, want string }{
		{"preallocate", " True ", "true"},
		{"retention.ms", "+0100", "100"},
		{"retention.bytes", "-1", "-1"},
		{"cleanup.policy", " compact ,delete", "compact,delete"},
		{"cleanup.policy", "delete, delete", "delete"},
		{"cleanup.policy", "compact,delete,compact", "compact,delete"},
		{"follower.replication.throttled.replicas", "0:1,0:1", "0:1,0:1"},
		{"follower.replication.throttled.replicas", "", ""},
		{"compression.type", " lz4", "lz4"},
		{"min.cleanable.dirty.ratio", "0", "0.0"},
		{"min.cleanable.dirty.ratio", "0.5", "0.5"},
		{"min.cleanable.dirty.ratio", "1", "1.0"},
		{"min.cleanable.dirty.ratio", "0.001", "0.001"},
		{"min.cleanable.dirty.ratio", "0.00025", "2.5E-4"},
	} {
		d, _ := LookupTopicConfig(tt.key)
		if got := d.canonical(tt.value); got != tt.want {
			t.Errorf("%s=%q reads back as %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
	if got := javaDouble(12345678.5); got != "1.23456785E7" {
		t.Errorf("javaDouble(12345678.5) = %q, want 1.23456785E7", got)
	}
}
