package controllerlink

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ObserverListener names the listener a broker-only node adds to its
// BrokerRegistration: its Raft address, where the active controller adds it to
// the quorum as a non-voting member. The first listener is the Kafka one. It
// is the name of every node's controller listener, as Kafka's
// controller.listener.names gives one: DescribeQuorum names the voters'
// listeners so, and AddRaftVoter takes the new voter's endpoint of that name.
const ObserverListener = "CONTROLLER"

// A voter that does not lead passes some requests on to the active controller
// it knows (a broker-only node's registration, whose --controllers need not
// name that controller). The link sends such a request with the client id
// PassedOnClientID, and a voter that receives one does not pass it on again,
// so two voters that each think the other leads cannot bounce it between them.
const PassedOnClientID = "strata-passed-on"

var passedOnID = PassedOnClientID

type passedOnKey struct{}

// PassingOn marks the requests sent with ctx as passed on (PassedOnClientID).
func PassingOn(ctx context.Context) context.Context {
	return context.WithValue(ctx, passedOnKey{}, true)
}

// PassedOn reports whether a request arrived with PassedOnClientID.
func PassedOn(clientID *string) bool { return clientID != nil && *clientID == PassedOnClientID }

// CreateTopics asks the active controller to create topics (CreateTopics v7)
// and returns one answer per topic, in order. It is the path of the topics a
// node creates itself: Metadata's auto-creation, the coordinators' internal
// topics and the console's form.
func CreateTopics(ctx context.Context, t Transport, topics []kmsg.CreateTopicsRequestTopic) ([]kmsg.CreateTopicsResponseTopic, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 10000
	req.Topics = topics
	resp, err := t.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != len(topics) {
		return nil, errors.New("controllerlink: CreateTopics answered for other topics than asked")
	}
	return r.Topics, nil
}

// TopicError is a CreateTopics answer's error, with the controller's message
// when it gave one; nil for success.
func TopicError(t kmsg.CreateTopicsResponseTopic) error {
	err := kerr.ErrorForCode(t.ErrorCode)
	if err == nil || t.ErrorMessage == nil || *t.ErrorMessage == "" {
		return err
	}
	return &messageError{err: err, msg: *t.ErrorMessage}
}

// messageError is a Kafka error code with the message that came with it.
type messageError struct {
	err error
	msg string
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }
