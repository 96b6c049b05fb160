package share

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// responseParts collects a ShareFetch response's partitions, topic by topic in the
// order they first appear, and the endpoints of leaders it points clients to.
type responseParts struct {
	m         *Manager
	topics    []kmsg.ShareFetchResponseTopic
	endpoints []int32
}

func newResponseParts(m *Manager) *responseParts { return &responseParts{m: m} }

// part returns the response partition of (id, partition), adding it when new. The
// pointer is valid until the next call.
func (r *responseParts) part(id [16]byte, partition int32) *kmsg.ShareFetchResponseTopicPartition {
	ti := slices.IndexFunc(r.topics, func(t kmsg.ShareFetchResponseTopic) bool { return t.TopicID == id })
	if ti < 0 {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		r.topics = append(r.topics, t)
		ti = len(r.topics) - 1
	}
	t := &r.topics[ti]
	pi := slices.IndexFunc(t.Partitions, func(p kmsg.ShareFetchResponseTopicPartition) bool { return p.Partition == partition })
	if pi < 0 {
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = partition // CurrentLeader stays 0/0 unless leader points elsewhere, as Kafka 4.4 answers
		p.Records = []byte{}    // not nullable in the schema
		t.Partitions = append(t.Partitions, p)
		pi = len(t.Partitions) - 1
	}
	return &t.Partitions[pi]
}

// failed reports whether some partition carries an error: the answer goes out at
// once rather than after a long poll.
func (r *responseParts) failed() bool {
	for _, t := range r.topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// acquired puts the records of acquisition a into tp's response and returns how
// many offsets it holds.
func (r *responseParts) acquired(tp topicPartition, a acquisition) int {
	p := r.part(tp.id, tp.partition)
	p.Records = a.data
	n := 0
	p.AcquiredRecords = slices.Grow(p.AcquiredRecords, len(a.acquired))
	for _, ar := range a.acquired {
		x := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
		x.FirstOffset, x.LastOffset, x.DeliveryCount = ar.First, ar.Last, ar.DeliveryCount
		p.AcquiredRecords = append(p.AcquiredRecords, x)
		n += int(ar.Last - ar.First + 1)
	}
	return n
}

// stateFailed answers tp, whose state could not be loaded or whose
// acquisition's save failed with code, without records: a failed save drops the
// state, whose reload makes them available again. A NOT_LEADER_OR_FOLLOWER
// partition is pointed at its current leader.
func (r *responseParts) stateFailed(tp topicPartition, topic string, code int16) {
	p := r.part(tp.id, tp.partition)
	p.ErrorCode = code
	if code == kerr.NotLeaderForPartition.Code {
		r.leader(p, topic, tp.partition)
	}
}

// leader points a NOT_LEADER_OR_FOLLOWER partition at its current leader.
func (r *responseParts) leader(p *kmsg.ShareFetchResponseTopicPartition, topic string, partition int32) {
	if topic == "" {
		return
	}
	img := r.m.parts.Image()
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaderOf(img, topic, partition)
	if id := p.CurrentLeader.LeaderID; id >= 0 && !slices.Contains(r.endpoints, id) {
		r.endpoints = append(r.endpoints, id)
	}
}

// into fills resp.
func (r *responseParts) into(resp *kmsg.ShareFetchResponse) *kmsg.ShareFetchResponse {
	resp.Topics = r.topics
	img := r.m.parts.Image()
	for _, id := range r.endpoints {
		if b := img.Broker(id); b != nil {
			e := kmsg.NewShareFetchResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = b.ID, b.Host, b.Port
			e.Rack = optional(b.Rack)
			resp.NodeEndpoints = append(resp.NodeEndpoints, e)
		}
	}
	return resp
}

// addAckEndpoint adds a leader's endpoint to a ShareAcknowledge response once.
func addAckEndpoint(resp *kmsg.ShareAcknowledgeResponse, img *metadata.Image, id int32) {
	if id < 0 || slices.ContainsFunc(resp.NodeEndpoints, func(e kmsg.ShareAcknowledgeResponseNodeEndpoint) bool { return e.NodeID == id }) {
		return
	}
	if b := img.Broker(id); b != nil {
		e := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		e.NodeID, e.Host, e.Port = b.ID, b.Host, b.Port
		e.Rack = optional(b.Rack)
		resp.NodeEndpoints = append(resp.NodeEndpoints, e)
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func metadataUUID(id [16]byte) metadata.UUID { return metadata.UUID(id) }

func errorsIsNotLeader(err error) bool { return errors.Is(err, replica.ErrNotLeader) }
