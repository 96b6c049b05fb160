package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// partitionView is one partition as the topic pages show it. Offsets and size are
// -1 when this node does not host the partition.
type partitionView struct {
	Index          int32
	Leader         int32
	LeaderLive     bool
	Replicas       []int32
	ISR            []int32
	LogStartOffset int64
	HighWatermark  int64
	Size           int64
	Rate           rate
	UnderRepl      bool
	Offline        bool
	Local          bool // hosted and led here: offsets are live
}

func (c *Console) partitionView(img *metadata.Image, t *metadata.Topic, p *metadata.Partition, now time.Time) partitionView {
	v := partitionView{
		Index: p.Index, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR,
		LogStartOffset: -1, HighWatermark: -1, Size: -1,
		LeaderLive: p.Leader != metadata.NoLeader && img.IsLive(p.Leader),
		UnderRepl:  len(p.ISR) < len(p.Replicas),
	}
	v.Offline = !v.LeaderLive
	if rp, err := c.cfg.Replicas.Partition(t.Name, p.Index); err == nil && rp.IsLeader() {
		v.Local = true
		v.LogStartOffset, v.HighWatermark = logStart(rp), rp.HighWatermark()
		v.Size = rp.Log().Size()
		v.Rate = c.rates.observe(partitionKey{t.Name, p.Index}, now, v.HighWatermark)
	}
	return v
}

// logStart is p's log start as ListOffsets earliest answers it (of a tiered
// partition the object store's), or its local one when the store does not
// answer.
func logStart(p *replica.Partition) int64 {
	if start, err := p.ReadableLogStart(); err == nil {
		return start
	}
	return p.LogStartOffset()
}

// topicSummary is one row of the topics list.
type topicSummary struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	UnderReplicated   int
	Offline           int
	Local             int   // partitions led here, which Size, Messages and Rate cover
	Size              int64 // of the partitions led here; -1 when none are
	Messages          int64 // HWM - log start, summed over the partitions led here
	Rate              rate
	Internal          bool
}

func (c *Console) summarize(img *metadata.Image, t *metadata.Topic, now time.Time) topicSummary {
	views := make([]partitionView, len(t.Partitions))
	for i, p := range t.Partitions {
		views[i] = c.partitionView(img, t, p, now)
	}
	return summaryOf(t.Name, views)
}

// brokerView is one broker on the overview.
type brokerView struct {
	ID         int32
	Addr       string
	Rack       string
	Live       bool
	Controller bool
	Self       bool
	Leads      int
}

type overviewPage struct {
	base
	ActiveController int32
	MetadataOffset   uint64
	Brokers          []brokerView
	Topics           int
	Partitions       int
	Online           int
	UnderReplicated  int
	Offline          int
	Groups           int // the cluster's groups; -1 when they cannot be listed
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	img := c.cfg.Cluster.Image()
	pg := overviewPage{
		base:             c.base("Cluster", "overview"),
		ActiveController: c.cfg.Cluster.LeaderID(),
		MetadataOffset:   img.Offset(),
		Topics:           img.NumTopics(),
		Groups:           -1,
	}
	leads := map[int32]int{}
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			pg.Partitions++
			switch {
			case p.Leader == metadata.NoLeader || !img.IsLive(p.Leader):
				pg.Offline++
			case len(p.ISR) < len(p.Replicas):
				pg.UnderReplicated++
				leads[p.Leader]++
			default:
				pg.Online++
				leads[p.Leader]++
			}
		}
	}
	for _, b := range img.Brokers() {
		pg.Brokers = append(pg.Brokers, brokerView{
			ID: b.ID, Addr: b.Addr(), Rack: b.Rack, Live: img.IsLive(b.ID),
			Controller: b.ID == pg.ActiveController, Self: b.ID == c.cfg.NodeID, Leads: leads[b.ID],
		})
	}
	if c.cfg.Admin != nil {
		ctx, cancel := context.WithTimeout(r.Context(), min(c.cfg.AdminTimeout, 2*time.Second))
		defer cancel()
		if listed, err := c.cfg.Admin.ListGroups(ctx); err == nil {
			pg.Groups = len(listed)
		}
	}
	c.render(w, http.StatusOK, "overview", pg)
}

type topicsPage struct {
	base
	Topics []topicSummary
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	img := c.cfg.Cluster.Image()
	now := c.cfg.Now()
	pg := topicsPage{base: c.base("Topics", "topics")}
	for _, t := range img.Topics() {
		pg.Topics = append(pg.Topics, c.summarize(img, t, now))
	}
	slices.SortFunc(pg.Topics, func(a, b topicSummary) int { return strings.Compare(a.Name, b.Name) })
	c.rates.forget(func(k partitionKey) bool { return img.Partition(k.topic, k.partition) != nil })
	c.render(w, http.StatusOK, "topics", pg)
}

type configView struct{ Name, Value string }

type topicPage struct {
	base
	Topic      topicSummary
	ID         string
	Partitions []partitionView
	Overrides  []configView
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	img := c.cfg.Cluster.Image()
	t := img.Topic(name)
	if t == nil {
		c.renderError(w, r, http.StatusNotFound, "Unknown topic", fmt.Sprintf("There is no topic %q.", name))
		return
	}
	now := c.cfg.Now()
	pg := topicPage{base: c.base("Topic "+name, "topics"), ID: t.ID.String()}
	if r.URL.Query().Get("created") != "" {
		pg.Flash = fmt.Sprintf("Topic %s created.", name)
	}
	for _, p := range t.Partitions {
		pg.Partitions = append(pg.Partitions, c.partitionView(img, t, p, now))
	}
	pg.Topic = summaryOf(name, pg.Partitions)
	for k, v := range t.Overrides {
		pg.Overrides = append(pg.Overrides, configView{k, v})
	}
	slices.SortFunc(pg.Overrides, func(a, b configView) int { return strings.Compare(a.Name, b.Name) })
	c.render(w, http.StatusOK, "topic", pg)
}

// summaryOf totals a topic's partition views.
func summaryOf(name string, ps []partitionView) topicSummary {
	s := topicSummary{Name: name, Partitions: len(ps), Size: -1, Messages: -1, Internal: strings.HasPrefix(name, "__")}
	for _, v := range ps {
		s.ReplicationFactor = max(s.ReplicationFactor, len(v.Replicas))
		if v.UnderRepl {
			s.UnderReplicated++
		}
		if v.Offline {
			s.Offline++
		}
		if v.Local {
			s.Local++
			s.Size = max(s.Size, 0) + v.Size
			s.Messages = max(s.Messages, 0) + v.HighWatermark - v.LogStartOffset
			if v.Rate.Known {
				s.Rate.Known = true
				s.Rate.PerSecond += v.Rate.PerSecond
			}
		}
	}
	return s
}

// topicJSON is the topic page's live refresh: its partition figures.
func (c *Console) topicJSON(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	img := c.cfg.Cluster.Image()
	t := img.Topic(name)
	if t == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown topic"})
		return
	}
	type partJSON struct {
		Partition      int32    `json:"partition"`
		Leader         int32    `json:"leader"`
		Replicas       []int32  `json:"replicas"`
		ISR            []int32  `json:"isr"`
		LogStartOffset int64    `json:"logStartOffset"`
		HighWatermark  int64    `json:"highWatermark"`
		SizeBytes      int64    `json:"sizeBytes"`
		MessagesPerSec *float64 `json:"messagesPerSecond"`
	}
	now := c.cfg.Now()
	out := struct {
		Topic      string     `json:"topic"`
		Partitions []partJSON `json:"partitions"`
	}{Topic: name}
	for _, p := range t.Partitions {
		v := c.partitionView(img, t, p, now)
		pj := partJSON{v.Index, v.Leader, v.Replicas, v.ISR, v.LogStartOffset, v.HighWatermark, v.Size, nil}
		if v.Rate.Known {
			r := v.Rate.PerSecond
			pj.MessagesPerSec = &r
		}
		out.Partitions = append(out.Partitions, pj)
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// topicForm is the create-topic form's fields, kept as typed for a redisplay.
type topicForm struct {
	Name, Partitions, ReplicationFactor, Configs string
}

type newTopicPage struct {
	base
	Form topicForm
}

func (c *Console) newTopicForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "newtopic", newTopicPage{base: c.base("Create topic", "topics"), Form: topicForm{Partitions: "1", ReplicationFactor: "-1"}})
}

// parse turns the form into a controller request.
func (f topicForm) parse() (controller.CreateTopic, error) {
	ct := controller.CreateTopic{Name: strings.TrimSpace(f.Name), Configs: map[string]string{}}
	if ct.Name == "" {
		return ct, fmt.Errorf("%w: the topic needs a name", errBadInput)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(f.Partitions), 10, 32)
	if err != nil || (n < 1 && n != -1) {
		return ct, fmt.Errorf("%w: partitions must be a positive number (or -1 for the default), not %q", errBadInput, f.Partitions)
	}
	ct.NumPartitions = int32(n)
	rf, err := strconv.ParseInt(strings.TrimSpace(f.ReplicationFactor), 10, 16)
	if err != nil || (rf < 1 && rf != -1) {
		return ct, fmt.Errorf("%w: replication factor must be a positive number (or -1 for the default), not %q", errBadInput, f.ReplicationFactor)
	}
	ct.ReplicationFactor = int16(rf)
	for i, line := range strings.Split(f.Configs, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return ct, fmt.Errorf("%w: config line %d is not key=value: %q", errBadInput, i+1, line)
		}
		ct.Configs[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return ct, nil
}

// createTopicsRequestTopic is the CreateTopics entry of a parsed form.
func createTopicsRequestTopic(ct controller.CreateTopic) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = ct.Name, ct.NumPartitions, ct.ReplicationFactor
	for _, k := range slices.Sorted(maps.Keys(ct.Configs)) {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(ct.Configs[k])
		t.Configs = append(t.Configs, cfg)
	}
	return t
}

// awaitTopic waits until this node's image holds the topic (created through
// the active controller, maybe on another node) and its partitions reflect it.
func (c *Console) awaitTopic(ctx context.Context, name string) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.cfg.Cluster.Image().Topic(name) == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return c.cfg.Replicas.WaitApplied(ctx, c.cfg.Cluster.Image().Offset())
}

// createTopic creates a topic through the node's path to the active controller
// (the one CreateTopics takes, so it works from any node), waits until this
// node's partitions reflect it, and redirects to its page.
func (c *Console) createTopic(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	form := topicForm{
		Name: r.PostForm.Get("name"), Partitions: r.PostForm.Get("partitions"),
		ReplicationFactor: r.PostForm.Get("replication_factor"), Configs: r.PostForm.Get("configs"),
	}
	fail := func(status int, err error) {
		pg := newTopicPage{base: c.base("Create topic", "topics"), Form: form}
		pg.Error = err.Error()
		c.render(w, status, "newtopic", pg)
	}
	ct, err := form.parse()
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	// The name authorized is the one created (trimmed), so that spaces
	// around it do not slip past a DENY on it.
	if d := httpauth.RequireCreateTopic(r, ct.Name); d != nil {
		fail(http.StatusForbidden, d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	results, err := controllerlink.CreateTopics(ctx, c.cfg.Controller, []kmsg.CreateTopicsRequestTopic{createTopicsRequestTopic(ct)})
	if err == nil {
		err = controllerlink.TopicError(results[0])
	}
	if err != nil {
		status := http.StatusConflict
		if errors.Is(err, kerr.NotController) || !errors.As(err, new(*kerr.Error)) {
			// No controller through an election longer than the retries,
			// or none reachable: worth trying again.
			status = http.StatusServiceUnavailable
		}
		fail(status, err)
		return
	}
	if err := c.awaitTopic(ctx, ct.Name); err != nil {
		c.log.Warn("console: waiting for the new topic's partitions", "topic", ct.Name, "err", err)
	}
	c.log.Info("console: created topic", "topic", ct.Name, "partitions", results[0].NumPartitions, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/console/topics/"+url.PathEscape(ct.Name)+"?created=1", http.StatusSeeOther)
}
