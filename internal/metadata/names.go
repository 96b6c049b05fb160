package metadata

import (
	"fmt"
	"strings"
)

// MaxTopicNameLen is Kafka's limit on topic names.
const MaxTopicNameLen = 249

// ClusterMetadataTopic is the name Kafka gives the metadata log (the quorum's
// partition in DescribeQuorum): no topic may be created under it.
const ClusterMetadataTopic = "__cluster_metadata"

// ValidateTopicName applies Kafka's rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and neither "." nor "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed as a name", ErrInvalidTopic, name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("%w: the name is %d characters long, the limit is %d",
			ErrInvalidTopic, len(name), MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicChar(name[i]) {
			return fmt.Errorf("%w: %q contains %q; only [a-zA-Z0-9._-] are allowed",
				ErrInvalidTopic, name, name[i])
		}
	}
	return nil
}

func legalTopicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// collisionKey maps names that Kafka's metric names cannot tell apart ('.' and '_'
// become the same character) to one key.
func collisionKey(name string) string {
	return strings.ReplaceAll(name, ".", "_")
}
