package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Group size limits, as Kafka's group coordinator applies them:
//
//   - group.consumer.max.size (Config.ConsumerMaxSize): a consumer group that
//     holds that many members, classic members in it included, refuses a
//     ConsumerGroupHeartbeat or a classic JoinGroup of a member it does not
//     hold (a new member id, or a static member's replacement) with
//     GROUP_MAX_SIZE_REACHED. Members it holds carry on.
//   - group.classic.max.size (Config.ClassicMaxSize): a classic group refuses a
//     JoinGroup past it with GROUP_MAX_SIZE_REACHED (acceptClassicJoinLocked).
//   - The online conversions (migration.go) keep to the target's limit: a
//     classic group with more members than group.consumer.max.size is not
//     upgraded (GROUP_ID_NOT_FOUND with Kafka's message), and one with exactly
//     that many is not either, since the joining member would not fit
//     (GROUP_MAX_SIZE_REACHED); a consumer group whose remaining classic
//     members are more than group.classic.max.size is not downgraded when its
//     last KIP-848 member goes: it stays a consumer group of classic members.

// consumerGroupFullLocked reports whether the consumer group may not take
// memberID: it holds ConsumerMaxSize members and memberID is not one.
func (g *group) consumerGroupFullLocked(memberID string) bool {
	return len(g.cg.members) >= g.c.cfg.ConsumerMaxSize && (memberID == "" || g.cg.members[memberID] == nil)
}

// consumerGroupFullMessage is Kafka's message with GROUP_MAX_SIZE_REACHED.
func (g *group) consumerGroupFullMessage() string {
	return fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.c.cfg.ConsumerMaxSize)
}

// acceptClassicJoinLocked is Kafka's capacity check of a JoinGroup to a classic
// group by memberID ("" for a new member): an Empty group takes anyone; a
// rebalancing one a member already waiting in it, or anyone while fewer than
// ClassicMaxSize joins wait; a settled one a member it holds, or anyone while
// it holds fewer than ClassicMaxSize.
func (g *group) acceptClassicJoinLocked(memberID string) bool {
	max := g.c.cfg.ClassicMaxSize
	m := g.members[memberID]
	switch g.state {
	case statePreparingRebalance:
		if m != nil && m.join != nil {
			return true
		}
		waiting := 0
		for _, o := range g.members {
			if o.join != nil {
				waiting++
			}
		}
		return waiting < max
	case stateCompletingRebalance, stateStable:
		return m != nil || len(g.members) < max
	}
	return true
}

// refuseClassicJoinLocked answers a JoinGroup past group.classic.max.size.
// A member of the group that could not rejoin in time leaves it, as in Kafka,
// and the rebalance may then complete without it.
func (g *group) refuseClassicJoinLocked(memberID string, w chan joinResult) {
	if m := g.members[memberID]; m != nil {
		g.c.log.Info("member removed: the classic group is full", "group", g.id, "member", memberID, "max", g.c.cfg.ClassicMaxSize)
		g.removeMemberLocked(m)
	}
	w <- joinError(kerr.GroupMaxSizeReached.Code, "")
}
