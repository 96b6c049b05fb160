package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/twmb/franz-go/pkg/kadm"
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
	// Errors are the brokers whose groups are missing from Groups: their
	// ListGroups failed. Absent when every broker answered.
	Errors []brokerError `json:"errors,omitempty"`
}

// brokerError is why one broker's groups are not listed.
type brokerError struct {
	Broker  int32  `json:"broker"` // -1: the request could not be sent to a broker
	Code    string `json:"code"`
	Message string `json:"message"`
}

// handleListGroups lists the groups of every coordinator in the cluster. A
// broker that does not answer leaves its groups out, and its error is listed,
// as the console's groups list shows it; the request fails only when no broker
// answered, or the listing failed as a whole.
func (a *API) handleListGroups(w http.ResponseWriter, r *http.Request) {
	listed, err := a.admin.ListGroups(r.Context())
	ans := groupList{Groups: []groupSummary{}}
	if shards := (*kadm.ShardErrors)(nil); errors.As(err, &shards) && !shards.AllFailed {
		for _, se := range shards.Errs {
			ans.Errors = append(ans.Errors, brokerError{se.Broker.NodeID, fromErr(se.Err).code, se.Err.Error()})
		}
	} else if err != nil {
		writeError(w, fromErr(err))
		return
	}
	all := httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, acl.ClusterName)
	for _, g := range listed {
		if !all && !httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			continue
		}
		ans.Groups = append(ans.Groups, groupSummary{g.Group, g.State, g.ProtocolType})
	}
	slices.SortFunc(ans.Groups, func(a, b groupSummary) int { return strings.Compare(a.Group, b.Group) })
	slices.SortFunc(ans.Errors, func(a, b brokerError) int { return cmp.Compare(a.Broker, b.Broker) })
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

// handleDescribeGroup shows a group as its coordinator, wherever it is, sees it,
// a classic or a KIP-848 consumer group: members and their assignments, and per
// partition the committed offset, the log ends and the lag. Offsets and lag
// cover the topics the caller may DESCRIBE only, as Kafka's OffsetFetch does.
func (a *API) handleDescribeGroup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	views, err := admin.GroupViews(r.Context(), a.admin, id)
	if other := (*admin.OtherGroupTypeError)(nil); errors.As(err, &other) {
		writeError(w, errorf(http.StatusNotFound, kerr.GroupIDNotFound.Message, "%v, not a consumer group", err))
		return
	}
	if err != nil {
		writeError(w, fromErr(err))
		return
	}
	v := views[id]
	if v.Unknown() {
		writeError(w, unknownGroup(id))
		return
	}
	v = v.OnlyTopics(func(topic string) bool {
		return httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
	})
	ans := groupOut{Group: id, State: v.State, ProtocolType: v.ProtocolType, Protocol: v.Protocol, Members: []memberOut{}, Offsets: []groupOffset{}}
	for _, m := range v.Members {
		mo := memberOut{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.Host, Assignment: []topicPartitions{}}
		for t, ps := range m.Assignment {
			mo.Assignment = append(mo.Assignment, topicPartitions{t, ps})
		}
		slices.SortFunc(mo.Assignment, func(a, b topicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
		ans.Members = append(ans.Members, mo)
	}
	for _, pv := range v.Offsets {
		o := groupOffset{Topic: pv.Topic, Partition: pv.Partition, MemberID: pv.MemberID,
			Committed: known(pv.Committed), LogStartOffset: known(pv.Start), HighWatermark: known(pv.End)}
		if pv.LagKnown() {
			o.Lag = ptr(pv.Lag)
		}
		ans.Offsets = append(ans.Offsets, o)
	}
	ans.Lag, _ = v.Lag()
	writeJSON(w, http.StatusOK, ans)
}

// known is v, or nil when v is negative (unknown, or none).
func known(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return ptr(v)
}

func ptr(v int64) *int64 { return &v }

func unknownGroup(id string) *apiError {
	return errorf(http.StatusNotFound, kerr.GroupIDNotFound.Message, "unknown group %q", id)
}
