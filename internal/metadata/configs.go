package metadata

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/throttle"
)

// ConfigType is the type of a config value, with Kafka's DescribeConfigs codes.
type ConfigType int8

// Config types used by the topic table.
const (
	ConfigTypeBoolean ConfigType = 1
	ConfigTypeString  ConfigType = 2
	ConfigTypeInt     ConfigType = 3
	ConfigTypeLong    ConfigType = 5
	ConfigTypeDouble  ConfigType = 6
	ConfigTypeList    ConfigType = 7
)

// ConfigSource says where a described value comes from, with Kafka's
// DescribeConfigs codes.
type ConfigSource int8

// Config sources, most specific first.
const (
	SourceTopic          ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: a topic override
	SourceBroker         ConfigSource = 2 // DYNAMIC_BROKER_CONFIG: set for one broker
	SourceClusterDefault ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: set for all brokers
	SourceBrokerLogger   ConfigSource = 6 // DYNAMIC_BROKER_LOGGER_CONFIG: a logger's level
	SourceDefault        ConfigSource = 5 // DEFAULT_CONFIG: the built-in default
)

// ResourceType is the kind of resource a config belongs to, with Kafka's codes.
type ResourceType int8

// Resource types that carry configs. Broker loggers' are the handlers' own
// (never in the metadata log); client metrics' are subscriptions
// (clientmetrics.go).
const (
	ResourceTopic         ResourceType = 2
	ResourceBroker        ResourceType = 4
	ResourceBrokerLogger  ResourceType = 8
	ResourceClientMetrics ResourceType = 16
)

func (t ResourceType) String() string {
	switch t {
	case ResourceTopic:
		return "topic"
	case ResourceBroker:
		return "broker"
	case ResourceGroup:
		return "group"
	case ResourceBrokerLogger:
		return "broker logger"
	case ResourceClientMetrics:
		return "client metrics"
	}
	return "resource type " + strconv.Itoa(int(t))
}

// CleanupPolicy is the set of cleanup.policy values.
type CleanupPolicy uint8

// Cleanup policies; a topic may have both, or neither (an empty
// cleanup.policy: its log is kept whole).
const (
	CleanupDelete CleanupPolicy = 1 << iota
	CleanupCompact
)

// TimestampType is message.timestamp.type, numbered like the record-batch
// attribute bit.
type TimestampType int8

// Timestamp types.
const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// TopicConfig is a topic's effective configuration: every key of the table,
// resolved from the topic's overrides, then (on one broker: Image.TopicConfigOn)
// that broker's own broker configs, then the cluster-wide broker defaults,
// then the built-in defaults.
type TopicConfig struct {
	CleanupPolicy CleanupPolicy
	// CompressionGzipLevel, CompressionLz4Level and CompressionZstdLevel are
	// the levels a broker that recompresses would use; Strata never
	// recompresses (batches are stored as produced), so they are only kept.
	CompressionGzipLevel  int32
	CompressionLz4Level   int32
	CompressionType       string
	CompressionZstdLevel  int32
	DeleteRetentionMs     int64
	DeadLetterGroupEnable bool // errors.deadletterqueue.group.enable (KIP-1191)
	FileDeleteDelayMs     int64
	FlushMessages         int64
	FlushMs               int64
	// FollowerThrottledReplicas and LeaderThrottledReplicas are the replicas
	// the replication throttle applies to (KIP-73); nil lists none.
	FollowerThrottledReplicas *throttle.Replicas
	IndexIntervalBytes        int32
	LeaderThrottledReplicas   *throttle.Replicas
	LocalRetentionBytes       int64
	LocalRetentionMs          int64
	MaxCompactionLagMs        int64
	// MaxDecompressedMessageBytes is the largest record, decompressed, a
	// produce may carry.
	MaxDecompressedMessageBytes int32
	MaxMessageBytes             int32
	MessageTimestampAfterMaxMs  int64
	MessageTimestampBeforeMaxMs int64
	MessageTimestampType        TimestampType
	MinCleanableDirtyRatio      float64
	MinCompactionLagMs          int64
	MinInsyncReplicas           int32
	Preallocate                 bool
	RemoteStorageEnable         bool
	// RemoteLogCopyDisable stops uploads while the remote part is still read
	// and kept by retention; RemoteLogDeleteOnDisable allows turning remote
	// storage off, deleting the remote part (KIP-950).
	RemoteLogCopyDisable     bool
	RemoteLogDeleteOnDisable bool
	// RemoteCopyLagMs and RemoteCopyLagBytes are Kafka's upload eligibility
	// lags (-1: the local retention; RemoteCopyLag resolves them).
	RemoteCopyLagBytes int64
	RemoteCopyLagMs    int64
	RetentionBytes     int64
	RetentionMs        int64
	SegmentBytes       int32
	// InternalSegmentBytes is internal.segment.bytes: when above 0, the segment
	// size in place of SegmentBytes, below segment.bytes' 1 MiB floor (tests).
	InternalSegmentBytes        int32
	SegmentIndexBytes           int32
	SegmentJitterMs             int64
	SegmentMs                   int64
	UncleanLeaderElectionEnable bool
}

// ConfigDef describes one topic config key: the single table behind validation,
// resolution and DescribeConfigs.
type ConfigDef struct {
	Name    string
	Type    ConfigType
	Default string
	// BrokerName is the broker-level key (Kafka's synonym) whose value, set
	// for one broker or cluster-wide, replaces Default for every topic without
	// an override (on that broker, or on every one); empty for a key that
	// exists only per topic.
	BrokerName string
	// set parses v, checks it and stores it in c.
	set func(c *TopicConfig, v string) error
}

// Validate reports whether v is an acceptable value for the key.
func (d ConfigDef) Validate(v string) error {
	var scratch TopicConfig
	if err := d.set(&scratch, v); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, d.Name, v, err)
	}
	return nil
}

// canonical is v as Kafka's config parser reads it back by the key's type
// (booleans in lower case, integers without sign or padding, doubles as Java
// prints them, list items trimmed and joined by commas, cleanup.policy's
// without repeats, strings trimmed):
// Kafka's DescribeConfigs shows a topic's values so. A value that does not
// parse (never stored: values are validated) is returned as it is.
func (d ConfigDef) canonical(v string) string {
	s := strings.TrimSpace(v)
	switch d.Type {
	case ConfigTypeBoolean:
		if b, err := parseBool(s); err == nil {
			return strconv.FormatBool(b)
		}
	case ConfigTypeInt, ConfigTypeLong:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case ConfigTypeDouble:
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return javaDouble(f)
		}
	case ConfigTypeList:
		items := ParseList(s)
		if d.Name == "cleanup.policy" {
			items = distinct(items)
		}
		return strings.Join(items, ",")
	case ConfigTypeString:
		return s
	}
	return v
}

// javaDouble formats f as Java's Double.toString does: plain from 10^-3 up to
// 10^7, with at least one digit after the point (1.0), else in scientific
// notation (1.0E-4).
func javaDouble(f float64) string {
	if abs := math.Abs(f); f == 0 || abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'E', -1, 64), "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(n)
}

const (
	maxInt32 = math.MaxInt32
	maxInt64 = math.MaxInt64
	// maxDecompressedMessageBytes is the largest max.decompressed.message.bytes
	// (Kafka's, the largest Java array), and its default: no practical limit.
	maxDecompressedMessageBytes = math.MaxInt32 - 8
)

// TopicInternalSegmentBytes is Kafka 4's internal topic key for segments
// smaller than segment.bytes allows, for tests. DescribeConfigs lists it only
// where a topic sets it, as Kafka does.
const TopicInternalSegmentBytes = "internal.segment.bytes"

// minInternalSegmentBytes is storage.MinSegmentBytes, the smallest segment a
// log takes.
const minInternalSegmentBytes = 2 << 10

// SegmentSize is the size a segment rolls at: internal.segment.bytes when set,
// else segment.bytes.
func (c TopicConfig) SegmentSize() int32 {
	if c.InternalSegmentBytes > 0 {
		return c.InternalSegmentBytes
	}
	return c.SegmentBytes
}

// topicConfigDefs is sorted by Name. Defaults and validators follow Kafka's.
var topicConfigDefs = []ConfigDef{
	{"cleanup.policy", ConfigTypeList, "delete", "log.cleanup.policy",
		func(c *TopicConfig, v string) (err error) { c.CleanupPolicy, err = parseCleanupPolicy(v); return }},
	{"compression.gzip.level", ConfigTypeInt, "-1", "compression.gzip.level",
		func(c *TopicConfig, v string) error {
			// gzip's levels, or -1 for its own default (Kafka's range).
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n > 9 || n < 1 && n != -1 {
				return fmt.Errorf("want an integer in [1, 9] or -1")
			}
			c.CompressionGzipLevel = int32(n)
			return nil
		}},
	{"compression.lz4.level", ConfigTypeInt, "9", "compression.lz4.level",
		int32Key(1, 17, func(c *TopicConfig) *int32 { return &c.CompressionLz4Level })},
	{"compression.type", ConfigTypeString, "producer", "compression.type",
		func(c *TopicConfig, v string) (err error) {
			c.CompressionType, err = oneOf(v, "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
			return
		}},
	{"compression.zstd.level", ConfigTypeInt, "3", "compression.zstd.level",
		int32Key(-131072, 22, func(c *TopicConfig) *int32 { return &c.CompressionZstdLevel })},
	{"delete.retention.ms", ConfigTypeLong, "86400000", "log.cleaner.delete.retention.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.DeleteRetentionMs })},
	{TopicDeadLetterGroupEnable, ConfigTypeBoolean, "false", "",
		boolean(func(c *TopicConfig) *bool { return &c.DeadLetterGroupEnable })},
	{"file.delete.delay.ms", ConfigTypeLong, "60000", "log.segment.delete.delay.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.FileDeleteDelayMs })},
	{"flush.messages", ConfigTypeLong, "9223372036854775807", "log.flush.interval.messages",
		long(1, maxInt64, func(c *TopicConfig) *int64 { return &c.FlushMessages })},
	{"flush.ms", ConfigTypeLong, "9223372036854775807", "log.flush.interval.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.FlushMs })},
	{"follower.replication.throttled.replicas", ConfigTypeList, "", "",
		throttledReplicas(func(c *TopicConfig) **throttle.Replicas { return &c.FollowerThrottledReplicas })},
	{"index.interval.bytes", ConfigTypeInt, "4096", "log.index.interval.bytes",
		int32Key(0, maxInt32, func(c *TopicConfig) *int32 { return &c.IndexIntervalBytes })},
	{TopicInternalSegmentBytes, ConfigTypeInt, "0", "",
		func(c *TopicConfig, v string) error {
			// 0 (the default) leaves segment.bytes in force; else at least the
			// log's floor (storage.MinSegmentBytes). Kafka takes any integer.
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n != 0 && n < minInternalSegmentBytes {
				return fmt.Errorf("want 0 or an integer in [%d, %d]", minInternalSegmentBytes, maxInt32)
			}
			c.InternalSegmentBytes = int32(n)
			return nil
		}},
	{"leader.replication.throttled.replicas", ConfigTypeList, "", "",
		throttledReplicas(func(c *TopicConfig) **throttle.Replicas { return &c.LeaderThrottledReplicas })},
	{"local.retention.bytes", ConfigTypeLong, "-2", "log.local.retention.bytes",
		long(-2, maxInt64, func(c *TopicConfig) *int64 { return &c.LocalRetentionBytes })},
	{"local.retention.ms", ConfigTypeLong, "-2", "log.local.retention.ms",
		long(-2, maxInt64, func(c *TopicConfig) *int64 { return &c.LocalRetentionMs })},
	{"max.compaction.lag.ms", ConfigTypeLong, "9223372036854775807", "log.cleaner.max.compaction.lag.ms",
		long(1, maxInt64, func(c *TopicConfig) *int64 { return &c.MaxCompactionLagMs })},
	{"max.decompressed.message.bytes", ConfigTypeInt, "2147483639", "max.decompressed.message.bytes",
		int32Key(1, maxDecompressedMessageBytes, func(c *TopicConfig) *int32 { return &c.MaxDecompressedMessageBytes })},
	{"max.message.bytes", ConfigTypeInt, "1048588", "message.max.bytes",
		int32Key(0, maxInt32, func(c *TopicConfig) *int32 { return &c.MaxMessageBytes })},
	{"message.timestamp.after.max.ms", ConfigTypeLong, "3600000", "log.message.timestamp.after.max.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.MessageTimestampAfterMaxMs })},
	{"message.timestamp.before.max.ms", ConfigTypeLong, "9223372036854775807", "log.message.timestamp.before.max.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.MessageTimestampBeforeMaxMs })},
	{"message.timestamp.type", ConfigTypeString, "CreateTime", "log.message.timestamp.type",
		func(c *TopicConfig, v string) error {
			s, err := oneOf(v, "CreateTime", "LogAppendTime")
			c.MessageTimestampType = CreateTime
			if s == "LogAppendTime" {
				c.MessageTimestampType = LogAppendTime
			}
			return err
		}},
	{"min.cleanable.dirty.ratio", ConfigTypeDouble, "0.5", "log.cleaner.min.cleanable.ratio",
		func(c *TopicConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
				return fmt.Errorf("want a number between 0 and 1")
			}
			c.MinCleanableDirtyRatio = f
			return nil
		}},
	{"min.compaction.lag.ms", ConfigTypeLong, "0", "log.cleaner.min.compaction.lag.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.MinCompactionLagMs })},
	{"min.insync.replicas", ConfigTypeInt, "1", "min.insync.replicas",
		int32Key(1, maxInt32, func(c *TopicConfig) *int32 { return &c.MinInsyncReplicas })},
	{"preallocate", ConfigTypeBoolean, "false", "log.preallocate",
		boolean(func(c *TopicConfig) *bool { return &c.Preallocate })},
	{"remote.copy.lag.bytes", ConfigTypeLong, "-1", "log.remote.copy.lag.bytes",
		long(-1, maxInt64, func(c *TopicConfig) *int64 { return &c.RemoteCopyLagBytes })},
	{"remote.copy.lag.ms", ConfigTypeLong, "0", "log.remote.copy.lag.ms",
		long(-1, maxInt64, func(c *TopicConfig) *int64 { return &c.RemoteCopyLagMs })},
	{"remote.log.copy.disable", ConfigTypeBoolean, "false", "",
		boolean(func(c *TopicConfig) *bool { return &c.RemoteLogCopyDisable })},
	{"remote.log.delete.on.disable", ConfigTypeBoolean, "false", "",
		boolean(func(c *TopicConfig) *bool { return &c.RemoteLogDeleteOnDisable })},
	{"remote.storage.enable", ConfigTypeBoolean, "false", "",
		boolean(func(c *TopicConfig) *bool { return &c.RemoteStorageEnable })},
	{"retention.bytes", ConfigTypeLong, "-1", "log.retention.bytes",
		long(math.MinInt64, maxInt64, func(c *TopicConfig) *int64 { return &c.RetentionBytes })}, // unbounded in Kafka: below 0 is no limit
	{"retention.ms", ConfigTypeLong, "604800000", "log.retention.ms",
		long(-1, maxInt64, func(c *TopicConfig) *int64 { return &c.RetentionMs })},
	{"segment.bytes", ConfigTypeInt, "1073741824", "log.segment.bytes",
		int32Key(14, maxInt32, func(c *TopicConfig) *int32 { return &c.SegmentBytes })},
	{"segment.index.bytes", ConfigTypeInt, "10485760", "log.index.size.max.bytes",
		int32Key(4, maxInt32, func(c *TopicConfig) *int32 { return &c.SegmentIndexBytes })},
	{"segment.jitter.ms", ConfigTypeLong, "0", "log.roll.jitter.ms",
		long(0, maxInt64, func(c *TopicConfig) *int64 { return &c.SegmentJitterMs })},
	{"segment.ms", ConfigTypeLong, "604800000", "log.roll.ms",
		long(1, maxInt64, func(c *TopicConfig) *int64 { return &c.SegmentMs })},
	{"unclean.leader.election.enable", ConfigTypeBoolean, "false", "unclean.leader.election.enable",
		boolean(func(c *TopicConfig) *bool { return &c.UncleanLeaderElectionEnable })},
}

// coarserDefaults are the broker keys that Kafka defines without a default:
// theirs is a coarser synonym's (log.retention.hours for log.retention.ms).
// As Kafka's ConfigHelper lists them, that default comes after the key's set
// values and is left out when none is set (Kafka drops the synonyms before
// the key's own name); a broker then describes the key as null.
var coarserDefaults = map[string]ConfigSynonym{
	"log.flush.interval.ms": {"log.flush.scheduler.interval.ms", "9223372036854775807", SourceDefault},
	"log.retention.ms":      {"log.retention.hours", "168", SourceDefault},
	"log.roll.jitter.ms":    {"log.roll.jitter.hours", "0", SourceDefault},
	"log.roll.ms":           {"log.roll.hours", "168", SourceDefault},
}

var (
	topicDefsByName    = make(map[string]*ConfigDef, len(topicConfigDefs))
	topicDefsByBroker  = make(map[string]*ConfigDef, len(topicConfigDefs))
	defaultTopicConfig TopicConfig
)

func init() {
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		topicDefsByName[d.Name] = d
		if d.BrokerName != "" { // else a topic-only key (remote.storage.enable)
			topicDefsByBroker[d.BrokerName] = d
		}
		if err := d.set(&defaultTopicConfig, d.Default); err != nil {
			panic(fmt.Sprintf("metadata: built-in default %s=%q: %v", d.Name, d.Default, err))
		}
	}
}

// TopicConfigDefs returns the topic config table, sorted by name.
func TopicConfigDefs() []ConfigDef {
	return append([]ConfigDef(nil), topicConfigDefs...)
}

// LookupTopicConfig finds a topic config key.
func LookupTopicConfig(key string) (ConfigDef, bool) {
	d, ok := topicDefsByName[key]
	if !ok {
		return ConfigDef{}, false
	}
	return *d, true
}

// LookupBrokerConfig finds a broker config key. The broker keys Strata accepts are
// the broker-level synonyms of the topic keys (a value of one, for a broker or
// cluster-wide, becomes the default of its topic key there) and the broker-only keys (brokerOnlyConfigDefs).
func LookupBrokerConfig(key string) (ConfigDef, bool) {
	d, ok := topicDefsByBroker[key]
	if !ok {
		d, ok = brokerOnlyDefsByName[key]
	}
	if !ok {
		return ConfigDef{}, false
	}
	return *d, true
}

// DefaultTopicConfig returns the built-in defaults of every topic key.
func DefaultTopicConfig() TopicConfig { return defaultTopicConfig }

// ValidateConfig checks one key and value for a resource type, as applying a
// metadata record does. A broker key or value refused is INVALID_REQUEST, as in
// Kafka 4.4; a topic or group one INVALID_CONFIG.
func ValidateConfig(rt ResourceType, key, value string) error {
	d, err := LookupConfig(rt, key)
	if err != nil {
		return err
	}
	if err := d.set(&TopicConfig{}, value); err != nil {
		if ErrorCode(err) != kerr.UnknownServerError.Code { // the validator chose Kafka's code
			return err
		}
		return fmt.Errorf("%w: %s=%q: %v", refusal(rt), key, value, err)
	}
	return nil
}

// requestMinimums are floors Kafka 4 puts on values set by a request that a
// value already in the metadata log need not meet: a topic created with a
// smaller value by an older Strata still loads. internal.segment.bytes has no
// such floor (Kafka's key for tests that need small segments).
var requestMinimums = map[string]int64{"segment.bytes": 1 << 20, "log.segment.bytes": 1 << 20}

// ValidateConfigChange checks a value a request sets (CreateTopics,
// AlterConfigs, IncrementalAlterConfigs): ValidateConfig and the floors of
// requestMinimums.
func ValidateConfigChange(rt ResourceType, key, value string) error {
	if err := ValidateConfig(rt, key, value); err != nil {
		return err
	}
	if floor, ok := requestMinimums[key]; ok {
		if n, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64); n < floor {
			return fmt.Errorf("%w: invalid value %s for configuration %s: value must be at least %d", refusal(rt), value, key, floor)
		}
	}
	return nil
}

// refusal is the sentinel of a refused key or value: Kafka answers
// INVALID_REQUEST for broker and client metrics configs, INVALID_CONFIG for
// the others.
func refusal(rt ResourceType) *KafkaError {
	if rt == ResourceBroker || rt == ResourceClientMetrics {
		return ErrInvalidRequest
	}
	return ErrInvalidConfig
}

// LookupConfig finds the definition of a key of a resource type.
func LookupConfig(rt ResourceType, key string) (ConfigDef, error) {
	var (
		d  ConfigDef
		ok bool
	)
	switch rt {
	case ResourceTopic:
		d, ok = LookupTopicConfig(key)
	case ResourceBroker:
		d, ok = LookupBrokerConfig(key)
	case ResourceGroup:
		d, ok = LookupGroupConfig(key)
	case ResourceClientMetrics:
		d, ok = LookupClientMetricsConfig(key)
	default:
		return ConfigDef{}, fmt.Errorf("%w: configs of %v are not supported", ErrInvalidRequest, rt)
	}
	switch {
	case ok:
		return d, nil
	case rt == ResourceTopic || rt == ResourceGroup: // Kafka's words, which kafka-configs prints
		return ConfigDef{}, KafkaText(ErrInvalidConfig, "Unknown %v config name: %s", rt, key)
	}
	return ConfigDef{}, fmt.Errorf("%w: unknown %v config %q", refusal(rt), rt, key)
}

// ParseList splits a LIST value the way Kafka does: comma separated, items
// trimmed, an empty or all-blank value is the empty list.
func ParseList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// resolveTopicConfig computes a topic's effective configuration: its
// overrides, else the first of brokerLevels (broker configs, most specific
// first) that sets the key's broker synonym, else the built-in default.
// Stored values were validated before they were stored, so a value that fails
// to parse here is impossible; it would leave the default in place.
func resolveTopicConfig(overrides map[string]string, brokerLevels ...map[string]string) TopicConfig {
	c := defaultTopicConfig
	if len(overrides) == 0 && !slices.ContainsFunc(brokerLevels, func(m map[string]string) bool { return len(m) > 0 }) {
		return c
	}
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		v, ok := overrides[d.Name]
		for _, level := range brokerLevels {
			if ok {
				break
			}
			v, ok = level[d.BrokerName]
		}
		if ok {
			_ = d.set(&c, v)
		}
	}
	return c
}

// ConfigSynonym is one level of a described value's resolution chain.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one described config value.
type ConfigEntry struct {
	Name  string
	Value string
	// NullValue says the value is null: Kafka's broker describes so a key
	// without a default that is set nowhere (coarserDefaults).
	NullValue bool
	Source    ConfigSource
	Type      ConfigType
	IsDefault bool
	// Synonyms lists every level that has a value, most specific first (the
	// first is the effective value), as Kafka 4.4 lists them: the built-in
	// default last, under the broker key it comes from; a topic key with no
	// broker key has no default synonym.
	Synonyms []ConfigSynonym
	// Documentation is what the key does (configdocs.go).
	Documentation string
}

// describe builds the entry named name for d from the levels that may hold a
// value, most specific first, and the built-in default of the broker key
// defaultOf (none when empty; a coarser synonym's, if any, only after a value
// of defaultOf).
func describe(d *ConfigDef, name, defaultOf string, levels ...describeLevel) ConfigEntry {
	e := ConfigEntry{Name: name, Type: d.Type, Documentation: d.Doc()}
	brokerValue := false
	for _, l := range levels {
		if v, ok := l.values[l.key]; ok && l.key != "" {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: l.key, Value: v, Source: l.source})
			brokerValue = brokerValue || l.key == defaultOf
		}
	}
	if coarser, ok := coarserDefaults[defaultOf]; ok {
		if brokerValue {
			e.Synonyms = append(e.Synonyms, coarser)
		}
	} else if defaultOf != "" {
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: defaultOf, Value: d.Default, Source: SourceDefault})
	}
	e.Value, e.Source = d.Default, SourceDefault
	if len(e.Synonyms) > 0 {
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
	}
	e.IsDefault = e.Source == SourceDefault
	return e
}

type describeLevel struct {
	source ConfigSource
	key    string
	values map[string]string
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func long(lo, hi int64, field func(*TopicConfig) *int64) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want an integer in [%d, %d]", lo, hi)
		}
		*field(c) = n
		return nil
	}
}

func int32Key(lo, hi int32, field func(*TopicConfig) *int32) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || int32(n) < lo || int32(n) > hi {
			return fmt.Errorf("want an integer in [%d, %d]", lo, hi)
		}
		*field(c) = int32(n)
		return nil
	}
}

func boolean(field func(*TopicConfig) *bool) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) (err error) {
		*field(c), err = parseBool(v)
		return err
	}
}

// parseBool reads a BOOLEAN value as Kafka does: true or false, any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

func oneOf(v string, allowed ...string) (string, error) {
	v = strings.TrimSpace(v)
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
}

// distinct is items without repeats, first occurrences in order: how Kafka
// 4.4's ConfigDef.parseValue reads a key validated by a ValidList
// (cleanup.policy; the throttled replica lists keep theirs).
func distinct(items []string) []string {
	var out []string
	for _, it := range items {
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// parseCleanupPolicy reads cleanup.policy: delete, compact, both, or none (an
// empty list, which Kafka takes too). An item listed twice counts once, as
// Kafka 4.4 drops the repeat.
func parseCleanupPolicy(v string) (CleanupPolicy, error) {
	var p CleanupPolicy
	for _, it := range ParseList(v) {
		var bit CleanupPolicy
		switch it {
		case "delete":
			bit = CleanupDelete
		case "compact":
			bit = CleanupCompact
		default:
			return 0, fmt.Errorf("%q is not delete or compact", it)
		}
		p |= bit
	}
	return p, nil
}
