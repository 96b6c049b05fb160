package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

type topicJSON struct {
	Topic      string `json:"topic"`
	Partitions []struct {
		Partition      int32    `json:"partition"`
		Leader         int32    `json:"leader"`
		LogStartOffset int64    `json:"logStartOffset"`
		HighWatermark  int64    `json:"highWatermark"`
		SizeBytes      int64    `json:"sizeBytes"`
		MessagesPerSec *float64 `json:"messagesPerSecond"`
	} `json:"partitions"`
}

func getTopicJSON(t *testing.T, base, topic string) topicJSON {
	t.Helper()
	status, body := get(t, base+"/console/api/topics/"+topic)
	if status != http.StatusOK {
		t.Fatalf("topic JSON: %d %s", status, body)
	}
	var out topicJSON
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPagesWithLiveNode loads every topic page of a node's own console after
// producing to it, and checks the figures against what was produced.
func TestPagesWithLiveNode(t *testing.T) {
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": ptr("3600000")}, "orders"); err != nil {
		t.Fatal(err)
	}
	perPartition := []int{7, 0, 12}
	for p, k := range perPartition {
		produce(t, cl, "orders", int32(p), "order", k)
	}
	binary := &kgo.Record{Topic: "orders", Partition: 2, Value: []byte{0, 1, 2, 0xff}}
	if err := cl.ProduceSync(ctx, binary).FirstErr(); err != nil {
		t.Fatal(err)
	}
	perPartition[2]++
	base := "http://" + n.HTTPAddr()

	if status, _ := get(t, base+"/"); status != http.StatusFound {
		t.Fatalf("GET / = %d, want a redirect to the console", status)
	}
	status, body := get(t, base+"/console/")
	if status != http.StatusOK {
		t.Fatalf("overview: %d", status)
	}
	mustContain(t, "overview", body, `id="active-controller">node 1<`, `id="topics-count">1<`,
		`id="partitions-count">3<`, `id="online-count">3<`, `id="offline-count">0<`, `data-broker="1"`, "this node", "live")

	_, body = get(t, base+"/console/topics")
	mustContain(t, "topics", body, `data-topic="orders"`, `<td class="num">20</td>`, "healthy")

	_, body = get(t, base+"/console/topics/orders")
	mustContain(t, "topic page", body, `data-partition="0"`, `data-partition="2"`, "retention.ms", "3600000")
	tj := getTopicJSON(t, base, "orders")
	if len(tj.Partitions) != 3 {
		t.Fatalf("JSON has %d partitions", len(tj.Partitions))
	}
	for _, p := range tj.Partitions {
		if p.HighWatermark != int64(perPartition[p.Partition]) || p.LogStartOffset != 0 || p.Leader != 1 {
			t.Fatalf("partition %d: %+v, want HWM %d", p.Partition, p, perPartition[p.Partition])
		}
		if (p.SizeBytes > 0) != (perPartition[p.Partition] > 0) {
			t.Fatalf("partition %d size %d", p.Partition, p.SizeBytes)
		}
	}

	status, body = get(t, base+"/console/topics/orders/records?partition=2&limit=3")
	if status != http.StatusOK {
		t.Fatalf("records: %d", status)
	}
	mustContain(t, "records", body, `data-offset="10"`, `data-offset="12"`, "order-10", "order-11", "000102ff", "console-test")
	if strings.Contains(body, `data-offset="9"`) {
		t.Fatal("records page shows more than the limit")
	}
	_, body = get(t, base+"/console/topics/orders/records?partition=1")
	mustContain(t, "empty partition", body, "No records below the high watermark")

	for _, bad := range []struct {
		path   string
		status int
	}{
		{"/console/topics/nope", http.StatusNotFound},
		{"/console/topics/nope/records", http.StatusNotFound},
		{"/console/topics/orders/records?partition=3", http.StatusBadRequest},
		{"/console/topics/orders/records?limit=0", http.StatusBadRequest},
		{"/console/no-such-page", http.StatusNotFound},
		{"/console/static/console.css", http.StatusOK},
		{"/console/static/console.js", http.StatusOK},
	} {
		if status, _ := get(t, base+bad.path); status != bad.status {
			t.Errorf("GET %s = %d, want %d", bad.path, status, bad.status)
		}
	}
	_, body = get(t, base+"/console/groups")
	mustContain(t, "groups before any consumer", body, "No consumer groups.")
}

// TestMessagesPerSecond: the rate is the high-water mark's rise between two
// samples at least a second apart, on a console with a controlled clock.
func TestMessagesPerSecond(t *testing.T) {
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "rates"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	cfg := n.ConsoleConfig()
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := httptest.NewServer(console.New(cfg).Handler())
	defer srv.Close()

	produce(t, cl, "rates", 0, "a", 4)
	if r := getTopicJSON(t, srv.URL, "rates").Partitions[0].MessagesPerSec; r != nil {
		t.Fatalf("rate %v after one sample", *r)
	}
	produce(t, cl, "rates", 0, "b", 10)
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	r := getTopicJSON(t, srv.URL, "rates").Partitions[0].MessagesPerSec
	if r == nil || *r != 5 {
		t.Fatalf("rate = %v, want 10 messages over 2s = 5/s", r)
	}
	_, body := get(t, srv.URL+"/console/topics")
	mustContain(t, "topics list", body, "<td class=\"num\">5.0</td>")
}

// TestCreateTopicForm posts the create-topic form and checks the topic through
// the Kafka API.
func TestCreateTopicForm(t *testing.T) {
	n := startNode(t)
	_, adm := client(t, n)
	base := "http://" + n.HTTPAddr()
	_, body := get(t, base+"/console/new-topic")
	mustContain(t, "form", body, `name="name"`, `name="partitions"`, `name="configs"`)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values, header http.Header) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/console/topics", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			sb.Write(buf[:k])
			if err != nil {
				break
			}
		}
		return resp, sb.String()
	}
	form := url.Values{"name": {"made-here"}, "partitions": {"2"}, "replication_factor": {"1"}, "configs": {"retention.ms=1000\ncleanup.policy=delete"}}
	resp, _ := post(form, http.Header{"Origin": {base}, "Sec-Fetch-Site": {"same-origin"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/topics/made-here?created=1" {
		t.Fatalf("create: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = get(t, base+"/console/topics/made-here?created=1")
	mustContain(t, "new topic page", body, "Topic made-here created.", `data-partition="1"`)
	details, err := adm.ListTopics(context.Background(), "made-here")
	if err != nil {
		t.Fatal(err)
	}
	if d := details["made-here"]; d.Err != nil || len(d.Partitions) != 2 {
		t.Fatalf("topic as the Kafka API sees it: %+v", d)
	}
	rc, err := adm.DescribeTopicConfigs(context.Background(), "made-here")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On("made-here", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cfg.Configs {
		if c.Key == "retention.ms" && c.Value != nil && *c.Value == "1000" {
			found = true
		}
	}
	if !found {
		t.Fatalf("retention.ms override missing: %+v", cfg.Configs)
	}

	tests := []struct {
		name   string
		form   url.Values
		header http.Header
		status int
		want   string
	}{
		{"duplicate", form, nil, http.StatusConflict, "already exists"},
		{"bad partitions", url.Values{"name": {"x"}, "partitions": {"zero"}, "replication_factor": {"1"}}, nil, http.StatusBadRequest, "partitions must be"},
		{"invalid name", url.Values{"name": {"bad name!"}, "partitions": {"1"}, "replication_factor": {"1"}}, nil, http.StatusConflict, "bad name!"},
		{"cross-site post", url.Values{"name": {"evil"}, "partitions": {"1"}, "replication_factor": {"1"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(tt.form, tt.header)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("status %d, want %d with %q:\n%s", resp.StatusCode, tt.status, tt.want, body)
			}
		})
	}
	if d, _ := adm.ListTopics(context.Background(), "evil"); d["evil"].Err == nil {
		t.Fatal("the cross-site post created a topic")
	}
}

func ptr(s string) *string { return &s }

type lagJSON struct {
	Total      int64          `json:"total"`
	Partitions []partitionLag `json:"partitions"`
}

// getLag reads a group's lag JSON from the console at base.
func getLag(t *testing.T, base, group string) (lagJSON, error) {
	t.Helper()
	var l lagJSON
	status, body := get(t, base+"/console/api/groups/"+group+"/lag")
	if status != http.StatusOK {
		return l, fmt.Errorf("lag JSON of %s: %d %s", group, status, body)
	}
	return l, json.Unmarshal([]byte(body), &l)
}

type partitionLag struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"highWatermark"`
	Lag           int64  `json:"lag"`
}

// TestGroupPages: a group's lag as pages and JSON show it, and resets through the
// form (to an offset, clamped into the log, and bad input refused).
func TestGroupPages(t *testing.T) {
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "events", 0, "a", 12)
	produce(t, cl, "events", 1, "b", 3)
	if err := adm.CommitAllOffsets(ctx, "billing", offsetsOf("events", map[int32]int64{0: 2, 1: 3})); err != nil {
		t.Fatal(err)
	}
	base := "http://" + n.HTTPAddr()
	lag := func() lagJSON {
		t.Helper()
		l, err := getLag(t, base, "billing")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := lag(); l.Total != 10 || len(l.Partitions) != 2 || l.Partitions[0].Lag != 10 || l.Partitions[1].Lag != 0 {
		t.Fatalf("lag %+v, want 10 on partition 0 and 0 on partition 1", l)
	}
	_, body := get(t, base+"/console/groups")
	mustContain(t, "groups", body, `data-group="billing"`, `<td class="num" data-field="lag">10`, "Empty")
	_, body = get(t, base+"/console/groups/billing")
	mustContain(t, "group page", body, `id="total-lag">10<`, "No members: the group is empty.", `<option selected>events</option>`)
	for path, want := range map[string]int{
		"/console/groups/nope":                 http.StatusNotFound,
		"/console/api/groups/nope/lag":         http.StatusNotFound,
		"/console/api/topics/nope":             http.StatusNotFound,
		"/console/groups/billing?reset=x&to=y": http.StatusOK,
	} {
		if status, _ := get(t, base+path); status != want {
			t.Errorf("GET %s = %d, want %d", path, status, want)
		}
	}

	reset := func(form url.Values) (int, string) {
		t.Helper()
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(base+"/console/groups/billing/offsets", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name      string
		form      url.Values
		status    int
		want      string
		committed []int64
	}{
		{"to an offset", url.Values{"topic": {"events"}, "to": {"offset"}, "offset": {"5"}}, http.StatusSeeOther, "", []int64{5, 3}},
		{"clamped to the high watermark", url.Values{"topic": {"events"}, "to": {"offset"}, "offset": {"1000"}}, http.StatusSeeOther, "", []int64{12, 3}},
		{"earliest", url.Values{"topic": {"events"}, "to": {"earliest"}}, http.StatusSeeOther, "", []int64{0, 0}},
		{"not a number", url.Values{"topic": {"events"}, "to": {"offset"}, "offset": {"five"}}, http.StatusBadRequest, "must be a number", []int64{0, 0}},
		{"unknown topic", url.Values{"topic": {"nope"}, "to": {"latest"}}, http.StatusBadRequest, "no topic", []int64{0, 0}},
		{"unknown mode", url.Values{"topic": {"events"}, "to": {"sideways"}}, http.StatusBadRequest, "earliest, latest or an offset", []int64{0, 0}},
		{"latest", url.Values{"topic": {"events"}, "to": {"latest"}}, http.StatusSeeOther, "", []int64{12, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := reset(tt.form)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("reset: %d, want %d with %q:\n%s", status, tt.status, tt.want, body)
			}
			l := lag()
			for i, want := range tt.committed {
				if got := l.Partitions[i].Committed; got != want {
					t.Fatalf("partition %d committed %d, want %d", i, got, want)
				}
			}
		})
	}
}

// imageConsole is a console over an image of topics (each partition led by
// leaders[i], NoLeader for none; broker 1 registered and live) that hosts no
// partition.
func imageConsole(t *testing.T, topic string, leaders ...int32) *console.Console {
	t.Helper()
	id := metadata.UUID{7}
	recs := []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: topic, ID: id},
	}
	for i, l := range leaders {
		isr := []int32{1}
		if l == metadata.NoLeader {
			isr = nil
		}
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(i), Replicas: []int32{1}, ISR: isr, Leader: l})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &changingController{}
	ctrl.img.Store(img.WithOffset(1))
	return console.New(console.Config{NodeID: 2, Cluster: ctrl, Replicas: appliedReplicas{}, Logger: testLogger()})
}

func serve(c *console.Console, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// TestTopicNamedNew: "new" is a topic name like any other; its page is its
// own, not the create-topic form, which lived at /console/topics/new.
func TestTopicNamedNew(t *testing.T) {
	c := imageConsole(t, "new", 1)
	rec := serve(c, "/console/topics")
	mustContain(t, "topics list", rec.Body.String(), `href="/console/topics/new"`)
	rec = serve(c, "/console/topics/new")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<span id="topic-name">new</span>`) {
		t.Fatalf("the page of topic new: %d:\n%s", rec.Code, rec.Body)
	}
}

// TestRecordsOfPartitionLedElsewhere: the records page of a partition this node
// does not lead names its leader, or says it has none (it said "led by node
// -1").
func TestRecordsOfPartitionLedElsewhere(t *testing.T) {
	c := imageConsole(t, "orders", metadata.NoLeader, 1)
	for _, tt := range []struct {
		partition, want string
	}{
		{"0", "Partition 0 has no leader"},
		{"1", "Partition 1 is led by node 1"},
	} {
		rec := serve(c, "/console/topics/orders/records?partition="+tt.partition)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, tt.want) || strings.Contains(body, "node -1") {
			t.Errorf("partition %s: %d, want a page saying %q:\n%s", tt.partition, rec.Code, tt.want, body)
		}
	}
}

// hidingReplicas hosts the partitions of Replicas but those hidden: they are
// led elsewhere, as on one node of a cluster.
type hidingReplicas struct {
	console.Replicas
	hidden int32
}

func (h hidingReplicas) Partition(topic string, index int32) (*replica.Partition, error) {
	if index == h.hidden {
		return nil, replica.ErrUnknownPartition
	}
	return h.Replicas.Partition(topic, index)
}

// TestTopicTotalsOfPartitionsLedHere: where this node leads some of a topic's
// partitions only, the topic's messages and size say how many they cover; they
// showed as the topic's.
func TestTopicTotalsOfPartitionsLedHere(t *testing.T) {
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "orders", 0, "a", 3)
	produce(t, cl, "orders", 1, "b", 4)
	cfg := n.ConsoleConfig()
	cfg.Replicas = hidingReplicas{Replicas: cfg.Replicas, hidden: 1}
	c := console.New(cfg)
	mustContain(t, "topics list", serve(c, "/console/topics").Body.String(), `<td class="num">3 <span class="hint">(1 of 2 partitions)</span></td>`)
	mustContain(t, "topic page", serve(c, "/console/topics/orders").Body.String(), `id="topic-messages">3 <span class="hint">(1 of 2 partitions)</span>`)
	mustContain(t, "whole topic", serve(console.New(n.ConsoleConfig()), "/console/topics").Body.String(), `<td class="num">7</td>`)
}
