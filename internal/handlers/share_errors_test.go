package handlers

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
)

// memShareStore is a share.Store in memory.
type memShareStore struct {
	mu    sync.Mutex
	snaps map[share.Key]share.Snapshot
}

func (s *memShareStore) Load(_ context.Context, k share.Key, _ int32) (share.Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snaps[k]
	return snap, ok, nil
}

func (s *memShareStore) Initialize(_ context.Context, k share.Key, stateEpoch int32, start int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.snaps[k]; !ok {
		s.snaps[k] = share.Snapshot{StateEpoch: stateEpoch, Start: start}
	}
	return nil
}

func (s *memShareStore) Save(_ context.Context, k share.Key, snap share.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[k] = snap
	return nil
}

// handlerParts is what the share-partition leader reads of the error harness.
type handlerParts struct{ h *Handlers }

func (p handlerParts) Image() *metadata.Image             { return p.h.cluster.Image() }
func (p handlerParts) SyncMetadata(context.Context) error { return nil }
func (p handlerParts) Partition(topic string, index int32) (*replica.Partition, error) {
	return p.h.replicas.Partition(topic, index)
}

// newShareErrorsHandlers is newErrorsHandlersWith(cfg) with a share-partition
// leader whose groups start at the earliest offset (the ten records of t-0).
func newShareErrorsHandlers(t *testing.T, cfg Config) *Handlers {
	t.Helper()
	h := newErrorsHandlersWith(t, cfg)
	gc := share.DefaultGroupConfig()
	gc.AutoOffsetReset = "earliest"
	m := share.NewManager(share.Config{Defaults: gc}, &memShareStore{snaps: map[share.Key]share.Snapshot{}}, handlerParts{h}, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	h.cfg.Shares = m
	return h
}

// shareFetchReq is a ShareFetch v1 of member of group g in session epoch,
// for partition of topic id, with acks (first, last, type) triples.
func shareFetchReq(member string, epoch int32, id metadata.UUID, partition int32, acks ...int64) *kmsg.ShareFetchRequest {
	g := "g"
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &member, epoch
	req.MaxRecords, req.MaxBytes, req.MaxWaitMillis = 1, 1<<20, 0
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = partition
	for i := 0; i+2 < len(acks); i += 3 {
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = acks[i], acks[i+1], []int8{int8(acks[i+2])}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAckReq is a ShareAcknowledge of member in session epoch for partition 0
// of t: one batch first..last of ackType.
func shareAckReq(version int16, member string, epoch int32, first, last int64, ackType int8) *kmsg.ShareAcknowledgeRequest {
	g := "g"
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(version)
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = errTopicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{ackType}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareCodes are a share response's top-level code and its one partition's
// codes (-2 when it has no partition), and its messages, joined by "|" (nil ones
// left out).
type shareCodes struct {
	top, partition, ack int16
	msg                 string
}

func fetchCodes(resp *kmsg.ShareFetchResponse) shareCodes {
	c := shareCodes{resp.ErrorCode, -2, -2, messages(resp.ErrorMessage)}
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		p := resp.Topics[0].Partitions[0]
		c.partition, c.ack = p.ErrorCode, p.AcknowledgeErrorCode
		c.msg = messages(resp.ErrorMessage, p.ErrorMessage, p.AcknowledgeErrorMessage)
	}
	return c
}

func ackCodes(resp *kmsg.ShareAcknowledgeResponse) shareCodes {
	c := shareCodes{resp.ErrorCode, -2, -2, messages(resp.ErrorMessage)}
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		c.partition = resp.Topics[0].Partitions[0].ErrorCode
		c.msg = messages(resp.ErrorMessage, resp.Topics[0].Partitions[0].ErrorMessage)
	}
	return c
}

// messages joins the messages that are set with "|".
func messages(ms ...*string) string {
	var out []string
	for _, m := range ms {
		if m != nil {
			out = append(out, *m)
		}
	}
	return strings.Join(out, "|")
}

// Kafka 4.4's messages for refused acknowledgements (interop/cmd/sharecompare).
const (
	msgNotOwner  = "Member is not the owner of batch record"
	msgFirstPast = "Batch record not found. The first offset in request is past acquired records."
)

// TestShareFetchErrors: ShareFetch answers Kafka 4.4's codes and messages for a
// request it cannot serve, as a Kafka 4.4 broker answered the same requests side
// by side (interop/cmd/sharecompare; no message unless one is named): a missing
// member id or acknowledgements in the request that
// opens a session (INVALID_REQUEST), a session epoch without a session
// (SHARE_SESSION_NOT_FOUND) or out of step (INVALID_SHARE_SESSION_EPOCH) at the
// top; per partition an unknown topic id (UNKNOWN_TOPIC_ID), a partition the
// topic lacks (UNKNOWN_TOPIC_OR_PARTITION), one led elsewhere
// (NOT_LEADER_OR_FOLLOWER, not compared: one Kafka node), acknowledgements of
// offsets past those acquired (INVALID_REQUEST) or another member holds
// (INVALID_RECORD_STATE), malformed ones (INVALID_REQUEST). Kafka answers an
// unknown topic id UNKNOWN_SERVER_ERROR for the whole request; Strata's
// UNKNOWN_TOPIC_ID for the partition is a known difference (docs/protocol.md).
func TestShareFetchErrors(t *testing.T) {
	h := newShareErrorsHandlers(t, Config{})
	fetch := func(req *kmsg.ShareFetchRequest) shareCodes {
		return fetchCodes(serve(t, h, req).(*kmsg.ShareFetchResponse))
	}
	none := int16(-2)
	for _, tc := range []struct {
		name string
		req  *kmsg.ShareFetchRequest
		want shareCodes
	}{
		{"no member id", shareFetchReq("", 0, errTopicID, 0), shareCodes{kerr.InvalidRequest.Code, none, none, ""}},
		{"acknowledgements when opening", shareFetchReq("m1", 0, errTopicID, 0, 0, 0, 1), shareCodes{kerr.InvalidRequest.Code, none, none, ""}},
		{"no session", shareFetchReq("m2", 3, errTopicID, 0), shareCodes{kerr.ShareSessionNotFound.Code, none, none, ""}},
		{"unknown topic id", shareFetchReq("m3", 0, metadata.UUID{99}, 0), shareCodes{0, kerr.UnknownTopicID.Code, 0, ""}},
		{"partition out of range", shareFetchReq("m4", 0, errTopicID, 9), shareCodes{0, kerr.UnknownTopicOrPartition.Code, 0, ""}},
		{"led by another broker", shareFetchReq("m5", 0, errTopicID, 2), shareCodes{0, kerr.NotLeaderForPartition.Code, 0, ""}},
		// m opens a session and acquires offsets 0-9 (epoch 0 -> 1).
		{"open", shareFetchReq("m", 0, errTopicID, 0), shareCodes{0, 0, 0, ""}},
		{"session epoch out of step", shareFetchReq("m", 5, errTopicID, 0), shareCodes{kerr.InvalidShareSessionEpoch.Code, none, none, ""}},
		{"ack past the log end", shareFetchReq("m", 1, errTopicID, 0, 50, 60, 1), shareCodes{0, 0, kerr.InvalidRequest.Code, msgFirstPast}},
		{"unknown ack type", shareFetchReq("m", 2, errTopicID, 0, 0, 0, 9), shareCodes{0, 0, kerr.InvalidRequest.Code, ""}},
		{"RENEW before v2", shareFetchReq("m", 3, errTopicID, 0, 0, 0, 4), shareCodes{0, 0, kerr.InvalidRequest.Code, ""}},
		{"first after last", shareFetchReq("m", 4, errTopicID, 0, 3, 2, 1), shareCodes{0, 0, kerr.InvalidRequest.Code, ""}},
		// n opens a session: m holds the whole batch (offsets 0-9).
		{"open another", shareFetchReq("n", 0, errTopicID, 0), shareCodes{0, 0, 0, ""}},
		{"ack of an offset another member holds", shareFetchReq("n", 1, errTopicID, 0, 7, 7, 1), shareCodes{0, 0, kerr.InvalidRecordState.Code, msgNotOwner}},
	} {
		if got := fetch(tc.req); got != tc.want {
			t.Errorf("%s: codes %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestShareAcknowledgeErrors: ShareAcknowledge needs an open session
// (INVALID_SHARE_SESSION_EPOCH for epoch 0 or one out of step,
// SHARE_SESSION_NOT_FOUND without one) and answers per partition
// INVALID_RECORD_STATE for offsets another member holds, INVALID_REQUEST past
// the acquired offsets and for malformed batches; an offset it holds is
// accepted. Codes and messages as a Kafka 4.4 broker answered them side by side
// (interop/cmd/sharecompare), except "accept again": Kafka skips an offset below
// the start offset while its fetched batch is cached (success), Strata keeps no
// batches and refuses it (docs/protocol.md).
func TestShareAcknowledgeErrors(t *testing.T) {
	h := newShareErrorsHandlers(t, Config{})
	// m acquires the whole batch (offsets 0-9); n holds nothing.
	for _, member := range []string{"m", "n"} {
		if got := fetchCodes(serve(t, h, shareFetchReq(member, 0, errTopicID, 0)).(*kmsg.ShareFetchResponse)); got != (shareCodes{0, 0, 0, ""}) {
			t.Fatalf("opening %s's session: %+v", member, got)
		}
	}
	none := int16(-2)
	for _, tc := range []struct {
		name string
		req  *kmsg.ShareAcknowledgeRequest
		want shareCodes
	}{
		{"epoch 0", shareAckReq(1, "m", 0, 0, 0, 1), shareCodes{kerr.InvalidShareSessionEpoch.Code, none, none, ""}},
		{"no session", shareAckReq(1, "other", 1, 0, 0, 1), shareCodes{kerr.ShareSessionNotFound.Code, none, none, ""}},
		{"epoch out of step", shareAckReq(1, "m", 4, 0, 0, 1), shareCodes{kerr.InvalidShareSessionEpoch.Code, none, none, ""}},
		{"offset another member holds", shareAckReq(1, "n", 1, 5, 5, 1), shareCodes{0, kerr.InvalidRecordState.Code, none, msgNotOwner}},
		{"past the log end", shareAckReq(1, "m", 1, 40, 41, 1), shareCodes{0, kerr.InvalidRequest.Code, none, msgFirstPast}},
		{"unknown ack type", shareAckReq(1, "m", 2, 0, 0, 7), shareCodes{0, kerr.InvalidRequest.Code, none, ""}},
		{"RENEW before v2", shareAckReq(1, "m", 3, 0, 0, 4), shareCodes{0, kerr.InvalidRequest.Code, none, ""}},
		{"first after last", shareAckReq(1, "m", 4, 1, 0, 1), shareCodes{0, kerr.InvalidRequest.Code, none, ""}},
		{"accept", shareAckReq(1, "m", 5, 0, 0, 1), shareCodes{0, 0, none, ""}},
		{"accept again", shareAckReq(1, "m", 6, 0, 0, 1), shareCodes{0, kerr.InvalidRecordState.Code, none, "Batch record not found. The request batch offsets are not found in the cache."}},
	} {
		if got := ackCodes(serve(t, h, tc.req).(*kmsg.ShareAcknowledgeResponse)); got != tc.want {
			t.Errorf("%s: codes %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestShareAuthorization: ShareFetch and ShareAcknowledge need READ on the
// group (GROUP_AUTHORIZATION_FAILED for the request) and READ on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions, which never join the session).
func TestShareAuthorization(t *testing.T) {
	read := kmsg.ACLOperationRead
	h := newShareErrorsHandlers(t, Config{Authorizer: allowAnonymous(read, resGroup, "g")})
	conn := &protocol.ConnInfo{}
	fetch := func(req *kmsg.ShareFetchRequest) shareCodes {
		return fetchCodes(serveRequest(t, h, conn, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).(*kmsg.ShareFetchResponse))
	}
	if got := fetch(shareFetchReq("m", 0, errTopicID, 0)); got != (shareCodes{0, kerr.TopicAuthorizationFailed.Code, 0, ""}) {
		t.Errorf("fetch of a topic not readable: %+v", got)
	}
	if got := fetch(shareFetchReq("m", 1, errTopicID, 0, 0, 0, 1)); got != (shareCodes{0, kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code, ""}) {
		t.Errorf("fetch with acknowledgements of a topic not readable: %+v", got)
	}
	req := shareAckReq(1, "m", 2, 0, 0, 1)
	resp := serveRequest(t, h, conn, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).(*kmsg.ShareAcknowledgeResponse)
	if got := ackCodes(resp); got != (shareCodes{0, kerr.TopicAuthorizationFailed.Code, -2, ""}) {
		t.Errorf("acknowledgement of a topic not readable: %+v", got)
	}
	other := "other"
	req = shareAckReq(1, "m", 3, 0, 0, 1)
	req.GroupID = &other
	resp = serveRequest(t, h, conn, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("acknowledgement in a group not readable: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// fakeStateLog is a share.StateLog that keeps nothing (appends succeed).
type fakeStateLog struct{}

func (fakeStateLog) Append(context.Context, int32, int32, []group.Record) (int64, error) {
	return 0, nil
}

// TestShareStateErrors: the share coordinator's APIs (83-86) need
// CLUSTER_ACTION, refuse an empty group id (INVALID_REQUEST), answer
// NOT_COORDINATOR for keys of state partitions not led here and Kafka's fencing
// codes; FindCoordinator for a share key needs v6 and CLUSTER_ACTION and a key
// that parses; a client may not produce to __share_group_state.
func TestShareStateErrors(t *testing.T) {
	k := share.Key{Group: "g", TopicID: errTopicID, Partition: 0}
	coord := share.NewCoordinator(fakeStateLog{}, share.DefaultStateTopicPartitions)
	if err := coord.LoadPartitionAt(context.Background(), share.StatePartition(k, share.DefaultStateTopicPartitions), 0, func(func(group.Record, error) bool) {}); err != nil {
		t.Fatal(err)
	}
	h := newErrorsHandlersWith(t, Config{ShareCoordinator: coord})
	read := func(group string, partition, leaderEpoch int32) int16 {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = group
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = errTopicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = partition, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.ReadShareGroupStateResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	write := func(stateEpoch, leaderEpoch int32) int16 {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = "g"
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = errTopicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = stateEpoch, leaderEpoch, 3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.WriteShareGroupStateResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	initialize := func(stateEpoch int32) int16 {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = "g"
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID = errTopicID
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.StateEpoch = stateEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.InitializeShareGroupStateResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	other := share.Key{Group: "g", TopicID: errTopicID, Partition: 1}
	for share.StatePartition(other, share.DefaultStateTopicPartitions) == share.StatePartition(k, share.DefaultStateTopicPartitions) {
		other.Partition++
	}
	for _, tc := range []struct {
		name string
		got  func() int16
		want int16
	}{
		{"read without state", func() int16 { return read("g", 0, 1) }, kerr.UnknownTopicOrPartition.Code},
		{"read with an empty group id", func() int16 { return read("", 0, 1) }, kerr.InvalidRequest.Code},
		{"read of a state partition led elsewhere", func() int16 { return read("g", other.Partition, 1) }, kerr.NotCoordinator.Code},
		{"write without state", func() int16 { return write(0, 1) }, kerr.InvalidRequest.Code},
		{"initialize", func() int16 { return initialize(0) }, 0},
		{"initialize the same epoch", func() int16 { return initialize(0) }, kerr.FencedStateEpoch.Code},
		{"leader 2 reads", func() int16 { return read("g", 0, 2) }, 0},
		{"leader 1 writes", func() int16 { return write(0, 1) }, kerr.FencedLeaderEpoch.Code},
		{"leader 1 reads", func() int16 { return read("g", 0, 1) }, kerr.FencedLeaderEpoch.Code},
		{"leader 2 writes", func() int16 { return write(0, 2) }, 0},
		{"reset", func() int16 { return initialize(1) }, 0},
		{"leader 2 writes the old state epoch", func() int16 { return write(0, 2) }, kerr.FencedStateEpoch.Code},
	} {
		if got := tc.got(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}

	// Without CLUSTER_ACTION.
	denied := newErrorsHandlersWith(t, Config{ShareCoordinator: coord, Authorizer: allowAnonymous(kmsg.ACLOperationRead, resGroup, "g")})
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = "g"
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = errTopicID
	rt.Partitions = append(rt.Partitions, kmsg.NewDeleteShareGroupStateRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp := serveRequest(t, denied, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Msg: req}).(*kmsg.DeleteShareGroupStateResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("delete without CLUSTER_ACTION: %v", kerr.ErrorForCode(code))
	}

	// FindCoordinator for share keys.
	for _, tc := range []struct {
		name    string
		h       *Handlers
		version int16
		key     string
		want    int16
	}{
		{"before v6", h, 5, share.CoordinatorKey(k), kerr.UnsupportedVersion.Code},
		{"a key that does not parse", h, 6, "g:not-an-id:0", kerr.InvalidRequest.Code},
		{"no state topic yet", h, 6, share.CoordinatorKey(k), kerr.CoordinatorNotAvailable.Code},
		{"without CLUSTER_ACTION", denied, 6, share.CoordinatorKey(k), kerr.ClusterAuthorizationFailed.Code},
	} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(tc.version)
		req.CoordinatorType, req.CoordinatorKeys = 2, []string{tc.key}
		resp := serveRequest(t, tc.h, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: tc.version, Msg: req}).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != tc.want {
			t.Errorf("FindCoordinator %s: %+v, want %v", tc.name, resp.Coordinators, kerr.ErrorForCode(tc.want))
		}
	}
	if got, ok := share.ParseCoordinatorKey(share.CoordinatorKey(k)); !ok || got != k {
		t.Errorf("coordinator key round trip: %+v %v", got, ok)
	}

	// A client's produce to the state topic.
	stateID := metadata.UUID{12}
	img, err := metadata.ApplyAll(h.cluster.Image(), []metadata.Record{
		&metadata.TopicRecord{Name: share.StateTopic, ID: stateID},
		&metadata.PartitionRecord{TopicID: stateID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.cluster = fakeCluster{img: img}
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(9)
	preq.Acks, preq.TimeoutMillis = -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = share.StateTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batchtest.Build(batchtest.Options{})
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp := serve(t, h, preq).(*kmsg.ProduceResponse)
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", share.StateTopic, kerr.ErrorForCode(code))
	}
}
