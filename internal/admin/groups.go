package admin

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Classic groups through DescribeGroups. Since v6 (KIP-1043) DescribeGroups
// answers GROUP_ID_NOT_FOUND for a group id with no classic group: none at
// all, or a group of another protocol (KIP-848, share, streams). v5 answered
// a Dead group with no members and no error, and the front doors keep that
// meaning: a group not yet started can be given offsets (group
// reset-offsets), is described Dead with whatever offsets are committed under
// its id (group describe), and has no members to look up (the HTTP API's
// member lookup). DescribeGroups and GroupLag apply the rule, deadIfNotFound.

// deadIfNotFound is g as DescribeGroups v5 answered it when g is v6's
// GROUP_ID_NOT_FOUND: Dead, with no members and no error. Any other answer is
// g unchanged.
func deadIfNotFound(g kadm.DescribedGroup) kadm.DescribedGroup {
	if !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return g
	}
	return kadm.DescribedGroup{Group: g.Group, Coordinator: g.Coordinator, State: "Dead",
		AuthorizedOperations: g.AuthorizedOperations}
}

// DescribeGroups describes groups as kadm's DescribeGroups does, a group
// answered GROUP_ID_NOT_FOUND as a Dead group with no members.
func DescribeGroups(ctx context.Context, adm *kadm.Client, groups ...string) (kadm.DescribedGroups, error) {
	described, err := adm.DescribeGroups(ctx, groups...)
	for name, g := range described {
		described[name] = deadIfNotFound(g)
	}
	return described, err
}

// GroupLag is kadm's Lag with DescribeGroups' answers taken as DescribeGroups
// does here: a group answered GROUP_ID_NOT_FOUND is Dead with no members, its
// lag that of the offsets committed under its id (none: no lag).
func GroupLag(ctx context.Context, adm *kadm.Client, groups ...string) (kadm.DescribedGroupLags, error) {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return nil, err
	}
	for name, l := range lags {
		g := deadIfNotFound(kadm.DescribedGroup{Group: l.Group, Coordinator: l.Coordinator, State: l.State, Err: l.DescribeErr})
		if l.DescribeErr == nil || g.Err != nil {
			continue
		}
		l.State, l.ProtocolType, l.Protocol, l.Members, l.DescribeErr = g.State, "", "", nil, nil
		if l.Lag, l.FetchErr, err = committedLag(ctx, adm, g); err != nil {
			return nil, err
		}
		lags[name] = l
	}
	return lags, nil
}

// committedLag is the lag of the offsets committed under a group with no
// members, or the error fetching them (ferr); err is a failure to list the
// partitions' offsets.
func committedLag(ctx context.Context, adm *kadm.Client, g kadm.DescribedGroup) (lag kadm.GroupLag, ferr, err error) {
	committed, ferr := adm.FetchOffsets(ctx, g.Group)
	switch {
	case errors.Is(ferr, kerr.GroupIDNotFound):
		return nil, nil, nil
	case ferr != nil:
		return nil, ferr, nil
	}
	topics := committed.Partitions().Topics()
	if len(topics) == 0 {
		return nil, nil, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.CalculateGroupLagWithStartOffsets(g, committed, starts, ends), nil, nil
}
