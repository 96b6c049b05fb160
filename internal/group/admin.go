package group

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// groupType is what ListGroups v5 reports for a classic group; a KIP-848 group is
	// of type "consumer".
	groupType = "classic"
	// groupOperations is the DescribeGroups authorized-operations bitfield: READ (3),
	// DELETE (6) and DESCRIBE (8), everything a group supports; Strata has no ACLs.
	groupOperations = 1<<3 | 1<<6 | 1<<8
)

// ListGroups serves ListGroups v0-v5: the groups of every loaded partition, filtered
// by state (v4+) and type (v5+), both case-insensitively. While a partition is still
// loading the groups known so far come with COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.RLock()
	closed := c.mu.closed
	c.mu.RUnlock()
	if closed {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	parts, loading := c.loadedPartitions()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	for _, p := range parts {
		for _, g := range p.snapshot() {
			dead, pt, st, typ := g.listing()
			if dead {
				continue
			}
			if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool {
				return strings.EqualFold(s, st)
			}) {
				continue
			}
			if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool {
				return strings.EqualFold(t, typ)
			}) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = pt
			lg.GroupState = st
			lg.GroupType = typ
			resp.Groups = append(resp.Groups, lg)
		}
	}
	return resp
}

// listing is what ListGroups shows of g: whether it is dead, its protocol
// type, state and group type.
func (g *group) listing() (dead bool, protocolType, st, typ string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, typ = g.state.String(), groupType
	switch {
	case g.cg != nil:
		st, typ = g.cg.stateName(), consumerProtocolType
	case g.sg != nil:
		st, typ = g.sg.stateName(), shareProtocolType
	case g.st != nil:
		st, typ = g.st.stateName(), streamsProtocolType
	}
	return g.state == stateDead, g.protocolType, st, typ
}

// DescribeGroups serves DescribeGroups v0-v6. An unknown or dead group, or a group
// that is not classic (KIP-848 consumer, share, streams), is reported Dead: with no
// error before v6, GROUP_ID_NOT_FOUND and a message from v6 on (KIP-1043), as Kafka
// 4.4 answers. Member metadata and assignments are shown only for a Stable group.
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		c.describe(id, req.Version, &dg)
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describe(id string, version int16, dg *kmsg.DescribeGroupsResponseGroup) {
	p, code := c.partitionOf(id)
	if code != 0 {
		dg.ErrorCode = code
		return
	}
	// notFound answers a group there is nothing to describe of: Dead, and from
	// v6 on GROUP_ID_NOT_FOUND with why.
	notFound := func(why string) {
		dg.State = stateDead.String()
		if version >= 6 {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("Group %s %s.", id, why)
			dg.ErrorMessage = &msg
		}
	}
	g := p.lookup(c, id, false)
	if g == nil {
		notFound("not found")
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.cg != nil || g.sg != nil || g.st != nil:
		// Not a classic group: described by ConsumerGroupDescribe,
		// ShareGroupDescribe or StreamsGroupDescribe.
		notFound("is not a classic group")
		return
	case g.state == stateDead:
		notFound("not found")
		return
	}
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembersLocked() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = optional(m.instanceID)
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			if md := m.metadataFor(g.protocol); md != nil {
				dm.ProtocolMetadata = md
			}
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		dg.Members = append(dg.Members, dm)
	}
}

// DeleteGroups serves DeleteGroups v0-v3: an Empty group is deleted with its offsets
// (tombstones for all of them and for the group); a group with members answers
// NON_EMPTY_GROUP. v3's error message stays null: Kafka 4.4 sets it only for the
// errors of a streams topology description plugin, which Strata does not have. The answer comes once the tombstones are appended and, for a
// share group, its share-partition state is deleted.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	type pendingDelete struct {
		i     int
		g     *group
		done  chan error
		share bool // a share group: its share-partition state goes too
	}
	var pend []pendingDelete
	for i, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		resp.Groups = append(resp.Groups, rg)
		p, code := c.partitionOf(id)
		if code != 0 {
			resp.Groups[i].ErrorCode = code
			continue
		}
		g := p.lookup(c, id, false)
		if g == nil {
			resp.Groups[i].ErrorCode = kerr.GroupIDNotFound.Code
			continue
		}
		done := make(chan error, 1)
		g.withLock(func() {
			switch g.state {
			case stateDead:
				resp.Groups[i].ErrorCode = kerr.GroupIDNotFound.Code
			case stateEmpty:
				g.removeOffsetsLocked(nil, removeGroup, func(err error) { done <- err })
				pend = append(pend, pendingDelete{i, g, done, g.sg != nil})
			default:
				resp.Groups[i].ErrorCode = kerr.NonEmptyGroup.Code
			}
		})
	}
	for _, pd := range pend {
		c.flush(pd.g)
	}
	for _, pd := range pend {
		select {
		case err := <-pd.done:
			if err == nil && pd.share {
				if err := c.deleteShareState(ctx, pd.g.id); err != nil {
					c.log.Warn("deleting share-group state", "group", pd.g.id, "err", err)
					resp.Groups[pd.i].ErrorCode = shareStateCode(err)
					continue
				}
			}
			resp.Groups[pd.i].ErrorCode = AppendErrorCode(err)
		case <-ctx.Done():
			resp.Groups[pd.i].ErrorCode = kerr.RequestTimedOut.Code
		}
	}
	return resp
}
