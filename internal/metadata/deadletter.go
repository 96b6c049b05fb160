package metadata

import (
	"fmt"
	"strings"
)

// Dead-letter topics of share groups (KIP-1191). A share group names its
// dead-letter topic in the group config errors.deadletterqueue.topic.name; records
// a member rejects, or that run out of deliveries, are written there. Two rules
// keep a group from writing into a topic that is not meant for it: the topic must
// carry the topic config errors.deadletterqueue.group.enable=true, and its name
// must start with the cluster-wide broker config
// errors.deadletterqueue.topic.name.prefix ("dlq." by default; empty: any name).
// A missing topic is created on the first write only when the broker config
// errors.deadletterqueue.auto.create.topics.enable is true.
const (
	// TopicDeadLetterGroupEnable is the topic config that lets groups use the topic
	// as their dead-letter topic.
	TopicDeadLetterGroupEnable = "errors.deadletterqueue.group.enable"
	// BrokerDeadLetterPrefix is the cluster-wide prefix of dead-letter topic names.
	BrokerDeadLetterPrefix = "errors.deadletterqueue.topic.name.prefix"
	// BrokerDeadLetterAutoCreate lets the first dead-letter write create a missing
	// dead-letter topic (with errors.deadletterqueue.group.enable=true).
	BrokerDeadLetterAutoCreate = "errors.deadletterqueue.auto.create.topics.enable"
)

// BrokerConfig returns a broker-only key's effective value: the cluster-wide
// dynamic value, else the default.
func (img *Image) BrokerConfig(key string) string {
	if v, ok := img.brokerConfigs[""][key]; ok {
		return v
	}
	if d, ok := brokerOnlyDefsByName[key]; ok {
		return d.Default
	}
	return ""
}

// validDeadLetterName checks a group's dead-letter topic name on its own, as
// Kafka's group config does: blank (no dead-letter topic) or not an internal
// name.
func validDeadLetterName(v string) error {
	if strings.HasPrefix(v, "__") {
		return fmt.Errorf("DLQ topic name must not start with '__'")
	}
	return nil
}

// CheckDeadLetterTopic checks that group may use topic as its dead-letter topic in
// img: not an internal name, the cluster's prefix, and, when the topic exists,
// errors.deadletterqueue.group.enable=true on it. Errors wrap ErrInvalidConfig.
// A topic that does not exist passes: whether it may be created is decided when a
// record is written (DeadLetterAutoCreate).
func CheckDeadLetterTopic(img *Image, group, topic string) error {
	if err := validDeadLetterName(topic); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, GroupDeadLetterTopic, err)
	}
	if prefix := img.BrokerConfig(BrokerDeadLetterPrefix); !strings.HasPrefix(topic, prefix) {
		return fmt.Errorf("%w: configured DLQ topic name does not comply with the DLQ topic prefix in share group: %s, topic: %s, prefix: %s",
			ErrInvalidConfig, group, topic, prefix)
	}
	if t := img.Topic(topic); t != nil && !t.Config.DeadLetterGroupEnable {
		return fmt.Errorf("%w: DLQ is not enabled on configured DLQ topic for share group: %s, topic: %s (set %s=true on it)",
			ErrInvalidConfig, group, topic, TopicDeadLetterGroupEnable)
	}
	return nil
}

// CheckGroupConfigs checks the rules that tie a group's configs to the rest of the
// cluster when a change takes the group from prev to next: a newly set dead-letter
// topic must be one the group may use (CheckDeadLetterTopic). A topic set earlier is
// checked again when a record is written, not here.
func CheckGroupConfigs(prev, next *Image, group string) error {
	topic := next.GroupConfig(group, GroupDeadLetterTopic)
	if topic == "" || topic == prev.GroupConfig(group, GroupDeadLetterTopic) {
		return nil
	}
	return CheckDeadLetterTopic(next, group, topic)
}

// DeadLetterAutoCreate reports whether a missing dead-letter topic is created on
// the first write (errors.deadletterqueue.auto.create.topics.enable).
func (img *Image) DeadLetterAutoCreate() bool {
	b, _ := parseBool(img.BrokerConfig(BrokerDeadLetterAutoCreate))
	return b
}
