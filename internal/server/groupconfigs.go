package server

import (
	"strconv"
	"time"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
)

// consumerGroupConfig is what a group's own configs (metadata) set: the
// session timeouts and heartbeat intervals of its KIP-848, streams or share members,
// zero where it sets none, and its streams assignment configs.
func (n *Node) consumerGroupConfig(id string) group.ConsumerGroupConfig {
	var c group.ConsumerGroupConfig
	set := n.ctrl.Image().GroupConfigs(id)
	ms := func(key string) time.Duration {
		v, err := strconv.Atoi(set[key]) // validated when stored; absent is 0
		if err != nil {
			return 0
		}
		return time.Duration(v) * time.Millisecond
	}
	c.SessionTimeout = ms(metadata.GroupConsumerSessionTimeout)
	c.HeartbeatInterval = ms(metadata.GroupConsumerHeartbeatInterval)
	c.StreamsSessionTimeout = ms(metadata.GroupStreamsSessionTimeout)
	c.StreamsHeartbeatInterval = ms(metadata.GroupStreamsHeartbeatInterval)
	c.ShareSessionTimeout = ms(metadata.GroupShareSessionTimeout)
	c.ShareHeartbeatInterval = ms(metadata.GroupShareHeartbeatInterval)
	c.StreamsStandbyReplicas, _ = strconv.Atoi(set[metadata.GroupStreamsStandbyReplicas])
	// The warm-up configs have non-zero defaults: the effective values.
	img := n.ctrl.Image()
	c.StreamsWarmupReplicas, _ = strconv.Atoi(img.GroupConfig(id, metadata.GroupStreamsWarmupReplicas))
	c.StreamsAcceptableRecoveryLag, _ = strconv.ParseInt(img.GroupConfig(id, metadata.GroupStreamsRecoveryLag), 10, 64)
	c.StreamsRackAwareTags, _ = metadata.ParseRackAwareTags(img.GroupConfig(id, metadata.GroupStreamsRackAwareTags))
	return c
}
