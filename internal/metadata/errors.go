package metadata

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KafkaError is an error that travels to clients as a Kafka error code. Handlers
// find it with ErrorCode (or errors.As) and send Code plus the error's text as the
// response's error message. Detailed errors wrap one of the sentinels below with
// fmt.Errorf("%w: ...").
type KafkaError struct {
	Code int16
	Msg  string
}

func (e *KafkaError) Error() string { return e.Msg }

// ErrorCode returns the Kafka error code for err: 0 for nil, the code of the first
// KafkaError in err's chain, else UNKNOWN_SERVER_ERROR.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *KafkaError
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

func kafkaError(e *kerr.Error, msg string) *KafkaError {
	return &KafkaError{Code: e.Code, Msg: msg}
}

// KafkaText returns sentinel (one of the errors below) worded as Kafka words
// it, for the answers Kafka's tools print: errors.Is and ErrorCode see
// sentinel, and Error is the formatted message alone.
func KafkaText(sentinel *KafkaError, format string, args ...any) error {
	return &kafkaText{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}
}

type kafkaText struct {
	sentinel *KafkaError
	msg      string
}

func (e *kafkaText) Error() string { return e.msg }
func (e *kafkaText) Unwrap() error { return e.sentinel }

// Errors returned by Apply, the validators and (through the controller) the plans.
// Unless noted, retrying the same request gives the same answer.
var (
	// ErrInvalidTopic: the name breaks Kafka's rules or collides with an existing
	// name once '.' and '_' are treated alike. INVALID_TOPIC_EXCEPTION.
	ErrInvalidTopic = kafkaError(kerr.InvalidTopicException, "invalid topic")
	// ErrTopicExists: a topic with that name (or id) exists. TOPIC_ALREADY_EXISTS.
	ErrTopicExists = kafkaError(kerr.TopicAlreadyExists, "topic already exists")
	// ErrUnknownTopic: no topic or partition by that name. UNKNOWN_TOPIC_OR_PARTITION;
	// retriable (metadata may still be propagating).
	ErrUnknownTopic = kafkaError(kerr.UnknownTopicOrPartition, "unknown topic or partition")
	// ErrUnknownTopicID: no topic with that id. UNKNOWN_TOPIC_ID; retriable.
	ErrUnknownTopicID = kafkaError(kerr.UnknownTopicID, "unknown topic id")
	// ErrInvalidPartitions: a partition count below 1, above MaxPartitions, or not
	// an increase. INVALID_PARTITIONS.
	ErrInvalidPartitions = kafkaError(kerr.InvalidPartitions, "invalid partitions")
	// ErrInvalidReplicationFactor: below 1 or above the number of live brokers.
	// INVALID_REPLICATION_FACTOR; may succeed later when more brokers are live.
	ErrInvalidReplicationFactor = kafkaError(kerr.InvalidReplicationFactor, "invalid replication factor")
	// ErrInvalidReplicaAssignment: a manual assignment (or a partition record) with
	// empty, duplicate or unknown replicas, or an ISR or leader outside the replicas.
	// INVALID_REPLICA_ASSIGNMENT.
	ErrInvalidReplicaAssignment = kafkaError(kerr.InvalidReplicaAssignment, "invalid replica assignment")
	// ErrInvalidConfig: an unknown key or a value its validator rejects. INVALID_CONFIG.
	ErrInvalidConfig = kafkaError(kerr.InvalidConfig, "invalid config")
	// ErrInvalidRequest: duplicates in one request, contradictory fields, an
	// unsupported resource type. INVALID_REQUEST.
	ErrInvalidRequest = kafkaError(kerr.InvalidRequest, "invalid request")
	// ErrPolicyViolation: a request beyond a cluster-wide bound (too many
	// partitions in one request). POLICY_VIOLATION.
	ErrPolicyViolation = kafkaError(kerr.PolicyViolation, "policy violation")
	// ErrUnknownBroker: no broker registered with that id. BROKER_NOT_AVAILABLE;
	// retriable once the broker registers.
	ErrUnknownBroker = kafkaError(kerr.BrokerNotAvailable, "unknown broker")
	// ErrStaleBrokerEpoch: the broker epoch in a request or record is not the
	// broker's current one (it re-registered since). STALE_BROKER_EPOCH; the broker
	// must re-register.
	ErrStaleBrokerEpoch = kafkaError(kerr.StaleBrokerEpoch, "stale broker epoch")
	// ErrStalePartitionEpoch: a partition change was based on a partition epoch that
	// is no longer current. INVALID_UPDATE_VERSION; re-read the image and re-plan.
	ErrStalePartitionEpoch = kafkaError(kerr.InvalidUpdateVersion, "stale partition epoch")
	// ErrFencedLeaderEpoch: a partition change would move the leader epoch
	// backwards, or change the leader without raising it; or a request names
	// an older leader epoch than the replica's (KIP-320). FENCED_LEADER_EPOCH.
	ErrFencedLeaderEpoch = kafkaError(kerr.FencedLeaderEpoch, "fenced leader epoch")
	// ErrUnknownLeaderEpoch: a request names a newer leader epoch than the
	// replica's (KIP-320): it has not applied that metadata yet.
	// UNKNOWN_LEADER_EPOCH; retriable.
	ErrUnknownLeaderEpoch = kafkaError(kerr.UnknownLeaderEpoch, "leader epoch newer than the broker's")
	// ErrProducerIDs: the next producer id would not advance, or the id space is
	// exhausted. UNKNOWN_SERVER_ERROR: nothing the client can fix.
	ErrProducerIDs = kafkaError(kerr.UnknownServerError, "producer id allocation")
	// ErrDuplicateBrokerRegistration: another process (a different incarnation)
	// holds a live session for the broker id. DUPLICATE_BROKER_REGISTRATION; a
	// restarted broker retries until the old session expires.
	ErrDuplicateBrokerRegistration = kafkaError(kerr.DuplicateBrokerRegistration, "duplicate broker registration")
	// ErrIneligibleReplica: an ISR expansion names a broker that is fenced, not
	// registered or in controlled shutdown. INELIGIBLE_REPLICA; the leader retries
	// once the broker is eligible again.
	ErrIneligibleReplica = kafkaError(kerr.IneligibleReplica, "ineligible replica")
	// ErrNewLeaderElected: an ISR change was applied, and it completed a
	// reassignment that moved the leadership away from the broker that sent
	// it. NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before AlterPartition v2);
	// not an error to retry: the broker learns its new role from the metadata.
	ErrNewLeaderElected = kafkaError(kerr.NewLeaderElected, "new leader elected")
	// ErrElectionNotNeeded: the preferred replica already leads the partition.
	// ELECTION_NOT_NEEDED.
	ErrElectionNotNeeded = kafkaError(kerr.ElectionNotNeeded, "election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not in the ISR, or
	// not live. PREFERRED_LEADER_NOT_AVAILABLE; retriable once it catches up.
	ErrPreferredLeaderNotAvailable = kafkaError(kerr.PreferredLeaderNotAvailable, "preferred leader not available")
	// ErrEligibleLeadersNotAvailable: an unclean election found no live
	// replica of a leaderless partition. ELIGIBLE_LEADERS_NOT_AVAILABLE;
	// retriable once a replica is back.
	ErrEligibleLeadersNotAvailable = kafkaError(kerr.EligibleLeadersNotAvailable, "eligible leaders not available")
	// ErrNoReassignmentInProgress: cancelling the reassignment of a partition
	// that has none. Not retriable.
	ErrNoReassignmentInProgress = kafkaError(kerr.NoReassignmentInProgress, "no reassignment in progress")
	// ErrBrokerIDNotRegistered: unregistering a broker id nobody holds.
	// BROKER_ID_NOT_REGISTERED; not retriable.
	ErrBrokerIDNotRegistered = kafkaError(kerr.BrokerIDNotRegistered, "broker id not registered")
	// ErrUnsupportedSaslMechanism: a SCRAM mechanism number Kafka does not define.
	// UNSUPPORTED_SASL_MECHANISM.
	ErrUnsupportedSaslMechanism = kafkaError(kerr.UnsupportedSaslMechanism, "unsupported SASL mechanism")
	// ErrResourceNotFound: deleting a SCRAM credential that does not exist.
	// RESOURCE_NOT_FOUND.
	ErrResourceNotFound = kafkaError(kerr.ResourceNotFound, "resource not found")
)

// Errors from decoding; they never reach clients as anything but UNKNOWN_SERVER_ERROR.
var (
	// ErrCorrupt: bytes that are not a valid encoding (truncated, bad magic, bad
	// checksum, non-canonical fields, trailing bytes).
	ErrCorrupt = errors.New("metadata: corrupt encoding")
	// ErrUnsupportedVersion: a record type or version newer than this build; the
	// node must be upgraded before it can apply the log.
	ErrUnsupportedVersion = errors.New("metadata: unsupported record type or version")
)
