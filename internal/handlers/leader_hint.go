package handlers

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// KIP-951: a Produce (v10+) or Fetch (v16+) partition answered
// NOT_LEADER_OR_FOLLOWER (a Fetch also FENCED_LEADER_EPOCH) carries the
// partition's current leader and leader epoch, and the response lists that
// leader's endpoint, so the client moves to it without a metadata round trip.
// A partition without a leader answers -1/-1; a leader that is not a live
// broker is named without an endpoint.

// leaderHint is the current leader and leader epoch of a partition in img,
// with the leader's broker when it is live.
func leaderHint(img *metadata.Image, topic string, partition int32) (leader, epoch int32, b *metadata.Broker) {
	p := img.Partition(topic, partition)
	if p == nil || p.Leader == metadata.NoLeader {
		return -1, -1, nil
	}
	if b = img.Broker(p.Leader); b != nil && b.Fenced {
		b = nil
	}
	return p.Leader, p.LeaderEpoch, b
}

// hintProduceLeaders fills in the current leader of every partition of a
// Produce answer (v10+) that was refused as not led here.
func hintProduceLeaders(img *metadata.Image, resp *kmsg.ProduceResponse) {
	if resp.Version < 10 {
		return
	}
	for ti := range resp.Topics {
		st := &resp.Topics[ti]
		for pi := range st.Partitions {
			sp := &st.Partitions[pi]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			leader, epoch, b := leaderHint(img, st.Topic, sp.Partition)
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
			if b != nil && !slices.ContainsFunc(resp.Brokers, func(rb kmsg.ProduceResponseBroker) bool { return rb.NodeID == b.ID }) {
				rb := kmsg.NewProduceResponseBroker()
				rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, b.Host, b.Port, rackOf(b)
				resp.Brokers = append(resp.Brokers, rb)
			}
		}
	}
}

// hintFetchLeader fills in the current leader of a Fetch partition (v16+)
// refused as not led here or at an older leader epoch.
func hintFetchLeader(img *metadata.Image, resp *kmsg.FetchResponse, topic string, sp *kmsg.FetchResponseTopicPartition) {
	if resp.Version < 16 || (sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code) {
		return
	}
	leader, epoch, b := leaderHint(img, topic, sp.Partition)
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
	if b != nil && !slices.ContainsFunc(resp.Brokers, func(rb kmsg.FetchResponseBroker) bool { return rb.NodeID == b.ID }) {
		rb := kmsg.NewFetchResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, b.Host, b.Port, rackOf(b)
		resp.Brokers = append(resp.Brokers, rb)
	}
}

// rackOf is a broker's rack as the protocol carries it: null when unset.
func rackOf(b *metadata.Broker) *string {
	if b.Rack == "" {
		return nil
	}
	rack := b.Rack
	return &rack
}
