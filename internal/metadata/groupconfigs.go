package metadata

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
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
	GroupShareSessionTimeout       = "share.session.timeout.ms"
	GroupShareHeartbeatInterval    = "share.heartbeat.interval.ms"
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
		set: func(_ *TopicConfig, v string) error {
			if _, ok, err := ShareResetByDuration(v); ok || err != nil {
				return err
			}
			_, err := oneOf(v, "latest", "earliest")
			return err
		}},
	{Name: GroupShareDeliveryCountLimit, Type: ConfigTypeInt, Default: "5",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 2, 10) }},
	// Bounded by group.share.min/max.heartbeat.interval.ms, at their defaults.
	{Name: GroupShareHeartbeatInterval, Type: ConfigTypeInt, Default: "5000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 5000, 15000) }},
	{Name: GroupShareIsolationLevel, Type: ConfigTypeString, Default: "read_uncommitted",
		set: func(_ *TopicConfig, v string) error {
			_, err := oneOf(v, "read_committed", "read_uncommitted")
			return err
		}},
	{Name: GroupShareRecordLockDuration, Type: ConfigTypeInt, Default: "30000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 1000, 3600000) }},
	// Bounded by group.share.min/max.session.timeout.ms, at their defaults.
	{Name: GroupShareSessionTimeout, Type: ConfigTypeInt, Default: "45000",
		set: func(_ *TopicConfig, v string) error { return intIn(v, 45000, 60000) }},
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

// shareResetByDuration is the prefix of a share.auto.offset.reset that starts
// a set duration back from now.
const shareResetByDuration = "by_duration:"

// ShareResetByDuration reads a share.auto.offset.reset of the form
// by_duration:<duration> (Kafka 4.1+): ok is false for any other value, and err
// says why the duration is not an ISO 8601 one Kafka takes (Java's
// Duration.parse form PnDTnHnMn.nS, not negative).
func ShareResetByDuration(v string) (d time.Duration, ok bool, err error) {
	v = strings.TrimSpace(v)
	if len(v) < len(shareResetByDuration) || !strings.EqualFold(v[:len(shareResetByDuration)], shareResetByDuration) {
		return 0, false, nil
	}
	d, err = parseISODuration(v[len(shareResetByDuration):])
	return d, true, err
}

// parseISODuration parses PnDTnHnMn.nS (every part optional but one, the
// seconds with up to nine decimals), case-insensitively; signs are refused.
func parseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration of the form PnDTnHnMn.nS", s)
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "P") {
		return 0, bad
	}
	s = s[1:]
	datePart, timePart, hasT := strings.Cut(s, "T")
	if (hasT && timePart == "") || (datePart == "" && timePart == "") {
		return 0, bad
	}
	var total time.Duration
	parts := 0
	// take reads the next number and unit of s when its unit is one of units,
	// in order.
	take := func(s *string, unit byte, scale time.Duration, frac bool) error {
		i := strings.IndexByte(*s, unit)
		if i < 0 {
			return nil
		}
		num := (*s)[:i]
		whole, decimals, dot := strings.Cut(strings.ReplaceAll(num, ",", "."), ".")
		if whole == "" || strings.Trim(whole, "0123456789") != "" || (dot && (!frac || decimals == "" || len(decimals) > 9 || strings.Trim(decimals, "0123456789") != "")) {
			return bad
		}
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || n > int64(math.MaxInt64/scale) {
			return bad
		}
		total += time.Duration(n) * scale
		if dot {
			f, _ := strconv.ParseInt(decimals+strings.Repeat("0", 9-len(decimals)), 10, 64)
			total += time.Duration(f)
		}
		*s = (*s)[i+1:]
		parts++
		return nil
	}
	if err := take(&datePart, 'D', 24*time.Hour, false); err != nil || datePart != "" {
		return 0, bad
	}
	for _, u := range []struct {
		unit  byte
		scale time.Duration
	}{{'H', time.Hour}, {'M', time.Minute}, {'S', time.Second}} {
		if err := take(&timePart, u.unit, u.scale, u.unit == 'S'); err != nil {
			return 0, err
		}
	}
	if timePart != "" || parts == 0 || total < 0 {
		return 0, bad
	}
	return total, nil
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
