package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/handlers"
)

// Codes of errors that have no Kafka error code. Everything else answers with the
// name of the Kafka error code (TOPIC_ALREADY_EXISTS, NOT_ENOUGH_REPLICAS, ...).
const (
	codeMalformedJSON     = "MALFORMED_JSON"    // 400: the body is not JSON
	codeInvalidRequest    = "INVALID_REQUEST"   // 400: wrong types, missing or unknown fields
	codeInvalidRetention  = "INVALID_RETENTION" // 400: a retention that is neither a duration nor a size
	codeRequestTooLarge   = "REQUEST_TOO_LARGE" // 413: a body above Config.MaxBodyBytes
	codeUnknownConsumer   = "UNKNOWN_CONSUMER"  // 404: no consumer instance of that name here
	codeConsumerTopic     = "CONSUMER_TOPIC_MISMATCH"
	codeConsumerOptions   = "CONSUMER_OPTIONS_MISMATCH" // 409: a poll's reset, isolation or session timeout differs from its instance's
	codeTooManyConsumers  = "TOO_MANY_CONSUMERS"        // 429: Config.MaxConsumers instances exist
	codeShuttingDown      = "SHUTTING_DOWN"             // 503: the API is closed
	codeClosed            = "CLOSED"                    // 503: the consumer instance closed during the request
	codeInternal          = "INTERNAL"                  // 500: a server fault, never bad input
	codeForwardFailed     = "FORWARD_FAILED"            // 502: the node holding the consumer did not answer
	codeLookupFailed      = "CONSUMER_LOOKUP_FAILED"    // 503: which node holds the consumer could not be told
	codeBrokerUnreachable = "BROKER_UNREACHABLE"        // 503: a broker the request needs did not answer (refused, reset)
	codeCrossOrigin       = "CROSS_ORIGIN_REQUEST"      // 403: a browser sent it from another origin's page
	codeMethodNotAllowed  = "METHOD_NOT_ALLOWED"        // 405: the path does not serve this method
	codeNotFound          = "NOT_FOUND"                 // 404: no route under the API's paths
)

// apiError is an error answered as {"error":{"code","message"}} with its status.
type apiError struct {
	status  int
	code    string
	message string
	// retryAfter, when positive, is sent as Retry-After (seconds).
	retryAfter int
}

func (e *apiError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
}

func unknownTopic(topic string) *apiError {
	return errorf(http.StatusNotFound, kerr.UnknownTopicOrPartition.Message, "unknown topic %q", topic)
}

func unknownPartition(topic string, partition int32) *apiError {
	return errorf(http.StatusNotFound, kerr.UnknownTopicOrPartition.Message, "topic %q has no partition %d", topic, partition)
}

// kafkaStatus is the HTTP status of a Kafka error code. Codes not listed answer 503
// when Kafka calls them retriable and 500 otherwise.
var kafkaStatus = map[int16]int{
	kerr.UnknownTopicOrPartition.Code:      http.StatusNotFound,
	kerr.UnknownTopicID.Code:               http.StatusNotFound,
	kerr.GroupIDNotFound.Code:              http.StatusNotFound,
	kerr.TopicAlreadyExists.Code:           http.StatusConflict,
	kerr.NonEmptyGroup.Code:                http.StatusConflict,
	kerr.UnknownMemberID.Code:              http.StatusConflict,
	kerr.IllegalGeneration.Code:            http.StatusConflict,
	kerr.RebalanceInProgress.Code:          http.StatusConflict,
	kerr.FencedInstanceID.Code:             http.StatusConflict,
	kerr.MessageTooLarge.Code:              http.StatusRequestEntityTooLarge,
	kerr.RecordListTooLarge.Code:           http.StatusRequestEntityTooLarge,
	kerr.InvalidTopicException.Code:        http.StatusBadRequest,
	kerr.InvalidPartitions.Code:            http.StatusBadRequest,
	kerr.InvalidReplicationFactor.Code:     http.StatusBadRequest,
	kerr.InvalidReplicaAssignment.Code:     http.StatusBadRequest,
	kerr.InvalidConfig.Code:                http.StatusBadRequest,
	kerr.InvalidRequest.Code:               http.StatusBadRequest,
	kerr.InvalidRecord.Code:                http.StatusBadRequest,
	kerr.CorruptMessage.Code:               http.StatusBadRequest,
	kerr.InvalidRequiredAcks.Code:          http.StatusBadRequest,
	kerr.InvalidSessionTimeout.Code:        http.StatusBadRequest,
	kerr.InvalidGroupID.Code:               http.StatusBadRequest,
	kerr.InvalidTimestamp.Code:             http.StatusBadRequest,
	kerr.OffsetMetadataTooLarge.Code:       http.StatusBadRequest,
	kerr.PolicyViolation.Code:              http.StatusBadRequest,
	kerr.RequestTimedOut.Code:              http.StatusGatewayTimeout,
	kerr.NotEnoughReplicas.Code:            http.StatusServiceUnavailable,
	kerr.NotEnoughReplicasAfterAppend.Code: http.StatusServiceUnavailable,
	kerr.LeaderNotAvailable.Code:           http.StatusServiceUnavailable,
	kerr.NotLeaderForPartition.Code:        http.StatusServiceUnavailable,
	kerr.KafkaStorageError.Code:            http.StatusServiceUnavailable,
	kerr.TopicAuthorizationFailed.Code:     http.StatusForbidden,
	kerr.GroupAuthorizationFailed.Code:     http.StatusForbidden,
	kerr.ClusterAuthorizationFailed.Code:   http.StatusForbidden,
}

// fromKafka is the answer for a Kafka error code.
func fromKafka(code int16, msg string) *apiError {
	ke := kerr.ErrorForCode(code)
	var e *kerr.Error
	if !errors.As(ke, &e) {
		return errorf(http.StatusInternalServerError, codeInternal, "%s", msg)
	}
	status, ok := kafkaStatus[code]
	if !ok {
		status = http.StatusInternalServerError
		if e.Retriable {
			status = http.StatusServiceUnavailable
		}
	}
	return &apiError{status: status, code: e.Message, message: msg}
}

// fromErr is the answer for any error: ours, a domain error (through the Kafka
// handlers' one mapping of domain errors to codes) or the Kafka client's.
func fromErr(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fromKafka(ke.Code, err.Error())
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, codeRequestTooLarge, "request body larger than %d bytes", mbe.Limit)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return errorf(http.StatusGatewayTimeout, kerr.RequestTimedOut.Message, "%v", err)
	case errors.Is(err, kgo.ErrClientClosed):
		return errorf(http.StatusServiceUnavailable, codeClosed, "%v", err)
	case errors.Is(err, context.Canceled):
		return errorf(http.StatusServiceUnavailable, kerr.RequestTimedOut.Message, "%v", err)
	}
	// A request the API sends to a broker itself (a share member's ShareFetch and
	// ShareAcknowledge) fails with the connection's error when the broker is
	// stalled, cut off or down: worth a retry, not a server fault.
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return errorf(http.StatusGatewayTimeout, kerr.RequestTimedOut.Message, "%v", err)
		}
		return errorf(http.StatusServiceUnavailable, codeBrokerUnreachable, "%v", err)
	}
	if code := handlers.ErrorCode(err); code != kerr.UnknownServerError.Code {
		return fromKafka(code, err.Error())
	}
	return errorf(http.StatusInternalServerError, codeInternal, "%v", err)
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
