package handlers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/protocol"
)

// notLeading is a Cluster whose controller is not the active one; nothing
// else of it is called when a request is forwarded.
type notLeading struct{ Cluster }

func (notLeading) IsLeader() bool { return false }

// scriptedLink answers UnregisterBroker or RemoveRaftVoter with the codes of
// answers in turn (a
// negative one: a transport error), then with the last one forever. It is
// called from the test's goroutine only.
type scriptedLink struct {
	answers []int16
	calls   int
	// then, if set, is called at request number after (the request's
	// context ending, say).
	after int
	then  func()
}

func (l *scriptedLink) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	code := l.answers[min(l.calls, len(l.answers)-1)]
	l.calls++
	if l.then != nil && l.calls == l.after {
		l.then()
	}
	if code < 0 {
		return nil, errors.New("dial: connection refused")
	}
	switch resp := req.ResponseKind().(type) {
	case *kmsg.UnregisterBrokerResponse:
		resp.ErrorCode = code
		return resp, nil
	case *kmsg.RemoveRaftVoterResponse:
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, errors.New("scriptedLink: an unexpected request")
}

func forwarding(link *scriptedLink) *Handlers {
	return New(Config{}, notLeading{}, nil, nil, link, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func unregisterVia(ctx context.Context, link *scriptedLink) *kmsg.UnregisterBrokerResponse {
	h := forwarding(link)
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = 4
	resp := h.unregisterBroker(ctx, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Msg: req})
	return resp.Msg.(*kmsg.UnregisterBrokerResponse)
}

// TestForwardRetriesWhileTheControllerChanges: a forwarded request answered
// NOT_CONTROLLER (a deposed controller) or not delivered at all (no
// controller reachable) is sent again until the new active controller
// answers it, as a Kafka broker's forwarding does; the client never sees
// NOT_CONTROLLER for it. (Found by the chaos suite's op-pause: `strata
// cluster decommission` failed at its UnregisterBroker while the active
// controller was paused, franz-go not retrying that request.)
func TestForwardRetriesWhileTheControllerChanges(t *testing.T) {
	nc := kerr.NotController.Code
	link := &scriptedLink{answers: []int16{nc, -1, nc, 0}}
	if resp := unregisterVia(context.Background(), link); resp.ErrorCode != 0 || link.calls != 4 {
		t.Fatalf("answered %v after %d requests, want success after 4", kerr.ErrorForCode(resp.ErrorCode), link.calls)
	}

	// Other answers are the controller's, passed on at once.
	link = &scriptedLink{answers: []int16{kerr.BrokerIDNotRegistered.Code}}
	if resp := unregisterVia(context.Background(), link); resp.ErrorCode != kerr.BrokerIDNotRegistered.Code || link.calls != 1 {
		t.Fatalf("answered %v after %d requests, want BROKER_ID_NOT_REGISTERED after 1", kerr.ErrorForCode(resp.ErrorCode), link.calls)
	}

	// Retries end with the request's context: then NOT_CONTROLLER.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link = &scriptedLink{answers: []int16{nc}, after: 3, then: cancel}
	if resp := unregisterVia(ctx, link); resp.ErrorCode != nc || link.calls != 3 {
		t.Fatalf("answered %v after %d requests, want NOT_CONTROLLER after 3", kerr.ErrorForCode(resp.ErrorCode), link.calls)
	}
}

// TestResentVoterRemovalSucceeds: a RemoveRaftVoter whose first attempt
// ended with its controller deposed may have been committed all the same;
// when the resend finds the node no voter any more, the client asked for
// nothing else, and gets success. (Found by the chaos suite's op-cut, seed 21:
// the removal was in the log of the cut-off controller and of node 4, and was
// committed by the next leader.) Without a resend VOTER_NOT_FOUND stands.
func TestResentVoterRemovalSucceeds(t *testing.T) {
	remove := func(link *scriptedLink) int16 {
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID, req.VoterDirectoryID = 4, [16]byte{4}
		resp := forwarding(link).removeRaftVoter(context.Background(), &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Msg: req})
		return resp.Msg.(*kmsg.RemoveRaftVoterResponse).ErrorCode
	}
	if code := remove(&scriptedLink{answers: []int16{kerr.NotController.Code, kerr.VoterNotFound.Code}}); code != 0 {
		t.Errorf("resent removal answered %v, want success", kerr.ErrorForCode(code))
	}
	if code := remove(&scriptedLink{answers: []int16{-1, kerr.VoterNotFound.Code}}); code != 0 {
		t.Errorf("removal resent after a lost answer answered %v, want success", kerr.ErrorForCode(code))
	}
	if code := remove(&scriptedLink{answers: []int16{kerr.VoterNotFound.Code}}); code != kerr.VoterNotFound.Code {
		t.Errorf("removal of a non-voter answered %v, want VOTER_NOT_FOUND", kerr.ErrorForCode(code))
	}
}

// TestAnswersNotController: what notControllerResponse answers to each
// forwarded request is recognised, so the forwarder retries it; a response
// without NOT_CONTROLLER is not.
func TestAnswersNotController(t *testing.T) {
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = append(ct.Topics, kmsg.CreateTopicsRequestTopic{Topic: "a"})
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"a"}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = append(cp.Topics, kmsg.CreatePartitionsRequestTopic{Topic: "a"})
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = append(ac.Resources, kmsg.AlterConfigsRequestResource{ResourceName: "a"})
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Resources = append(iac.Resources, kmsg.IncrementalAlterConfigsRequestResource{ResourceName: "a"})
	cacl := kmsg.NewPtrCreateACLsRequest()
	cacl.Creations = append(cacl.Creations, kmsg.NewCreateACLsRequestCreation())
	dacl := kmsg.NewPtrDeleteACLsRequest()
	dacl.Filters = append(dacl.Filters, kmsg.NewDeleteACLsRequestFilter())
	cq := kmsg.NewPtrAlterClientQuotasRequest()
	cq.Entries = append(cq.Entries, kmsg.NewAlterClientQuotasRequestEntry())
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	scram.Deletions = append(scram.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: "alice", Mechanism: 1})
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = append(dq.Topics, kmsg.DescribeQuorumRequestTopic{Topic: metadataTopic,
		Partitions: []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}})
	for _, req := range []kmsg.Request{ct, dt, cp, ac, iac, cacl, dacl, cq, scram, dq,
		kmsg.NewPtrElectLeadersRequest(), kmsg.NewPtrAlterPartitionAssignmentsRequest(),
		kmsg.NewPtrListPartitionReassignmentsRequest(), kmsg.NewPtrUnregisterBrokerRequest(),
		kmsg.NewPtrAddRaftVoterRequest(), kmsg.NewPtrRemoveRaftVoterRequest(),
	} {
		name := kmsg.NameForKey(req.Key())
		if !controllerlink.AnswersNotController(notControllerResponse(req)) {
			t.Errorf("%s: NOT_CONTROLLER answer not recognised", name)
		}
		if controllerlink.AnswersNotController(req.ResponseKind()) {
			t.Errorf("%s: an empty answer taken for NOT_CONTROLLER", name)
		}
	}

	// Deep in a response, and next to other errors.
	apa := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	apa.Topics = []kmsg.AlterPartitionAssignmentsResponseTopic{{Partitions: []kmsg.AlterPartitionAssignmentsResponseTopicPartition{
		{ErrorCode: kerr.NoReassignmentInProgress.Code}, {ErrorCode: kerr.NotController.Code}}}}
	if !controllerlink.AnswersNotController(apa) {
		t.Error("a partition's NOT_CONTROLLER not recognised")
	}
	apa.Topics[0].Partitions[1].ErrorCode = kerr.UnknownTopicOrPartition.Code
	if controllerlink.AnswersNotController(apa) {
		t.Error("other errors taken for NOT_CONTROLLER")
	}
}
