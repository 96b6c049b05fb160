package metadata

import (
	"strconv"
	"strings"

	"github.com/strata-stream/strata/internal/throttle"
)

// Broker-only config keys: the replication throttle rates of partition moves
// (KIP-73), in bytes per second. kafka-reassign-partitions --throttle sets them
// on every broker a move involves, and --verify deletes them.
const (
	LeaderReplicationThrottledRate   = "leader.replication.throttled.rate"
	FollowerReplicationThrottledRate = "follower.replication.throttled.rate"
)

// listedWhereSet are the broker keys Kafka 4.4 defines outside KafkaConfig's
// ConfigDef (QuotaConfig.brokerQuotaConfigs): a broker's DescribeConfigs lists
// them only where set, for it or cluster-wide, with no default synonym.
var listedWhereSet = map[string]bool{
	LeaderReplicationThrottledRate:   true,
	FollowerReplicationThrottledRate: true,
}

// brokerOnlyConfigDefs are the broker keys that are no topic key's synonym:
// Name and BrokerName are the key, and set only validates. Sorted by name.
var brokerOnlyConfigDefs = []ConfigDef{
	{BrokerDeadLetterAutoCreate, ConfigTypeBoolean, "false", BrokerDeadLetterAutoCreate,
		func(_ *TopicConfig, v string) error { _, err := parseBool(v); return err }},
	{BrokerDeadLetterPrefix, ConfigTypeString, "dlq.", BrokerDeadLetterPrefix,
		func(*TopicConfig, string) error { return nil }},
	{FollowerReplicationThrottledRate, ConfigTypeLong, "9223372036854775807", FollowerReplicationThrottledRate,
		validateOnly(long(0, maxInt64, func(*TopicConfig) *int64 { return new(int64) }))},
	{LeaderReplicationThrottledRate, ConfigTypeLong, "9223372036854775807", LeaderReplicationThrottledRate,
		validateOnly(long(0, maxInt64, func(*TopicConfig) *int64 { return new(int64) }))},
}

var brokerOnlyDefsByName = func() map[string]*ConfigDef {
	m := make(map[string]*ConfigDef, len(brokerOnlyConfigDefs))
	for i := range brokerOnlyConfigDefs {
		m[brokerOnlyConfigDefs[i].Name] = &brokerOnlyConfigDefs[i]
	}
	return m
}()

// brokerConfigDefs lists every broker key's definition: the topic keys with a
// broker synonym, then the broker-only keys.
func brokerConfigDefs() []*ConfigDef {
	defs := make([]*ConfigDef, 0, len(topicConfigDefs)+len(brokerOnlyConfigDefs))
	for i := range topicConfigDefs {
		if topicConfigDefs[i].BrokerName != "" {
			defs = append(defs, &topicConfigDefs[i])
		}
	}
	for i := range brokerOnlyConfigDefs {
		defs = append(defs, &brokerOnlyConfigDefs[i])
	}
	return defs
}

func validateOnly(check func(*TopicConfig, string) error) func(*TopicConfig, string) error {
	return func(_ *TopicConfig, v string) error { return check(&TopicConfig{}, v) }
}

func throttledReplicas(field func(*TopicConfig) **throttle.Replicas) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		r, err := throttle.ParseReplicas(v)
		if err != nil {
			return err
		}
		*field(c) = r
		return nil
	}
}

// ReplicationThrottleRates returns a broker's replication throttle rates in
// bytes per second: its own dynamic value, else the cluster-wide one, else
// throttle.Unlimited.
func (img *Image) ReplicationThrottleRates(broker int32) (leader, follower int64) {
	own := img.brokerConfigs[strconv.Itoa(int(broker))]
	cluster := img.brokerConfigs[""]
	rate := func(key string) int64 {
		v, ok := own[key]
		if !ok {
			v, ok = cluster[key]
		}
		if !ok {
			return throttle.Unlimited
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil { // validated when stored
			return throttle.Unlimited
		}
		return n
	}
	return rate(LeaderReplicationThrottledRate), rate(FollowerReplicationThrottledRate)
}
