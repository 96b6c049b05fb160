package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/httpauth"
)

// groupSummary is one row of the groups list.
type groupSummary struct {
	ID           string
	State        string
	Type         string // classic, consumer, share or streams
	ProtocolType string
	Protocol     string
	Members      int
	Lag          int64 // total over partitions with a known lag
	LagUnknown   int   // partitions whose lag is unknown
	Partitions   int
}

type groupsPage struct {
	base
	Available bool
	Groups    []groupSummary
}

// groups lists every group of the cluster (ListGroups of every broker) and
// describes the consumer groups, classic and KIP-848, with admin.GroupViews,
// as their own pages do: members, partitions and lag wherever their
// coordinators and partition leaders are, of the topics the principal may
// DESCRIBE. Share and streams groups are listed
// with their state.
func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	pg := groupsPage{base: c.base("Consumer groups", "groups"), Available: c.cfg.Admin != nil}
	if !pg.Available {
		pg.Error = errNoAdmin.Error()
		c.render(w, http.StatusOK, "groups", pg)
		return
	}
	// A broker that does not answer leaves its groups out; the others' are
	// listed, with the error.
	ctx, cancel := c.adminContext(r.Context())
	defer cancel()
	listed, err := c.cfg.Admin.ListGroups(ctx)
	if err != nil {
		pg.Error = "Listing groups: " + c.adminErr(err).Error()
	}
	var consumers []string
	for _, l := range listed.Sorted() {
		pg.Groups = append(pg.Groups, groupSummary{ID: l.Group, State: l.State, Type: l.GroupType, ProtocolType: l.ProtocolType})
		if l.GroupType != "share" && l.GroupType != "streams" {
			consumers = append(consumers, l.Group)
		}
	}
	if len(consumers) > 0 {
		views, err := admin.GroupViews(ctx, c.cfg.Admin, consumers...)
		if err != nil && pg.Error == "" {
			pg.Error = "Describing groups: " + c.adminErr(err).Error()
		}
		for i := range pg.Groups {
			if v, ok := views[pg.Groups[i].ID]; ok {
				summarize(&pg.Groups[i], v.OnlyTopics(describableTopics(r)))
			}
		}
	}
	c.render(w, http.StatusOK, "groups", pg)
}

// summarize fills g's members, protocol and lag from the group's view.
func summarize(g *groupSummary, v admin.GroupView) {
	g.State, g.ProtocolType, g.Protocol, g.Members = v.State, v.ProtocolType, v.Protocol, len(v.Members)
	g.Partitions = len(v.Offsets)
	g.Lag, g.LagUnknown = v.Lag()
}

// memberView is one group member with its assignment.
type memberView struct {
	ID, InstanceID, ClientID, ClientHost string
	Assignment                           []assignedTopic
	AssignmentNote                       string // why no assignment is shown
}

type assignedTopic struct {
	Topic      string
	Partitions []int32
}

// lagView is the group's position in one partition, as the page and its lag
// JSON show it; -1 is unknown (or, committed, none).
type lagView struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"highWatermark"`
	Lag           int64  `json:"lag"`
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
	Topics       []string // reset form choices: the group's topics first, then the others the principal may DESCRIBE
	Form         resetForm
}

// groupError is why a group's page or lag is not shown.
type groupError struct {
	status  int
	heading string
	err     error
}

// viewGroup describes a group over the Kafka protocol (Config.Admin) with
// admin.GroupViews, as `strata group describe` and the HTTP API's
// GET /groups/{group} do: whichever node coordinates it, with the offsets of
// partitions led anywhere, of the topics r's principal may DESCRIBE.
func (c *Console) viewGroup(r *http.Request, id string) (admin.GroupView, *groupError) {
	ctx := r.Context()
	if c.cfg.Admin == nil {
		return admin.GroupView{}, &groupError{http.StatusServiceUnavailable, "Groups unavailable", errNoAdmin}
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	views, err := admin.GroupViews(ctx, c.cfg.Admin, id)
	if other := (*admin.OtherGroupTypeError)(nil); errors.As(err, &other) {
		return admin.GroupView{}, &groupError{http.StatusNotFound, "Not a consumer group", fmt.Errorf("%w, not a consumer group", err)}
	}
	if err != nil {
		return admin.GroupView{}, &groupError{http.StatusServiceUnavailable, "Describing the group failed", c.adminErr(err)}
	}
	v := views[id]
	if v.Unknown() {
		return v, &groupError{http.StatusNotFound, "Unknown group", fmt.Errorf("there is no group %q", id)}
	}
	return v.OnlyTopics(describableTopics(r)), nil
}

// describableTopics reports whether r's principal may DESCRIBE a topic: a
// group's offsets and lag show those topics only, as Kafka's OffsetFetch
// answers them.
func describableTopics(r *http.Request) func(topic string) bool {
	return func(topic string) bool {
		return httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
	}
}

// lagOf is the lag table of v and its total over the partitions with a known
// lag, the total the groups list shows.
func lagOf(v admin.GroupView) (rows []lagView, total int64) {
	rows = []lagView{}
	for _, o := range v.Offsets {
		rows = append(rows, lagView{o.Topic, o.Partition, o.Committed, o.End, o.Lag})
	}
	total, _ = v.Lag()
	return rows, total
}

// memberOf is m, a member of v, as the page shows it.
func memberOf(v admin.GroupView, m admin.MemberView) memberView {
	mv := memberView{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.Host}
	if m.InstanceID != nil {
		mv.InstanceID = *m.InstanceID
	}
	for _, t := range slices.Sorted(maps.Keys(m.Assignment)) {
		mv.Assignment = append(mv.Assignment, assignedTopic{t, m.Assignment[t]})
	}
	switch {
	case len(mv.Assignment) > 0:
	case v.ProtocolType != "consumer":
		mv.AssignmentNote = fmt.Sprintf("not shown: the assignment of protocol type %q is opaque", v.ProtocolType)
	case v.State != "Stable":
		mv.AssignmentNote = "none (the group is not stable)"
	default:
		mv.AssignmentNote = "none"
	}
	return mv
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	pg, gerr := c.groupPage(r, r.PathValue("group"))
	if gerr != nil {
		c.renderError(w, r, gerr.status, gerr.heading, gerr.err.Error())
		return
	}
	q := r.URL.Query()
	if t := q.Get("reset"); t != "" {
		pg.Flash = fmt.Sprintf("Offsets of topic %s reset to %s.", t, q.Get("to"))
	}
	c.render(w, http.StatusOK, "group", pg)
}

func (c *Console) groupPage(r *http.Request, id string) (groupPage, *groupError) {
	pg := groupPage{base: c.base("Group "+id, "groups"), ID: id, Form: resetForm{To: "earliest"}}
	v, gerr := c.viewGroup(r, id)
	if gerr != nil {
		return pg, gerr
	}
	pg.State, pg.ProtocolType, pg.Protocol = v.State, v.ProtocolType, v.Protocol
	for _, m := range v.Members {
		pg.Members = append(pg.Members, memberOf(v, m))
	}
	pg.Lag, pg.TotalLag = lagOf(v)
	seen := map[string]bool{}
	for _, l := range pg.Lag {
		if !seen[l.Topic] {
			seen[l.Topic] = true
			pg.Topics = append(pg.Topics, l.Topic)
		}
	}
	for _, t := range c.cfg.Cluster.Image().Topics() {
		if !seen[t.Name] && !strings.HasPrefix(t.Name, "__") &&
			httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
			pg.Topics = append(pg.Topics, t.Name)
		}
	}
	if len(pg.Topics) > 0 {
		pg.Form.Topic = pg.Topics[0]
	}
	return pg, nil
}

// lagJSON feeds the group page's lag chart, from the page's own description
// of the group.
func (c *Console) lagJSON(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	v, gerr := c.viewGroup(r, id)
	if gerr != nil {
		writeJSON(w, gerr.status, map[string]string{"error": gerr.err.Error()})
		return
	}
	out := struct {
		Group      string    `json:"group"`
		Time       int64     `json:"time"`
		Total      int64     `json:"total"`
		Partitions []lagView `json:"partitions"`
	}{Group: id, Time: c.cfg.Now().UnixMilli()}
	out.Partitions, out.Total = lagOf(v)
	writeJSON(w, http.StatusOK, out)
}

// resetOffsets commits new offsets for every partition of one topic as an admin
// commit (no member), which Kafka accepts only while the group has no members. It
// goes through the Kafka protocol (Config.Admin), so it works from any node: the
// partition leaders answer the offsets and the group's coordinator takes the commit.
func (c *Console) resetOffsets(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	if c.cfg.Admin == nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Reset failed", errNoAdmin.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	form := resetForm{Topic: r.PostForm.Get("topic"), To: r.PostForm.Get("to"), Offset: r.PostForm.Get("offset")}
	fail := func(status int, msg string) {
		pg, gerr := c.groupPage(r, id)
		if gerr != nil {
			c.renderError(w, r, gerr.status, "Reset failed", msg)
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
	ctx, cancel := c.adminContext(r.Context())
	defer cancel()
	bounds, err := admin.ListBounds(ctx, c.cfg.Admin, form.Topic)
	var offsets map[int32]int64
	if err == nil {
		offsets, err = spec.Resolve(ctx, c.cfg.Admin, form.Topic, bounds)
	}
	if err != nil {
		fail(http.StatusServiceUnavailable, "Reading the offsets of "+form.Topic+": "+c.adminErr(err).Error())
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
		msg := "Committing: " + c.adminErr(err).Error() + "."
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
