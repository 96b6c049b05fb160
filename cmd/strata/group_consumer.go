package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// DescribeGroups (v6, KIP-1043) answers GROUP_ID_NOT_FOUND for a group of
// another protocol than the classic one, which the group commands see as a
// Dead group with no members, as for an id nobody used. describeOtherProtocols
// tells them apart by the group's type in ListGroups: a KIP-848 consumer group
// (group.protocol=consumer) is described with ConsumerGroupDescribe; a share or
// streams group is an error naming what shows it.

// otherGroupTools names, per group type, what describes a group of that type.
var otherGroupTools = map[string]string{
	"share":   "strata group share-offsets describe",
	"streams": "kafka-streams-groups --describe",
}

// describeOtherProtocols replaces, in out, each group described Dead with no
// members that is a KIP-848 consumer group by its ConsumerGroupDescribe answer.
func describeOtherProtocols(ctx context.Context, adm *kadm.Client, out []describedGroupJSON) error {
	var dead []string
	for _, d := range out {
		if d.State == "Dead" && len(d.Members) == 0 {
			dead = append(dead, d.Group)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	var consumer []string
	for _, name := range dead {
		switch typ := listed[name].GroupType; typ {
		case "", "classic": // no such group: Dead, as DescribeGroups v5 said
		case "consumer":
			consumer = append(consumer, name)
		default:
			tool := otherGroupTools[typ]
			if tool == "" {
				tool = "kafka-groups --list"
			}
			return fmt.Errorf("group %q is a %s group, which group describe does not show (see %s)", name, typ, tool)
		}
	}
	if len(consumer) == 0 {
		return nil
	}
	described, err := adm.DescribeConsumerGroups(ctx, consumer...)
	if err != nil {
		return err
	}
	for i, d := range out {
		cg, ok := described[d.Group]
		if !ok {
			continue
		}
		if cg.Err != nil {
			return fmt.Errorf("group %q: %w", d.Group, cg.Err)
		}
		if out[i], err = withConsumerGroup(ctx, adm, d, cg); err != nil {
			return err
		}
	}
	return nil
}

// withConsumerGroup is d (the group's committed offsets) with the state,
// assignor and members of its ConsumerGroupDescribe answer, each partition
// attributed to the member it is assigned to; an assigned partition without a
// commit is added with its lag from the log start, as for a classic group.
func withConsumerGroup(ctx context.Context, adm *kadm.Client, d describedGroupJSON, cg kadm.DescribedConsumerGroup) (describedGroupJSON, error) {
	d.State, d.ProtocolType, d.Protocol = cg.State, "consumer", cg.AssignorName
	d.Members = []groupMemberJSON{}
	owner := map[string]map[int32]string{}
	for _, m := range cg.Members {
		mj := groupMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Assignment: map[string][]int32{}}
		m.Assignment.EachPartitions(func(t string, ps []int32) {
			ps = slices.Clone(ps)
			slices.Sort(ps)
			mj.Assignment[t] = ps
			if owner[t] == nil {
				owner[t] = map[int32]string{}
			}
			for _, p := range ps {
				owner[t][p] = m.MemberID
			}
		})
		d.Members = append(d.Members, mj)
	}
	uncommitted := kadm.TopicsSet{}
	for t, ps := range owner {
		for p := range ps {
			uncommitted.Add(t, p)
		}
	}
	for i, o := range d.Offsets {
		d.Offsets[i].MemberID = owner[o.Topic][o.Partition]
		if ps := uncommitted[o.Topic]; ps != nil {
			delete(ps, o.Partition)
		}
	}
	added, err := uncommittedOffsets(ctx, adm, uncommitted, owner)
	if err != nil {
		return d, err
	}
	d.Offsets = append(d.Offsets, added...)
	sortOffsets(d.Offsets)
	return d, nil
}

// uncommittedOffsets lists the assigned partitions in ps, none of which has a
// commit, with their end offset and their lag from the log start.
func uncommittedOffsets(ctx context.Context, adm *kadm.Client, ps kadm.TopicsSet, owner map[string]map[int32]string) ([]groupOffsetJSON, error) {
	var topics []string
	for t, parts := range ps {
		if len(parts) > 0 {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var out []groupOffsetJSON
	ps.Each(func(t string, p int32) {
		o := groupOffsetJSON{Topic: t, Partition: p, Committed: -1, End: -1, Lag: -1, MemberID: owner[t][p]}
		start, sok := starts.Lookup(t, p)
		end, eok := ends.Lookup(t, p)
		switch {
		case !sok || !eok:
			o.Error = "offsets not listed"
		case start.Err != nil:
			o.Error = start.Err.Error()
		case end.Err != nil:
			o.Error = end.Err.Error()
		default:
			o.End, o.Lag = end.Offset, end.Offset-start.Offset
		}
		out = append(out, o)
	})
	return out, nil
}
