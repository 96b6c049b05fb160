package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/httpauth"
)

// Request versions the console uses with the coordinator (all within
// group.Versions()).
const (
	listGroupsVersion     = 4
	describeGroupsVersion = 5
)

// groupSummary is one row of the groups list.
type groupSummary struct {
	ID           string
	State        string
	ProtocolType string
	Protocol     string
	Members      int
	Lag          int64 // total over partitions with a known lag
	LagUnknown   int   // partitions whose lag is unknown here
	Partitions   int
}

func (c *Console) listGroups(ctx context.Context) []groupSummary {
	req := kmsg.NewPtrListGroupsRequest()
	req.SetVersion(listGroupsVersion)
	resp := c.cfg.Groups.ListGroups(ctx, req)
	var out []groupSummary
	for _, g := range resp.Groups {
		out = append(out, groupSummary{ID: g.Group, State: g.GroupState, ProtocolType: g.ProtocolType})
	}
	slices.SortFunc(out, func(a, b groupSummary) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// describe fills in members and protocol for groups.
func (c *Console) describe(ctx context.Context, ids ...string) []kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.SetVersion(describeGroupsVersion)
	req.Groups = ids
	return c.cfg.Groups.DescribeGroups(ctx, req).Groups
}

// hwmFunc reads the high-water marks of the partitions this node leads.
func (c *Console) hwmFunc() group.HighWatermarkFunc {
	return func(topic string, partition int32) (int64, bool) {
		p, err := c.cfg.Replicas.Partition(topic, partition)
		if err != nil || !p.IsLeader() {
			return 0, false
		}
		return p.HighWatermark(), true
	}
}

type groupsPage struct {
	base
	Available bool
	Groups    []groupSummary
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	pg := groupsPage{base: c.base("Consumer groups", "groups"), Available: c.cfg.Groups != nil}
	if !pg.Available {
		pg.Error = errNoGroups.Error()
		c.render(w, http.StatusOK, "groups", pg)
		return
	}
	pg.Groups = c.listGroups(r.Context())
	ids := make([]string, len(pg.Groups))
	for i, g := range pg.Groups {
		ids[i] = g.ID
	}
	if len(ids) > 0 {
		described := c.describe(r.Context(), ids...)
		lags, err := c.cfg.Groups.Lag(c.hwmFunc())
		if err != nil {
			pg.Error = "Reading lag: " + err.Error()
		}
		for i := range pg.Groups {
			g := &pg.Groups[i]
			for _, d := range described {
				if d.Group == g.ID {
					g.Members, g.Protocol = len(d.Members), d.Protocol
				}
			}
			for _, l := range lags {
				if l.Group != g.ID {
					continue
				}
				g.Partitions++
				if l.Lag < 0 {
					g.LagUnknown++
				} else {
					g.Lag += l.Lag
				}
			}
		}
	}
	c.render(w, http.StatusOK, "groups", pg)
}

// memberView is one group member with its decoded assignment.
type memberView struct {
	ID, InstanceID, ClientID, ClientHost string
	Assignment                           []assignedTopic
	AssignmentNote                       string // why no assignment is shown
}

type assignedTopic struct {
	Topic      string
	Partitions []int32
}

type lagView struct {
	Topic         string
	Partition     int32
	Committed     int64
	HighWatermark int64
	Lag           int64
}

type resetForm struct {
	Topic, To, Offset string
}

type groupPage struct {
	base
	ID           string
	State        string
	ProtocolType string
	Protocol     string
	Members      []memberView
	Lag          []lagView
	TotalLag     int64
	Topics       []string // reset form choices: committed topics first, then the rest
	Form         resetForm
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Groups == nil {
		c.renderError(w, r, http.StatusNotFound, "No consumer groups", errNoGroups.Error())
		return
	}
	id := r.PathValue("group")
	pg, status, err := c.groupPage(r.Context(), id)
	if err != nil {
		c.renderError(w, r, status, "Unknown group", err.Error())
		return
	}
	q := r.URL.Query()
	if t := q.Get("reset"); t != "" {
		pg.Flash = fmt.Sprintf("Offsets of topic %s reset to %s.", t, q.Get("to"))
	}
	c.render(w, http.StatusOK, "group", pg)
}

func (c *Console) groupPage(ctx context.Context, id string) (groupPage, int, error) {
	pg := groupPage{base: c.base("Group "+id, "groups"), ID: id, Form: resetForm{To: "earliest"}}
	described := c.describe(ctx, id)
	if len(described) != 1 {
		return pg, http.StatusInternalServerError, fmt.Errorf("the coordinator did not describe group %q", id)
	}
	d := described[0]
	if d.ErrorCode != 0 {
		return pg, http.StatusServiceUnavailable, fmt.Errorf("group %q: %s", id, errorName(d.ErrorCode))
	}
	lags, err := c.cfg.Groups.Lag(c.hwmFunc(), id)
	consumer := d.State == "Dead" && len(d.Members) == 0 && c.describeConsumerGroup(ctx, &pg)
	if !consumer && d.State == "Dead" && (err != nil || len(lags) == 0) {
		return pg, http.StatusNotFound, fmt.Errorf("there is no group %q on this node", id)
	}
	if err != nil {
		pg.Error = "Reading lag: " + err.Error()
	}
	if !consumer {
		pg.State, pg.ProtocolType, pg.Protocol = d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			mv := memberView{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				mv.InstanceID = *m.InstanceID
			}
			mv.Assignment, mv.AssignmentNote = decodeAssignment(d.ProtocolType, m.MemberAssignment)
			pg.Members = append(pg.Members, mv)
		}
	}
	seen := map[string]bool{}
	for _, l := range lags {
		pg.Lag = append(pg.Lag, lagView{l.Topic, l.Partition, l.Committed, l.HighWatermark, l.Lag})
		if l.Lag > 0 {
			pg.TotalLag += l.Lag
		}
		if !seen[l.Topic] {
			seen[l.Topic] = true
			pg.Topics = append(pg.Topics, l.Topic)
		}
	}
	for _, t := range c.cfg.Cluster.Image().Topics() {
		if !seen[t.Name] && !strings.HasPrefix(t.Name, "__") {
			pg.Topics = append(pg.Topics, t.Name)
		}
	}
	if len(pg.Topics) > 0 {
		pg.Form.Topic = pg.Topics[0]
	}
	return pg, http.StatusOK, nil
}

// describeConsumerGroup fills pg from ConsumerGroupDescribe, and reports
// whether it did, when the group is a KIP-848 consumer group
// (group.protocol=consumer), which DescribeGroups answers as Dead with no
// members: its state, assignor and members with their assignments.
func (c *Console) describeConsumerGroup(ctx context.Context, pg *groupPage) bool {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{pg.ID}
	resp := c.cfg.Groups.ConsumerGroupDescribe(ctx, req)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return false
	}
	g := resp.Groups[0]
	pg.State, pg.ProtocolType, pg.Protocol = g.State, "consumer", g.AssignorName
	for _, m := range g.Members {
		mv := memberView{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, AssignmentNote: "none yet"}
		if m.InstanceID != nil {
			mv.InstanceID = *m.InstanceID
		}
		for _, t := range m.Assignment.TopicPartitions {
			mv.Assignment = append(mv.Assignment, assignedTopic{t.Topic, sortedIDs(t.Partitions)})
		}
		slices.SortFunc(mv.Assignment, func(a, b assignedTopic) int { return strings.Compare(a.Topic, b.Topic) })
		pg.Members = append(pg.Members, mv)
	}
	return true
}

func sortedIDs(ps []int32) []int32 {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}

// decodeAssignment reads a consumer-protocol assignment; other protocols' bytes are
// opaque.
func decodeAssignment(protocolType string, b []byte) ([]assignedTopic, string) {
	if len(b) == 0 {
		return nil, "none (the group is not stable)"
	}
	if protocolType != "consumer" {
		return nil, fmt.Sprintf("%d bytes of protocol %q", len(b), protocolType)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, "undecodable: " + err.Error()
	}
	var out []assignedTopic
	for _, t := range a.Topics {
		out = append(out, assignedTopic{t.Topic, sortedIDs(t.Partitions)})
	}
	slices.SortFunc(out, func(a, b assignedTopic) int { return strings.Compare(a.Topic, b.Topic) })
	return out, ""
}

// lagJSON feeds the group page's lag chart.
func (c *Console) lagJSON(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Groups == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": errNoGroups.Error()})
		return
	}
	id := r.PathValue("group")
	lags, err := c.cfg.Groups.Lag(c.hwmFunc(), id)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	type partJSON struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Committed     int64  `json:"committed"`
		HighWatermark int64  `json:"highWatermark"`
		Lag           int64  `json:"lag"`
	}
	out := struct {
		Group      string     `json:"group"`
		Time       int64      `json:"time"`
		Total      int64      `json:"total"`
		Partitions []partJSON `json:"partitions"`
	}{Group: id, Time: c.cfg.Now().UnixMilli(), Partitions: []partJSON{}}
	for _, l := range lags {
		out.Partitions = append(out.Partitions, partJSON{l.Topic, l.Partition, l.Committed, l.HighWatermark, l.Lag})
		if l.Lag > 0 {
			out.Total += l.Lag
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// resetOffsets commits new offsets for every partition of one topic as an admin
// commit (no member), which Kafka accepts only while the group has no members. It
// goes through the Kafka protocol (Config.Admin), so it works from any node: the
// partition leaders answer the offsets and the group's coordinator takes the commit.
func (c *Console) resetOffsets(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	form := resetForm{Topic: r.PostForm.Get("topic"), To: r.PostForm.Get("to"), Offset: r.PostForm.Get("offset")}
	fail := func(status int, msg string) {
		pg, st, err := c.groupPage(r.Context(), id)
		if err != nil {
			c.renderError(w, r, st, "Reset failed", msg)
			return
		}
		pg.Form, pg.Error = form, msg
		c.render(w, status, "group", pg)
	}
	if d := httpauth.Require(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, form.Topic); d != nil {
		fail(http.StatusForbidden, d.Message)
		return
	}
	spec, err := c.resetSpec(form)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	bounds, err := admin.ListBounds(ctx, c.cfg.Admin, form.Topic)
	var offsets map[int32]int64
	if err == nil {
		offsets, err = spec.Resolve(ctx, c.cfg.Admin, form.Topic, bounds)
	}
	if err != nil {
		fail(http.StatusServiceUnavailable, "Reading the offsets of "+form.Topic+": "+err.Error())
		return
	}
	commit := make(kadm.Offsets)
	for p, o := range offsets {
		commit.Add(kadm.Offset{Topic: form.Topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resps, err := c.cfg.Admin.CommitOffsets(ctx, id, commit)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		msg := "Committing: " + err.Error() + "."
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.RebalanceInProgress) {
			msg += " Offsets can be reset only while the group has no members: stop its consumers first."
		}
		fail(http.StatusConflict, msg)
		return
	}
	c.log.Info("console: reset group offsets", "group", id, "topic", form.Topic, "to", form.To, "remote", r.RemoteAddr)
	q := url.Values{"reset": {form.Topic}, "to": {form.describe()}}
	http.Redirect(w, r, "/console/groups/"+url.PathEscape(id)+"?"+q.Encode(), http.StatusSeeOther)
}

func (f resetForm) describe() string {
	if f.To == "offset" {
		return "offset " + f.Offset
	}
	return f.To
}

// resetSpec reads the form: an existing topic and where to move it (the log start,
// the high-water mark, or an offset, clamped into that range when resolved).
func (c *Console) resetSpec(f resetForm) (admin.OffsetSpec, error) {
	if c.cfg.Cluster.Image().Topic(f.Topic) == nil {
		return admin.OffsetSpec{}, fmt.Errorf("there is no topic %q", f.Topic)
	}
	switch f.To {
	case "earliest":
		return admin.OffsetSpec{Kind: admin.OffsetEarliest}, nil
	case "latest":
		return admin.OffsetSpec{Kind: admin.OffsetLatest}, nil
	case "offset":
		n, err := strconv.ParseInt(strings.TrimSpace(f.Offset), 10, 64)
		if err != nil || n < 0 {
			return admin.OffsetSpec{}, fmt.Errorf("the offset must be a number >= 0, not %q", f.Offset)
		}
		return admin.OffsetSpec{Kind: admin.OffsetExact, Offset: n}, nil
	}
	return admin.OffsetSpec{}, fmt.Errorf("reset to earliest, latest or an offset, not %q", f.To)
}

// errorName is Kafka's name for an error code.
func errorName(code int16) string {
	if err := kerr.TypedErrorForCode(code); err != nil && err.Code == code {
		return err.Message
	}
	return "error code " + strconv.Itoa(int(code))
}
