package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
)

// createTopicJSON is the body of POST /topics.
type createTopicJSON struct {
	Topic             string            `json:"topic"`
	Partitions        *int32            `json:"partitions"`
	ReplicationFactor *int16            `json:"replication_factor"`
	Retention         string            `json:"retention"`
	MinInsyncReplicas *int32            `json:"min_insync_replicas"`
	Configs           map[string]string `json:"configs"`
}

// createTopicCall is a validated topic creation; -1 means the broker's default.
type createTopicCall struct {
	topic             string
	partitions        int32
	replicationFactor int16
	configs           map[string]string
}

func parseCreateTopic(body []byte) (createTopicCall, *apiError) {
	var req createTopicJSON
	if err := decodeControl(body, &req); err != nil {
		return createTopicCall{}, err
	}
	if req.Topic == "" {
		return createTopicCall{}, invalid("topic is required")
	}
	call := createTopicCall{topic: req.Topic, partitions: -1, replicationFactor: -1, configs: map[string]string{}}
	if req.Partitions != nil {
		if *req.Partitions < 1 {
			return createTopicCall{}, invalid("partitions: must be at least 1")
		}
		call.partitions = *req.Partitions
	}
	if req.ReplicationFactor != nil {
		if *req.ReplicationFactor < 1 {
			return createTopicCall{}, invalid("replication_factor: must be at least 1")
		}
		call.replicationFactor = *req.ReplicationFactor
	}
	for k, v := range req.Configs {
		call.configs[k] = v
	}
	if req.MinInsyncReplicas != nil {
		if *req.MinInsyncReplicas < 1 {
			return createTopicCall{}, invalid("min_insync_replicas: must be at least 1")
		}
		if _, dup := call.configs[minInsyncReplicas]; dup {
			return createTopicCall{}, invalid("min_insync_replicas and configs both set %s", minInsyncReplicas)
		}
		call.configs[minInsyncReplicas] = strconv.Itoa(int(*req.MinInsyncReplicas))
	}
	if req.Retention != "" {
		key, value, err := parseRetention(req.Retention)
		if err != nil {
			return createTopicCall{}, err
		}
		if _, dup := call.configs[key]; dup {
			return createTopicCall{}, invalid("retention and configs both set %s", key)
		}
		call.configs[key] = value
	}
	return call, nil
}

const minInsyncReplicas = "min.insync.replicas"

type createdTopic struct {
	Topic             string            `json:"topic"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	MinInsyncReplicas int32             `json:"min_insync_replicas"`
	Warning           string            `json:"warning,omitempty"`
	Configs           map[string]string `json:"configs"`
}

// durabilityWarning says when a topic's min.insync.replicas lets an acks=all
// write be acknowledged by a single replica although it has three or more.
func durabilityWarning(rf int16, minISR int32) string {
	if rf < 3 || minISR >= 2 {
		return ""
	}
	return fmt.Sprintf("min.insync.replicas is %d: an acks=all write is acknowledged once %d replica has it, so losing that broker can lose it; "+
		"set min_insync_replicas to 2 to survive the loss of a broker", minISR, minISR)
}

// handleCreateTopic creates a topic through the Kafka listener (which forwards to
// the active controller) and answers once this node's image shows it with a
// leader for every partition, so the next request here can use it.
func (a *API) handleCreateTopic(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	call, aerr := parseCreateTopic(body)
	if aerr == nil {
		aerr = denied(httpauth.RequireCreateTopic(r, call.topic))
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	configs := make(map[string]*string, len(call.configs))
	for k, v := range call.configs {
		configs[k] = &v
	}
	res, err := a.admin.CreateTopic(r.Context(), call.partitions, call.replicationFactor, configs, call.topic)
	if err != nil {
		aerr := fromErr(err)
		if res.ErrMessage != "" {
			aerr.message = res.ErrMessage
		}
		writeError(w, aerr)
		return
	}
	a.awaitImage(r.Context(), func(img *metadata.Image) bool {
		t := img.Topic(call.topic)
		return t != nil && !slices.ContainsFunc(t.Partitions, func(p *metadata.Partition) bool { return p.Leader == metadata.NoLeader })
	})
	ans := createdTopic{Topic: call.topic, Partitions: res.NumPartitions, ReplicationFactor: res.ReplicationFactor, Configs: call.configs}
	if t := a.cfg.Cluster.Image().Topic(call.topic); t != nil {
		ans.MinInsyncReplicas = t.Config.MinInsyncReplicas
	} else {
		// Not visible here yet: what the request set, else the default.
		ans.MinInsyncReplicas = metadata.DefaultTopicConfig().MinInsyncReplicas
		if v, ok := call.configs[minInsyncReplicas]; ok {
			n, _ := strconv.Atoi(v)
			ans.MinInsyncReplicas = int32(n)
		}
	}
	ans.Warning = durabilityWarning(ans.ReplicationFactor, ans.MinInsyncReplicas)
	writeJSON(w, http.StatusCreated, ans)
}

// topic returns the topic from this node's image, waiting up to
// Config.TopicWait for one it does not have yet (with partitions); nil when it
// does not appear.
func (a *API) topic(ctx context.Context, name string) *metadata.Topic {
	has := func(img *metadata.Image) bool {
		t := img.Topic(name)
		return t != nil && len(t.Partitions) > 0
	}
	if img := a.cfg.Cluster.Image(); has(img) {
		return img.Topic(name)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.TopicWait)
	defer cancel()
	a.awaitImageUntil(ctx, has)
	return a.cfg.Cluster.Image().Topic(name)
}

// awaitImage waits, at most Config.WaitTimeout, until this node's metadata image
// satisfies ok. Topic changes reach every node's image shortly after the active
// controller commits them; answering after that keeps read-your-writes on one node.
func (a *API) awaitImage(ctx context.Context, ok func(*metadata.Image) bool) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.WaitTimeout)
	defer cancel()
	if !a.awaitImageUntil(ctx, ok) {
		a.log.Warn("metadata change not yet visible on this node", "err", ctx.Err())
	}
}

// awaitImageUntil waits until this node's image satisfies ok or ctx is done,
// and reports whether it does.
func (a *API) awaitImageUntil(ctx context.Context, ok func(*metadata.Image) bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !ok(a.cfg.Cluster.Image()) {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

type topicSummary struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

type topicList struct {
	Topics []topicSummary `json:"topics"`
}

func (a *API) handleListTopics(w http.ResponseWriter, r *http.Request) {
	ans := topicList{Topics: []topicSummary{}}
	for _, t := range a.cfg.Cluster.Image().Topics() {
		if !httpauth.Check(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
			continue
		}
		ans.Topics = append(ans.Topics, topicSummary{t.Name, len(t.Partitions), replicationFactor(t), handlers.IsInternalTopic(t.Name)})
	}
	slices.SortFunc(ans.Topics, func(a, b topicSummary) int { return strings.Compare(a.Topic, b.Topic) })
	writeJSON(w, http.StatusOK, ans)
}

func replicationFactor(t *metadata.Topic) int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

type topicOut struct {
	Topic             string            `json:"topic"`
	ID                string            `json:"id"`
	Internal          bool              `json:"internal"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
	Partitions        []partitionOut    `json:"partitions"`
}

// partitionOut is one partition; the offsets are null when its leader cannot
// answer.
type partitionOut struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset *int64  `json:"log_start_offset"`
	HighWatermark  *int64  `json:"high_watermark"`
}

// handleDescribeTopic shows a topic's partitions from this node's image, with
// the log start offsets and high-water marks their leaders report.
func (a *API) handleDescribeTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	t := a.topic(r.Context(), name)
	if t == nil {
		writeError(w, unknownTopic(name))
		return
	}
	starts, _ := a.admin.ListStartOffsets(r.Context(), name)
	ends, _ := a.admin.ListEndOffsets(r.Context(), name)
	ans := topicOut{
		Topic: t.Name, ID: t.ID.String(), Internal: handlers.IsInternalTopic(t.Name),
		ReplicationFactor: replicationFactor(t), Configs: map[string]string{},
		Partitions: make([]partitionOut, len(t.Partitions)),
	}
	for k, v := range t.Overrides {
		ans.Configs[k] = v
	}
	for i, p := range t.Partitions {
		ans.Partitions[i] = partitionOut{
			Partition: p.Index, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR),
			LogStartOffset: offsetOrNil(starts, name, p.Index),
			HighWatermark:  offsetOrNil(ends, name, p.Index),
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func offsetOrNil(l kadm.ListedOffsets, topic string, partition int32) *int64 {
	o, ok := l.Lookup(topic, partition)
	if !ok || o.Err != nil || o.Offset < 0 {
		return nil
	}
	return &o.Offset
}

type deletedTopic struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
}

func (a *API) handleDeleteTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if a.cfg.Cluster.Image().Topic(name) == nil {
		writeError(w, unknownTopic(name))
		return
	}
	res, err := a.admin.DeleteTopic(r.Context(), name)
	if err != nil {
		aerr := fromErr(err)
		if res.ErrMessage != "" {
			aerr.message = res.ErrMessage
		}
		writeError(w, aerr)
		return
	}
	a.awaitImage(r.Context(), func(img *metadata.Image) bool { return img.Topic(name) == nil })
	writeJSON(w, http.StatusOK, deletedTopic{name, true})
}
