package metadata

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Client metrics subscriptions (KIP-714) are CLIENT_METRICS config resources
// (ResourceClientMetrics): a named set of the keys below, kept in the image by
// name like group configs and carried by the same ConfigRecord. A subscription
// exists while it has at least one key set. Validation and error codes are
// Kafka 4.4's (interop/cmd/configcompare): an unknown key, an empty name or a
// push interval out of range is INVALID_REQUEST; an interval that is not an
// int, or a match entry that is not selector=regex with a known selector,
// INVALID_CONFIG.

// SourceClientMetrics is DescribeConfigs' CLIENT_METRICS_CONFIG source.
const SourceClientMetrics ConfigSource = 7

// Client metrics config keys.
const (
	// ClientMetricsMetrics lists metric name prefixes to send; "*" is all.
	ClientMetricsMetrics = "metrics"
	// ClientMetricsInterval is the push interval in milliseconds.
	ClientMetricsInterval = "interval.ms"
	// ClientMetricsMatch lists selector=regex entries a client must all match.
	ClientMetricsMatch = "match"
)

// Push interval bounds and default, in milliseconds, as Kafka's.
const (
	DefaultPushIntervalMs = 300000
	minPushIntervalMs     = 100
	maxPushIntervalMs     = 3600000
)

// MatchSelectors are the client attributes a match entry may select on.
var MatchSelectors = []string{
	"client_id", "client_instance_id", "client_software_name",
	"client_software_version", "client_source_address", "client_source_port",
}

// clientMetricsDefs is sorted by Name; set only validates.
var clientMetricsDefs = []ConfigDef{
	{Name: ClientMetricsInterval, Type: ConfigTypeInt, Default: strconv.Itoa(DefaultPushIntervalMs),
		set: func(_ *TopicConfig, v string) error { _, err := parsePushInterval(v); return err }},
	{Name: ClientMetricsMatch, Type: ConfigTypeList, Default: "",
		set: func(_ *TopicConfig, v string) error { _, err := ParseMatch(ParseList(v)); return err }},
	{Name: ClientMetricsMetrics, Type: ConfigTypeList, Default: "",
		set: func(*TopicConfig, string) error { return nil }},
}

func parsePushInterval(v string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: invalid value %s for configuration %s: not a number of type INT", ErrInvalidConfig, v, ClientMetricsInterval)
	}
	if n < minPushIntervalMs || n > maxPushIntervalMs {
		return 0, fmt.Errorf("%w: invalid value %d for %s, interval must be between %d and %d (1 hour)",
			ErrInvalidRequest, n, ClientMetricsInterval, minPushIntervalMs, maxPushIntervalMs)
	}
	return int32(n), nil
}

// ParseMatch parses a subscription's match entries: selector=regex, split at
// the '=' (an entry with another '=' or an empty side is refused, as Kafka's
// split does). A regex must match a whole attribute. Regexes are Go's (RE2):
// a Java pattern RE2 lacks (backreferences, lookaround) is refused.
func ParseMatch(entries []string) (map[string]*regexp.Regexp, error) {
	m := make(map[string]*regexp.Regexp, len(entries))
	for _, e := range entries {
		sel, pat, ok := strings.Cut(e, "=")
		sel, pat = strings.TrimSpace(sel), strings.TrimSpace(pat)
		valid := ok && pat != "" && !strings.Contains(pat, "=") && slices.Contains(MatchSelectors, sel)
		var re *regexp.Regexp
		if valid {
			var err error
			re, err = regexp.Compile("^(?:" + pat + ")$")
			valid = err == nil
		}
		if !valid {
			return nil, fmt.Errorf("%w: illegal client matching pattern: %s", ErrInvalidConfig, e)
		}
		m[sel] = re
	}
	return m, nil
}

// LookupClientMetricsConfig finds a client metrics config key.
func LookupClientMetricsConfig(key string) (ConfigDef, bool) { return findDef(clientMetricsDefs, key) }

// ValidateClientMetricsResource checks a subscription name: any non-empty one.
func ValidateClientMetricsResource(name string) error {
	if name == "" {
		return fmt.Errorf("%w: client metrics subscription name must not be empty", ErrInvalidRequest)
	}
	return nil
}

// Subscription is one client metrics subscription, parsed.
type Subscription struct {
	Name string
	// Metrics are metric name prefixes; "*" means all.
	Metrics        []string
	PushIntervalMs int32
	// Match maps a selector (MatchSelectors) to the regex its attribute must
	// match whole; empty matches every client.
	Match map[string]*regexp.Regexp
}

// ClientMetricsConfigs returns the keys set on a subscription (nil when it does
// not exist). Never modify the map.
func (img *Image) ClientMetricsConfigs(name string) map[string]string {
	return img.clientMetrics[name]
}

// ClientMetricsNames lists the subscriptions, sorted.
func (img *Image) ClientMetricsNames() []string { return sortedKeys(img.clientMetrics) }

// Subscriptions returns every subscription, parsed, sorted by name. Stored
// values were validated before they were stored.
func (img *Image) Subscriptions() []Subscription {
	subs := make([]Subscription, 0, len(img.clientMetrics))
	for _, name := range img.ClientMetricsNames() {
		cfg := img.clientMetrics[name]
		s := Subscription{Name: name, Metrics: ParseList(cfg[ClientMetricsMetrics]), PushIntervalMs: DefaultPushIntervalMs}
		if v, ok := cfg[ClientMetricsInterval]; ok {
			s.PushIntervalMs, _ = parsePushInterval(v)
		}
		s.Match, _ = ParseMatch(ParseList(cfg[ClientMetricsMatch]))
		subs = append(subs, s)
	}
	return subs
}

// ClientMetricsEntries describes every key of a subscription, for
// DescribeConfigs, as Kafka 4.4 does: a key set is CLIENT_METRICS_CONFIG with
// itself as synonym, one not set DEFAULT_CONFIG with no synonym, and neither
// is flagged default. An unknown name describes the defaults.
func (img *Image) ClientMetricsEntries(name string) []ConfigEntry {
	es := make([]ConfigEntry, 0, len(clientMetricsDefs))
	for i := range clientMetricsDefs {
		d := &clientMetricsDefs[i]
		e := describe(d, d.Name, "", describeLevel{SourceClientMetrics, d.Name, img.clientMetrics[name]})
		e.IsDefault = false
		es = append(es, e)
	}
	return es
}

// clientMetricsConfig applies a ConfigRecord of a client metrics resource.
func (b *builder) clientMetricsConfig(r *ConfigRecord) error {
	if err := ValidateClientMetricsResource(r.ResourceName); err != nil {
		return err
	}
	setNamedConfig(&b.img.clientMetrics, &b.ownClientMetrics, r)
	return nil
}
