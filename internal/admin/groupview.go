package admin

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// GroupView is a group as `strata group describe` and the HTTP API's
// GET /groups/{group} show it, whichever protocol it speaks: its state, its
// members and their assignments, and its position in every partition it has
// committed or owns.
type GroupView struct {
	Group        string
	State        string
	ProtocolType string // "consumer" for a KIP-848 consumer group
	Protocol     string // the classic protocol, or a KIP-848 group's assignor
	Coordinator  int32
	Members      []MemberView
	Offsets      []PartitionView // by topic, then partition
}

// MemberView is one member of a group.
type MemberView struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	Host       string
	// Assignment is by topic, partitions sorted; it is empty for a classic
	// group of another protocol type than "consumer" (its bytes are opaque).
	Assignment map[string][]int32
}

// PartitionView is a group's position in one partition.
type PartitionView struct {
	Topic     string
	Partition int32
	Committed int64 // -1: none
	Start     int64 // the log start offset; -1: unknown
	End       int64 // the high-water mark; -1: unknown
	// Lag is End - Committed, or End - Start without a commit; -1: unknown
	// (Err says why).
	Lag      int64
	MemberID string // the member it is assigned to; "" when none
	Err      error
}

// LagKnown reports whether o's lag is known: both ends were read.
func (o PartitionView) LagKnown() bool { return o.Err == nil && o.Lag >= 0 }

// Lag is v's total lag over the partitions whose lag is known, and how many
// partitions have an unknown lag: every front door shows this total.
func (v GroupView) Lag() (total int64, unknown int) {
	for _, o := range v.Offsets {
		if o.LagKnown() {
			total += o.Lag
		} else {
			unknown++
		}
	}
	return total, unknown
}

// OnlyTopics is v with the offsets of the topics describable allows only, as
// Kafka's OffsetFetch leaves out those the caller may not DESCRIBE.
func (v GroupView) OnlyTopics(describable func(topic string) bool) GroupView {
	v.Offsets = slices.DeleteFunc(slices.Clone(v.Offsets), func(o PartitionView) bool { return !describable(o.Topic) })
	return v
}

// Unknown reports whether no group has v's id: it is described Dead (or
// without a state) with nothing committed, as an id nobody used is.
func (v GroupView) Unknown() bool {
	return (v.State == "Dead" || v.State == "") && len(v.Offsets) == 0
}

// OtherGroupTypeError: the group is a share or streams group, which a group
// view does not show.
type OtherGroupTypeError struct{ Group, Type string }

func (e *OtherGroupTypeError) Error() string {
	return fmt.Sprintf("group %q is a %s group", e.Group, e.Type)
}

// GroupViews describes groups. DescribeGroups (v6, KIP-1043) answers
// GROUP_ID_NOT_FOUND for a group of another protocol than the classic one,
// which GroupLag takes for a Dead group with no members, as for an id nobody
// used; such a group is looked up in ListGroups, and a KIP-848 consumer group
// is described with ConsumerGroupDescribe (a share or streams group is an
// OtherGroupTypeError). A group's describe or offset fetch error is returned.
func GroupViews(ctx context.Context, adm *kadm.Client, groups ...string) (map[string]GroupView, error) {
	lags, err := GroupLag(ctx, adm, groups...)
	if err != nil {
		return nil, err
	}
	views := make(map[string]GroupView, len(groups))
	var unknown []string
	for _, name := range groups {
		l, ok := lags[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("group %q: no answer for it", name)
		case l.DescribeErr != nil:
			return nil, fmt.Errorf("group %q: %w", name, l.DescribeErr)
		case l.FetchErr != nil:
			return nil, fmt.Errorf("group %q: committed offsets: %w", name, l.FetchErr)
		}
		v := classicView(l)
		if v.State == "Dead" && len(v.Members) == 0 {
			unknown = append(unknown, name)
		}
		views[name] = v
	}
	if err := describeConsumerGroups(ctx, adm, views, unknown); err != nil {
		return nil, err
	}
	return views, nil
}

// classicView is a group as kadm's Lag described it.
func classicView(l kadm.DescribedGroupLag) GroupView {
	v := GroupView{Group: l.Group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: l.Coordinator.NodeID, Members: []MemberView{}, Offsets: []PartitionView{}}
	for _, m := range l.Members {
		mv := MemberView{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Assignment: map[string][]int32{}}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				mv.Assignment[t.Topic] = sorted(t.Partitions)
			}
		}
		v.Members = append(v.Members, mv)
	}
	for _, ps := range l.Lag {
		for _, ml := range ps {
			o := PartitionView{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At,
				Start: -1, End: -1, Lag: ml.Lag, Err: ml.Err}
			if ml.Start.Err == nil {
				o.Start = ml.Start.Offset
			}
			if ml.End.Err == nil {
				o.End = ml.End.Offset
			}
			if ml.Member != nil {
				o.MemberID = ml.Member.MemberID
			}
			v.Offsets = append(v.Offsets, o)
		}
	}
	sortPartitions(v.Offsets)
	return v
}

// describeConsumerGroups replaces, in views, each of the groups described
// Dead with no members that is a KIP-848 consumer group by its
// ConsumerGroupDescribe answer.
func describeConsumerGroups(ctx context.Context, adm *kadm.Client, views map[string]GroupView, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	var consumer []string
	for _, name := range groups {
		switch typ := listed[name].GroupType; typ {
		case "", "classic": // no such group: Dead, as DescribeGroups v5 said
		case "consumer":
			consumer = append(consumer, name)
		default:
			return &OtherGroupTypeError{Group: name, Type: typ}
		}
	}
	if len(consumer) == 0 {
		return nil
	}
	described, err := adm.DescribeConsumerGroups(ctx, consumer...)
	if err != nil {
		return err
	}
	for _, name := range consumer {
		cg, ok := described[name]
		if !ok {
			continue
		}
		if cg.Err != nil {
			return fmt.Errorf("group %q: %w", name, cg.Err)
		}
		if views[name], err = withConsumerGroup(ctx, adm, views[name], cg); err != nil {
			return err
		}
	}
	return nil
}

// withConsumerGroup is v (the group's committed offsets) with the state,
// assignor and members of its ConsumerGroupDescribe answer, each partition
// given the member it is assigned to; an assigned partition without a commit
// is added with its lag from the log start, as for a classic group.
func withConsumerGroup(ctx context.Context, adm *kadm.Client, v GroupView, cg kadm.DescribedConsumerGroup) (GroupView, error) {
	v.State, v.ProtocolType, v.Protocol = cg.State, "consumer", cg.AssignorName
	v.Members = []MemberView{}
	owner := map[string]map[int32]string{}
	uncommitted := kadm.TopicsSet{}
	for _, m := range cg.Members {
		mv := MemberView{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Assignment: map[string][]int32{}}
		m.Assignment.EachPartitions(func(t string, ps []int32) {
			mv.Assignment[t] = sorted(ps)
			if owner[t] == nil {
				owner[t] = map[int32]string{}
			}
			for _, p := range ps {
				owner[t][p] = m.MemberID
				uncommitted.Add(t, p)
			}
		})
		v.Members = append(v.Members, mv)
	}
	for i, o := range v.Offsets {
		v.Offsets[i].MemberID = owner[o.Topic][o.Partition]
		if ps := uncommitted[o.Topic]; ps != nil {
			delete(ps, o.Partition)
		}
	}
	added, err := uncommittedPartitions(ctx, adm, uncommitted, owner)
	if err != nil {
		return v, err
	}
	v.Offsets = append(v.Offsets, added...)
	sortPartitions(v.Offsets)
	return v, nil
}

// uncommittedPartitions lists the assigned partitions in ps, none of which has
// a commit, with their log ends and their lag from the log start.
func uncommittedPartitions(ctx context.Context, adm *kadm.Client, ps kadm.TopicsSet, owner map[string]map[int32]string) ([]PartitionView, error) {
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
	var out []PartitionView
	ps.Each(func(t string, p int32) {
		o := PartitionView{Topic: t, Partition: p, Committed: -1, Start: -1, End: -1, Lag: -1, MemberID: owner[t][p]}
		start, sok := starts.Lookup(t, p)
		end, eok := ends.Lookup(t, p)
		switch {
		case !sok || !eok:
			o.Err = fmt.Errorf("offsets of %s-%d not listed", t, p)
		case start.Err != nil:
			o.Err = start.Err
		case end.Err != nil:
			o.Err = end.Err
		default:
			o.Start, o.End, o.Lag = start.Offset, end.Offset, end.Offset-start.Offset
		}
		out = append(out, o)
	})
	return out, nil
}

func sorted(ps []int32) []int32 {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}

func sortPartitions(ps []PartitionView) {
	slices.SortFunc(ps, func(a, b PartitionView) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}
