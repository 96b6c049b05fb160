package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// topicView is GET /topics/{topic}.
type topicView struct {
	Topic             string
	ID                string
	Internal          bool
	ReplicationFactor int `json:"replication_factor"`
	Configs           map[string]string
	Partitions        []struct {
		Partition      int32
		Leader         int32
		Replicas       []int32
		ISR            []int32
		LogStartOffset *int64 `json:"log_start_offset"`
		HighWatermark  *int64 `json:"high_watermark"`
	}
}

// TestTopics: create (with retention as a duration or a size and other configs),
// list, describe with offsets, delete.
func TestTopics(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	for _, tc := range []struct {
		body    map[string]any
		configs map[string]string
	}{
		{map[string]any{"topic": "t-week", "partitions": 3, "retention": "7d"}, map[string]string{"retention.ms": "604800000"}},
		{map[string]any{"topic": "t-size", "retention": "500MB", "replication_factor": 1}, map[string]string{"retention.bytes": "500000000"}},
		{map[string]any{"topic": "t-configs", "partitions": 2, "retention": "1GiB", "configs": map[string]string{"cleanup.policy": "compact"}},
			map[string]string{"retention.bytes": "1073741824", "cleanup.policy": "compact"}},
	} {
		var created struct {
			Topic             string
			Partitions        int32
			ReplicationFactor int16 `json:"replication_factor"`
			Configs           map[string]string
		}
		n.must(http.StatusCreated, "POST", "/topics", tc.body).json(t, &created)
		wantParts := int32(1) // the node's default
		if p, ok := tc.body["partitions"].(int); ok {
			wantParts = int32(p)
		}
		if created.Topic != tc.body["topic"] || created.Partitions != wantParts || created.ReplicationFactor != 1 {
			t.Fatalf("created %+v for %v", created, tc.body)
		}
		var tv topicView
		n.must(http.StatusOK, "GET", "/topics/"+created.Topic, nil).json(t, &tv)
		if len(tv.Partitions) != int(wantParts) || tv.ID == "" || tv.Internal || tv.ReplicationFactor != 1 {
			t.Fatalf("described %+v", tv)
		}
		for k, v := range tc.configs {
			if tv.Configs[k] != v || created.Configs[k] != v {
				t.Fatalf("%s: config %s=%q (created %q), want %q", created.Topic, k, tv.Configs[k], created.Configs[k], v)
			}
		}
	}

	n.produceN("t-week", 2, 0, 3)
	var tv topicView
	n.must(http.StatusOK, "GET", "/topics/t-week", nil).json(t, &tv)
	for _, p := range tv.Partitions {
		wantHWM := int64(0)
		if p.Partition == 2 {
			wantHWM = 3
		}
		if p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) ||
			p.LogStartOffset == nil || *p.LogStartOffset != 0 || p.HighWatermark == nil || *p.HighWatermark != wantHWM {
			t.Fatalf("partition %d: %+v, want leader 1, replicas and ISR [1], offsets 0..%d", p.Partition, p, wantHWM)
		}
	}

	var list struct {
		Topics []struct {
			Topic      string
			Partitions int
			Internal   bool
		}
	}
	n.must(http.StatusOK, "GET", "/topics", nil).json(t, &list)
	seen := map[string]bool{}
	for i, tp := range list.Topics {
		seen[tp.Topic] = true
		if i > 0 && list.Topics[i-1].Topic >= tp.Topic {
			t.Fatalf("topics not sorted: %+v", list.Topics)
		}
		if tp.Topic == "__consumer_offsets" && !tp.Internal {
			t.Fatalf("__consumer_offsets not marked internal")
		}
		if tp.Topic == "t-week" && tp.Partitions != 3 {
			t.Fatalf("t-week listed with %d partitions", tp.Partitions)
		}
	}
	if !seen["t-week"] || !seen["t-size"] || !seen["t-configs"] {
		t.Fatalf("created topics missing from %+v", list.Topics)
	}

	n.must(http.StatusOK, "DELETE", "/topics/t-size", nil)
	if r := n.do("GET", "/topics/t-size", nil); r.status != http.StatusNotFound || r.errorCode(t) != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Fatalf("deleted topic: %d %s", r.status, r.body)
	}
	if r := n.do("DELETE", "/topics/t-size", nil); r.status != http.StatusNotFound {
		t.Fatalf("deleting again: %d %s", r.status, r.body)
	}
	if r := n.do("POST", "/produce", map[string]any{"topic": "t-size", "value": 1}); r.status != http.StatusNotFound {
		t.Fatalf("producing to the deleted topic: %d %s", r.status, r.body)
	}
	// The name is free again.
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "t-size"})
}

// TestTopicErrors: bad topic requests get their status and code.
func TestTopicErrors(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("t-exists", 1)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"malformed JSON", `{"topic":`, 400, "MALFORMED_JSON"},
		{"no topic", `{"partitions":1}`, 400, "INVALID_REQUEST"},
		{"partitions of the wrong type", `{"topic":"x","partitions":"3"}`, 400, "INVALID_REQUEST"},
		{"zero partitions", `{"topic":"x","partitions":0}`, 400, "INVALID_REQUEST"},
		{"zero replication factor", `{"topic":"x","replication_factor":0}`, 400, "INVALID_REQUEST"},
		{"replication factor beyond int16", `{"topic":"x","replication_factor":40000}`, 400, "INVALID_REQUEST"},
		{"bad retention", `{"topic":"x","retention":"7 fortnights"}`, 400, "INVALID_RETENTION"},
		{"retention twice", `{"topic":"x","retention":"7d","configs":{"retention.ms":"1"}}`, 400, "INVALID_REQUEST"},
		{"config value not a string", `{"topic":"x","configs":{"retention.ms":1}}`, 400, "INVALID_REQUEST"},
		{"unknown config", `{"topic":"x","configs":{"no.such.config":"1"}}`, 400, "INVALID_CONFIG"},
		{"bad config value", `{"topic":"x","configs":{"cleanup.policy":"sometimes"}}`, 400, "INVALID_CONFIG"},
		{"invalid name", `{"topic":"bad/name"}`, 400, "INVALID_TOPIC_EXCEPTION"},
		{"more replicas than brokers", `{"topic":"x","replication_factor":3}`, 400, "INVALID_REPLICATION_FACTOR"},
		{"exists", `{"topic":"t-exists"}`, 409, "TOPIC_ALREADY_EXISTS"},
	} {
		r := n.do("POST", "/topics", tc.body)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := n.do("GET", "/topics/x", nil); r.status != http.StatusNotFound {
		t.Fatalf("a refused topic exists: %d %s", r.status, r.body)
	}
}

// TestGroups: the group list and a group's members, assignment, commits and lag.
func TestGroups(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("g-topic", 2)
	n.produceN("g-topic", 0, 0, 5)
	n.produceN("g-topic", 1, 0, 2)
	n.pollN(map[string]any{"group": "g-admin", "topic": "g-topic", "consumer": "a"}, 7)
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "g-admin", "consumer": "a"})
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "g-admin", "consumer": "a", "topic": "g-topic", "partition": 0, "offset": 2})

	var list struct {
		Groups []struct {
			Group, State string
			ProtocolType string `json:"protocol_type"`
		}
	}
	n.must(http.StatusOK, "GET", "/groups", nil).json(t, &list)
	i := slices.IndexFunc(list.Groups, func(g struct {
		Group, State string
		ProtocolType string `json:"protocol_type"`
	}) bool {
		return g.Group == "g-admin"
	})
	if i < 0 || list.Groups[i].State != "Stable" || list.Groups[i].ProtocolType != "consumer" {
		t.Fatalf("g-admin in the group list: %+v", list.Groups)
	}

	g := n.group("g-admin")
	if len(g.Members) != 1 || g.Members[0].ClientID != "strata-http/a@"+n.HTTPAddr() || len(g.Members[0].Assignment) != 1 ||
		!slices.Equal(g.Members[0].Assignment[0].Partitions, []int32{0, 1}) {
		t.Fatalf("members: %+v", g.Members)
	}
	if len(g.Offsets) != 2 || g.committed("g-topic", 0) != 2 || g.committed("g-topic", 1) != 2 {
		t.Fatalf("offsets: %+v", g.Offsets)
	}
	if *g.Offsets[0].Lag != 3 || *g.Offsets[1].Lag != 0 || g.Lag != 3 {
		t.Fatalf("lag: %+v, total %d, want 3 and 0", g.Offsets, g.Lag)
	}

	// Once the member leaves, the group is Empty and keeps its offsets.
	n.must(http.StatusOK, "DELETE", "/groups/g-admin/consumers/a", nil)
	g = n.group("g-admin")
	if g.State != "Empty" || len(g.Members) != 0 || g.committed("g-topic", 0) != 2 {
		t.Fatalf("after the member left: %+v", g)
	}
}

// TestTopicsInternalAsMetadata: GET /topics and GET /topics/{topic} mark the same
// topics internal as the Kafka listener's Metadata answer: __transaction_state too,
// not only __consumer_offsets.
func TestTopicsInternalAsMetadata(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("plain", 1)
	cl, adm := n.kafka(kgo.TransactionalID("internal-tx"), kgo.DefaultProduceTopic("plain"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A committed transaction creates __transaction_state.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var md kadm.TopicDetails
	wait.For(t, "__transaction_state in Metadata", func() bool {
		var err error
		md, err = adm.ListTopicsWithInternal(ctx)
		return err == nil && md.Has("__transaction_state")
	})

	var list struct {
		Topics []struct {
			Topic    string
			Internal bool
		}
	}
	n.must(http.StatusOK, "GET", "/topics", nil).json(t, &list)
	for _, tp := range list.Topics {
		d, ok := md[tp.Topic]
		if !ok {
			continue
		}
		if tp.Internal != d.IsInternal {
			t.Errorf("GET /topics: %s internal %v, Metadata says %v", tp.Topic, tp.Internal, d.IsInternal)
		}
		var tv topicView
		n.must(http.StatusOK, "GET", "/topics/"+tp.Topic, nil).json(t, &tv)
		if tv.Internal != d.IsInternal {
			t.Errorf("GET /topics/%s: internal %v, Metadata says %v", tp.Topic, tv.Internal, d.IsInternal)
		}
	}
}
