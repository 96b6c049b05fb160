package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

type groupList struct {
	Groups []groupSummary `json:"groups"`
}

// handleListGroups lists the groups of every coordinator in the cluster.
func (a *API) handleListGroups(w http.ResponseWriter, r *http.Request) {
	listed, err := a.admin.ListGroups(r.Context())
	if err != nil {
		writeError(w, fromErr(err))
		return
	}
	ans := groupList{Groups: []groupSummary{}}
	all := httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, acl.ClusterName)
	for _, g := range listed {
		if !all && !httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			continue
		}
		ans.Groups = append(ans.Groups, groupSummary{g.Group, g.State, g.ProtocolType})
	}
	slices.SortFunc(ans.Groups, func(a, b groupSummary) int { return strings.Compare(a.Group, b.Group) })
	writeJSON(w, http.StatusOK, ans)
}

type groupOut struct {
	Group        string        `json:"group"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Members      []memberOut   `json:"members"`
	Offsets      []groupOffset `json:"offsets"`
	Lag          int64         `json:"lag"`
}

type memberOut struct {
	MemberID   string            `json:"member_id"`
	ClientID   string            `json:"client_id"`
	ClientHost string            `json:"client_host"`
	Assignment []topicPartitions `json:"assignment"`
}

type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupOffset is the group's position in one partition it owns or has committed.
type groupOffset struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Committed      *int64 `json:"committed"`
	LogStartOffset *int64 `json:"log_start_offset"`
	HighWatermark  *int64 `json:"high_watermark"`
	// Lag is high_watermark - committed (from the log start without a commit); null
	// when either end is unknown.
	Lag      *int64 `json:"lag"`
	MemberID string `json:"member_id,omitempty"`
}

// handleDescribeGroup shows a group as its coordinator, wherever it is, sees it:
// members and their assignments, and per partition the committed offset, the log
// ends and the lag.
func (a *API) handleDescribeGroup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	lags, err := a.admin.Lag(r.Context(), id)
	if err != nil {
		writeError(w, fromErr(err))
		return
	}
	l, ok := lags[id]
	if !ok {
		writeError(w, unknownGroup(id))
		return
	}
	if err := l.Error(); err != nil {
		writeError(w, fromErr(err))
		return
	}
	if (l.State == "Dead" || l.State == "") && len(l.Lag) == 0 {
		writeError(w, unknownGroup(id))
		return
	}
	ans := groupOut{Group: id, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol, Members: []memberOut{}, Offsets: []groupOffset{}}
	for _, m := range l.Members {
		mo := memberOut{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: []topicPartitions{}}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				mo.Assignment = append(mo.Assignment, topicPartitions{t.Topic, ps})
			}
			slices.SortFunc(mo.Assignment, func(a, b topicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
		}
		ans.Members = append(ans.Members, mo)
	}
	for _, ps := range l.Lag {
		for _, pl := range ps {
			o := groupOffset{Topic: pl.Topic, Partition: pl.Partition}
			if pl.Commit.At >= 0 {
				o.Committed = ptr(pl.Commit.At)
			}
			if pl.Start.Err == nil && pl.Start.Offset >= 0 {
				o.LogStartOffset = ptr(pl.Start.Offset)
			}
			if pl.End.Err == nil && pl.End.Offset >= 0 {
				o.HighWatermark = ptr(pl.End.Offset)
			}
			if pl.Err == nil && pl.Lag >= 0 {
				o.Lag = ptr(pl.Lag)
				ans.Lag += pl.Lag
			}
			if pl.Member != nil {
				o.MemberID = pl.Member.MemberID
			}
			ans.Offsets = append(ans.Offsets, o)
		}
	}
	slices.SortFunc(ans.Offsets, func(a, b groupOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	writeJSON(w, http.StatusOK, ans)
}

func ptr(v int64) *int64 { return &v }

func unknownGroup(id string) *apiError {
	return errorf(http.StatusNotFound, kerr.GroupIDNotFound.Message, "unknown group %q", id)
}
