package metadata

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ResourceGroup is Kafka's GROUP config resource type: dynamic configs of one group
// (IncrementalAlterConfigs, `kafka-configs --entity-type groups`), kept in the image
// by group id.
const ResourceGroup ResourceType = 32

// SourceGroup is DescribeConfigs' DYNAMIC_GROUP_CONFIG source.
const SourceGroup ConfigSource = 8

// Group config keys Strata acts on (consumer groups, KIP-848; share groups,
// KIP-932; streams groups, KIP-1071), with Kafka's defaults.
const (
	GroupConsumerSessionTimeout    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatInterval = "consumer.heartbeat.interval.ms"
	GroupShareAutoOffsetReset      = "share.auto.offset.reset"
	GroupShareRecordLockDuration   = "share.record.lock.duration.ms"
	GroupShareDeliveryCountLimit   = "share.delivery.count.limit"
	GroupShareIsolationLevel       = "share.isolation.level"
	GroupStreamsSessionTimeout     = "streams.session.timeout.ms"
	GroupStreamsHeartbeatInterval  = "streams.heartbeat.interval.ms"
	GroupStreamsStandbyReplicas    = "streams.num.standby.replicas"
	GroupStreamsWarmupReplicas     = "streams.num.warmup.replicas"
	GroupStreamsRecoveryLag        = "streams.acceptable.recovery.lag"
	GroupStreamsRackAwareTags      = "streams.rack.aware.assignment.tags"
	// Dead-letter topics of share groups (KIP-1191, deadletter.go).
	GroupDeadLetterTopic      = "errors.deadletterqueue.topic.name"
	GroupDeadLetterCopyRecord = "errors.deadletterqueue.copy.record.enable"
)

// groupConfigDefs is sorted by Name. A group config describes no topic: its set
// function only validates.
var groupConfigDefs = []ConfigDef{
	// Kafka's bounds are the broker's group.consumer.min/max.* configs, at
	// their defaults.
	{Name: GroupConsumerHeartbeatInterval, Type: ConfigTypeInt, Default: "5000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 5000, 15000) }},
	{Name: GroupConsumerSessionTimeout, Type: ConfigTypeInt, Default: "45000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 45000, 60000) }},
	{Name: GroupDeadLetterCopyRecord, Type: ConfigTypeBoolean, Default: "false",
		set: func(_ *TopicConfig, v string) error { _, err := parseBool(v); return err }},
	{Name: GroupDeadLetterTopic, Type: ConfigTypeString, Default: "",
		set: func(_ *TopicConfig, v string) error { return validDeadLetterName(v) }},
	{Name: GroupShareAutoOffsetReset, Type: ConfigTypeString, Default: "latest",
		set: func(_ *TopicConfig, v string) error { _, err := oneOf(v, "latest", "earliest"); return err }},
	{Name: GroupShareDeliveryCountLimit, Type: ConfigTypeInt, Default: "5",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 2, 10) }},
	{Name: GroupShareIsolationLevel, Type: ConfigTypeString, Default: "read_uncommitted",
		set: func(_ *TopicConfig, v string) error {
			_, err := oneOf(v, "read_committed", "read_uncommitted")
			return err
		}},
	{Name: GroupShareRecordLockDuration, Type: ConfigTypeInt, Default: "30000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 1000, 3600000) }},
	// Bounded by group.streams.min/max.*, at their defaults.
	{Name: GroupStreamsRecoveryLag, Type: ConfigTypeLong, Default: "10000",
		set: func(_ *TopicConfig, v string) error { return longAtLeast(v, 0) }},
	{Name: GroupStreamsHeartbeatInterval, Type: ConfigTypeInt, Default: "5000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 5000, 15000) }},
	{Name: GroupStreamsStandbyReplicas, Type: ConfigTypeInt, Default: "0",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 0, 2) }},
	{Name: GroupStreamsWarmupReplicas, Type: ConfigTypeInt, Default: "2",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 0, 20) }},
	{Name: GroupStreamsRackAwareTags, Type: ConfigTypeList, Default: "",
		set: func(_ *TopicConfig, v string) error { _, err := ParseRackAwareTags(v); return err }},
	{Name: GroupStreamsSessionTimeout, Type: ConfigTypeInt, Default: "45000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 45000, 60000) }},
}

func longAtLeast(v string, lo int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("not a long")
	}
	if n < lo {
		return fmt.Errorf("must be at least %d", lo)
	}
	return nil
}

// ParseRackAwareTags parses streams.rack.aware.assignment.tags: client tag keys,
// comma-separated, none twice.
func ParseRackAwareTags(v string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("%s must not contain duplicate tag keys", GroupStreamsRackAwareTags)
		}
		out = append(out, k)
	}
	return out, nil
}

func intIn(v string, lo, hi int64) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return fmt.Errorf("not an int")
	}
	if n < lo || n > hi {
		return fmt.Errorf("must be in [%d, %d]", lo, hi)
	}
	return nil
}

// LookupGroupConfig finds a group config key.
func LookupGroupConfig(key string) (ConfigDef, bool) { return findDef(groupConfigDefs, key) }

// findDef finds the key of a short table by name.
func findDef(defs []ConfigDef, key string) (ConfigDef, bool) {
	i := slices.IndexFunc(defs, func(d ConfigDef) bool { return d.Name == key })
	if i < 0 {
		return ConfigDef{}, false
	}
	return defs[i], true
}

// ValidateGroupResource checks a group resource name: any non-empty group id.
func ValidateGroupResource(name string) error {
	if name == "" {
		return fmt.Errorf("%w: group resource without a group id", ErrInvalidRequest)
	}
	return nil
}

// GroupConfigs returns the dynamic configs set for a group (nil when none). Never
// modify the map.
func (img *Image) GroupConfigs(name string) map[string]string { return img.groupConfigs[name] }

// GroupConfig returns a group config's effective value: the group's own, else the
// default.
func (img *Image) GroupConfig(name, key string) string {
	if v, ok := img.groupConfigs[name][key]; ok {
		return v
	}
	d, _ := LookupGroupConfig(key)
	return d.Default
}

// GroupConfigEntries describes every group config key of a group, for
// DescribeConfigs.
func (img *Image) GroupConfigEntries(name string) []ConfigEntry {
	es := make([]ConfigEntry, 0, len(groupConfigDefs))
	for i := range groupConfigDefs {
		d := &groupConfigDefs[i]
		es = append(es, describe(d, d.Name, d.Name, describeLevel{SourceGroup, d.Name, img.groupConfigs[name]}))
	}
	return es
}

// groupConfig applies a ConfigRecord of a group resource.
func (b *builder) groupConfig(r *ConfigRecord) error {
	if err := ValidateGroupResource(r.ResourceName); err != nil {
		return err
	}
	setNamedConfig(&b.img.groupConfigs, &b.ownGroupConfigs, r)
	return nil
}

// setNamedConfig applies r to a map of configs by resource name (group and
// client metrics resources), copying the map the first time the builder
// changes it; a resource left with no key is removed.
func setNamedConfig(m *map[string]map[string]string, own *bool, r *ConfigRecord) {
	if !*own {
		*m = cloneOrMake(*m)
		*own = true
	}
	if cfg := setOrDelete((*m)[r.ResourceName], r); len(cfg) > 0 {
		(*m)[r.ResourceName] = cfg
	} else {
		delete(*m, r.ResourceName)
	}
}

// namedConfigRecords are the records that rebuild a map of configs by resource
// name, for snapshots.
func namedConfigRecords(rt ResourceType, m map[string]map[string]string) []Record {
	var recs []Record
	for _, name := range sortedKeys(m) {
		cfg := m[name]
		for _, k := range sortedKeys(cfg) {
			recs = append(recs, &ConfigRecord{ResourceType: rt, ResourceName: name, Key: k, Value: cfg[k]})
		}
	}
	return recs
}

// GroupConfigNames lists the groups with dynamic configs, sorted.
func (img *Image) GroupConfigNames() []string { return sortedKeys(img.groupConfigs) }
