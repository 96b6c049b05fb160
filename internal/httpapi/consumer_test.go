package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/wait"
)

// polledRecord is a record of a poll answer.
type polledRecord struct {
	Partition int32
	Offset    int64
	Key       *string
	Value     any
	Timestamp int64
}

// poll polls once with body (a map of poll fields) and returns the records.
func (n *testNode) poll(body map[string]any) []polledRecord {
	n.t.Helper()
	var ans struct{ Records []polledRecord }
	n.must(http.StatusOK, "POST", "/poll", body).json(n.t, &ans)
	return ans.Records
}

// pollN polls until it has want records (each poll long-polling).
func (n *testNode) pollN(body map[string]any, want int) []polledRecord {
	n.t.Helper()
	b := map[string]any{"timeout_ms": 5000}
	for k, v := range body {
		b[k] = v
	}
	var out []polledRecord
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want {
		if time.Now().After(deadline) {
			n.t.Fatalf("polled %d of %d records", len(out), want)
		}
		out = append(out, n.poll(b)...)
	}
	if len(out) != want {
		n.t.Fatalf("polled %d records, want %d", len(out), want)
	}
	return out
}

// produceN produces values 0..count-1 to one partition.
func (n *testNode) produceN(topic string, partition, from, count int) {
	n.t.Helper()
	for i := from; i < from+count; i++ {
		n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": topic, "partition": partition, "value": i})
	}
}

func offsetsOf(recs []polledRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func wantOffsets(t testing.TB, what string, recs []polledRecord, from, to int64) {
	t.Helper()
	got := offsetsOf(recs)
	if int64(len(got)) != to-from {
		t.Fatalf("%s: offsets %v, want %d..%d", what, got, from, to-1)
	}
	for i, o := range got {
		if o != from+int64(i) {
			t.Fatalf("%s: offsets %v, want %d..%d", what, got, from, to-1)
		}
	}
}

// groupView is GET /groups/{group}.
type groupView struct {
	State   string
	Members []struct {
		MemberID   string `json:"member_id"`
		ClientID   string `json:"client_id"`
		Assignment []struct {
			Topic      string
			Partitions []int32
		}
	}
	Offsets []struct {
		Topic     string
		Partition int32
		Committed *int64
		Lag       *int64
	}
	Lag int64
}

func (n *testNode) group(id string) groupView {
	n.t.Helper()
	var g groupView
	n.must(http.StatusOK, "GET", "/groups/"+id, nil).json(n.t, &g)
	return g
}

// committed is the group's committed offset of a partition, -1 for none.
func (g groupView) committed(topic string, partition int32) int64 {
	for _, o := range g.Offsets {
		if o.Topic == topic && o.Partition == partition && o.Committed != nil {
			return *o.Committed
		}
	}
	return -1
}

// TestPollPositionsAndCommit: polls advance the member's position independently
// of commits; a commit of the positions is where a new member starts; the lag
// follows.
func TestPollPositionsAndCommit(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("positions", 1)
	n.produceN("positions", 0, 0, 10)
	g := map[string]any{"group": "positions", "topic": "positions", "max_records": 3}
	wantOffsets(t, "first poll", n.pollN(g, 3), 0, 3)
	wantOffsets(t, "second poll, nothing committed", n.pollN(g, 3), 3, 6)
	if c := n.group("positions").committed("positions", 0); c != -1 {
		t.Fatalf("polling committed %d", c)
	}

	var commit struct {
		Committed bool
		Offsets   []struct {
			Topic     string
			Partition int32
			Offset    int64
		}
	}
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "positions"}).json(t, &commit)
	if !commit.Committed || len(commit.Offsets) != 1 || commit.Offsets[0].Offset != 6 {
		t.Fatalf("commit of the positions: %+v, want offset 6", commit)
	}
	gv := n.group("positions")
	if c := gv.committed("positions", 0); c != 6 || gv.Lag != 4 || gv.State != "Stable" || len(gv.Members) != 1 {
		t.Fatalf("after the commit: %+v", gv)
	}
	if id := gv.Members[0].ClientID; id != "strata-http/default@"+n.HTTPAddr() {
		t.Fatalf("member client id %q", id)
	}

	// A new member of the group starts at the commit, not at the old member's
	// position.
	n.must(http.StatusOK, "DELETE", "/groups/positions/consumers/default", nil)
	wantOffsets(t, "new member", n.pollN(map[string]any{"group": "positions", "topic": "positions", "consumer": "second"}, 4), 6, 10)
	n.must(http.StatusOK, "DELETE", "/groups/positions/consumers/second", nil)
	n.must(http.StatusNotFound, "DELETE", "/groups/positions/consumers/second", nil)
}

// TestUnreadPollIsPolledAgain: a poll whose client goes away without reading
// the answer delivers nothing. The consumer's position goes back to the
// answer's first record, so a commit without partition does not pass it and the
// next poll returns it again. The answer (one 8 MiB record) is larger than the
// connection's buffers and the client resets the connection once the status line
// has come, so the node is still writing the answer when the reset arrives.
func TestUnreadPollIsPolledAgain(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	const topic = "unread"
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": topic, "partitions": 1,
		"configs": map[string]string{"max.message.bytes": strconv.Itoa(16 << 20)}})
	cl, _ := n.kafka(kgo.ProducerBatchMaxBytes(16 << 20))
	big := []byte(`"` + strings.Repeat("u", 8<<20) + `"`)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: big}, &kgo.Record{Topic: topic, Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", n.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	tcp := conn.(*net.TCPConn)
	if err := tcp.SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	body := `{"group":"unread","topic":"unread","max_records":1}`
	fmt.Fprintf(conn, "POST /poll HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n.HTTPAddr(), len(body), body)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("poll answer: %q, %v", status, err)
	}
	tcp.SetLinger(0) // close with a reset: the answer was not read
	conn.Close()

	var commit struct{ Offsets []struct{ Offset int64 } }
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "unread"}).json(t, &commit)
	for _, o := range commit.Offsets {
		if o.Offset > 0 {
			t.Fatalf("the commit after the unread answer committed offset %d, past its record at offset 0", o.Offset)
		}
	}
	wantOffsets(t, "poll after the unread answer", n.pollN(map[string]any{"group": "unread", "topic": topic, "max_records": 1}, 1), 0, 1)
}

// TestStalledPollReaderIsCutOff: a client that stops reading a poll's answer
// without closing its connection holds the consumer no longer than the write
// timeout. The answer (one 8 MiB record) is larger than the connection's
// buffers; once --http-write-timeout passes, the node closes the connection,
// the poll counts as undelivered and the next poll, from another connection,
// gets the record again. A long poll that waits longer than the timeout on a
// kept-alive connection is still answered: only writing counts.
func TestStalledPollReaderIsCutOff(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *config.Config) { c.HTTPWriteTimeout = 2 * time.Second })
	const topic = "stalled"
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": topic, "partitions": 1,
		"configs": map[string]string{"max.message.bytes": strconv.Itoa(16 << 20)}})
	cl, _ := n.kafka(kgo.ProducerBatchMaxBytes(16 << 20))
	big := []byte(`"` + strings.Repeat("s", 8<<20) + `"`)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: big}, &kgo.Record{Topic: topic, Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", n.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	body := `{"group":"stalled","topic":"stalled","max_records":1}`
	fmt.Fprintf(conn, "POST /poll HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n.HTTPAddr(), len(body), body)
	// The status line says the node is writing the answer; then the client
	// stops reading and keeps the connection open.
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("poll answer: %q, %v", status, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", n.base+"/poll", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the poll after the stalled answer: %v", err)
	}
	var ans struct{ Records []polledRecord }
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the poll after the stalled answer: status %d, %v", resp.StatusCode, err)
	}
	wantOffsets(t, "poll after the stalled answer", ans.Records, 0, 1)

	// The next record, then an empty long poll that outlasts the write timeout.
	wantOffsets(t, "next poll", n.pollN(map[string]any{"group": "stalled", "topic": topic, "max_records": 1}, 1), 1, 2)
	if recs := n.poll(map[string]any{"group": "stalled", "topic": topic, "timeout_ms": 3000}); len(recs) != 0 {
		t.Fatalf("empty long poll returned %v", offsetsOf(recs))
	}
}

// TestPollReset: a group without commits starts at the log start, or at the
// high-water mark with "reset":"latest".
func TestPollReset(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("reset", 1)
	n.produceN("reset", 0, 0, 3)
	wantOffsets(t, "earliest", n.pollN(map[string]any{"group": "reset-earliest", "topic": "reset"}, 3), 0, 3)

	latest := map[string]any{"group": "reset-latest", "topic": "reset", "reset": "latest", "timeout_ms": 300}
	// The member joins and is assigned the partition at the high-water mark; wait
	// for it before producing, or the new record would be before its position.
	n.poll(latest)
	wait.For(t, "the member owns the partition", func() bool {
		g := n.group("reset-latest")
		return g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Assignment) == 1
	})
	if recs := n.poll(latest); len(recs) != 0 {
		t.Fatalf("reset latest returned old records %v", offsetsOf(recs))
	}
	n.produceN("reset", 0, 3, 1)
	wantOffsets(t, "latest", n.pollN(latest, 1), 3, 4)
}

// TestLongPoll: a poll with timeout_ms waits for the first record and returns as
// soon as it comes; without records it returns empty after the timeout.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	n := startNode(t) // its own node: the test waits on the node's count of polls in flight
	n.createTopic("longpoll", 1)
	body := map[string]any{"group": "longpoll", "topic": "longpoll", "timeout_ms": 400}
	start := time.Now()
	if recs := n.poll(body); len(recs) != 0 {
		t.Fatalf("empty topic polled %v", recs)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("empty poll returned after %v, before its timeout", d)
	}
	wait.For(t, "the member owns the partition", func() bool {
		g := n.group("longpoll")
		return g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Assignment) == 1
	})

	type result struct {
		recs []polledRecord
		took time.Duration
	}
	done := make(chan result, 1)
	waiter := &testNode{Node: n.Node, t: t, base: n.base}
	go func() {
		start := time.Now()
		var ans struct{ Records []polledRecord }
		r := waiter.do("POST", "/poll", map[string]any{"group": "longpoll", "topic": "longpoll", "timeout_ms": 20000})
		if r.status == http.StatusOK {
			r.json(t, &ans)
		}
		done <- result{ans.Records, time.Since(start)}
	}()
	n.waitInFlight("POST /poll", 1)
	n.produceN("longpoll", 0, 0, 1)
	res := <-done
	if len(res.recs) != 1 || res.took > 15*time.Second {
		t.Fatalf("long poll returned %v after %v", res.recs, res.took)
	}
}

// TestCommitExplicit: committing one offset works without a consumer instance
// while the group has no members, and through the instance while it is a member;
// a group whose members are Kafka clients takes commits only from them.
func TestCommitExplicit(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("explicit", 2)
	n.produceN("explicit", 1, 0, 5)
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "explicit", "topic": "explicit", "partition": 1, "offset": 3})
	if c := n.group("explicit").committed("explicit", 1); c != 3 {
		t.Fatalf("committed %d, want 3", c)
	}
	wantOffsets(t, "member starts at the commit", n.pollN(map[string]any{"group": "explicit", "topic": "explicit"}, 2), 3, 5)
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "explicit", "topic": "explicit", "partition": 1, "offset": 1})
	if c := n.group("explicit").committed("explicit", 1); c != 1 {
		t.Fatalf("member's commit: committed %d, want 1", c)
	}
	// The position did not move with the commit.
	n.produceN("explicit", 1, 5, 1)
	wantOffsets(t, "position independent of commits", n.pollN(map[string]any{"group": "explicit", "topic": "explicit"}, 1), 5, 6)

	// A group of Kafka clients only.
	cl, _ := n.kafka(kgo.ConsumerGroup("kafka-only"), kgo.ConsumeTopics("explicit"), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	cl.PollFetches(ctx)
	cancel()
	wait.For(t, "the Kafka member joins", func() bool { return n.group("kafka-only").State == "Stable" })
	r := n.do("POST", "/commit", map[string]any{"group": "kafka-only", "topic": "explicit", "partition": 0, "offset": 0})
	if r.status != http.StatusConflict || r.errorCode(t) != "UNKNOWN_MEMBER_ID" {
		t.Fatalf("commit to a group of Kafka members: %d %s", r.status, r.body)
	}
}

// TestSeek: every target, one partition or all, moves the HTTP member's position
// and commits.
func TestSeek(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("seek", 2)
	for p := range 2 {
		for i := range 4 {
			n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "seek", "partition": p, "value": i, "timestamp": 1000 * (i + 1)})
		}
	}
	g := map[string]any{"group": "seek", "topic": "seek"}
	n.pollN(g, 8)

	type seekAns struct {
		Committed bool
		Offsets   []struct {
			Partition int32
			Offset    int64
		}
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		want  map[int32]int64 // partition -> offset
		polls int             // records the next poll returns
	}{
		{"earliest, all partitions", map[string]any{"to": "earliest"}, map[int32]int64{0: 0, 1: 0}, 8},
		{"latest, partition 1", map[string]any{"to": "latest", "partition": 1}, map[int32]int64{1: 4}, 0},
		{"offset, partition 0", map[string]any{"offset": 2, "partition": 0}, map[int32]int64{0: 2}, 2},
		{"offset past the end is clamped", map[string]any{"offset": 100, "partition": 0}, map[int32]int64{0: 4}, 0},
		{"timestamp", map[string]any{"timestamp": 2500}, map[int32]int64{0: 2, 1: 2}, 4},
		{"timestamp after every record", map[string]any{"timestamp": 1 << 50}, map[int32]int64{0: 4, 1: 4}, 0},
	} {
		body := map[string]any{"topic": "seek"}
		for k, v := range tc.body {
			body[k] = v
		}
		var ans seekAns
		n.must(http.StatusOK, "POST", "/groups/seek/seek", body).json(t, &ans)
		if !ans.Committed || len(ans.Offsets) != len(tc.want) {
			t.Fatalf("%s: %+v", tc.name, ans)
		}
		gv := n.group("seek")
		for _, o := range ans.Offsets {
			if tc.want[o.Partition] != o.Offset {
				t.Fatalf("%s: sought %+v, want %v", tc.name, ans.Offsets, tc.want)
			}
			if c := gv.committed("seek", o.Partition); c != o.Offset {
				t.Fatalf("%s: committed %d for partition %d, want %d", tc.name, c, o.Partition, o.Offset)
			}
		}
		if tc.polls > 0 {
			recs := n.pollN(g, tc.polls)
			for _, r := range recs {
				if want, ok := tc.want[r.Partition]; ok && r.Offset < want {
					t.Fatalf("%s: polled offset %d of partition %d, before the seek's %d", tc.name, r.Offset, r.Partition, want)
				}
			}
		} else if recs := n.poll(map[string]any{"group": "seek", "topic": "seek", "timeout_ms": 300}); len(recs) != 0 {
			t.Fatalf("%s: polled %v", tc.name, recs)
		}
	}

	// A group without members here is moved by its committed offsets alone.
	n.must(http.StatusOK, "POST", "/groups/seek-fresh/seek", map[string]any{"topic": "seek", "offset": 3})
	wantOffsets(t, "fresh group after seek", n.pollN(map[string]any{"group": "seek-fresh", "topic": "seek", "max_records": 1}, 1), 3, 4)
}

// TestConsumerErrors: bad polls, commits, seeks and consumer closes.
func TestConsumerErrors(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("cerrs", 1)
	n.createTopic("cerrs-other", 1)
	n.poll(map[string]any{"group": "cerrs", "topic": "cerrs"})
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"poll: no group", "POST", "/poll", `{"topic":"cerrs"}`, 400, "INVALID_REQUEST"},
		{"poll: no topic", "GET", "/poll?group=cerrs", nil, 400, "INVALID_REQUEST"},
		{"poll: malformed JSON", "POST", "/poll", `{"group":`, 400, "MALFORMED_JSON"},
		{"poll: unknown field", "POST", "/poll", `{"group":"g","topic":"cerrs","max":1}`, 400, "INVALID_REQUEST"},
		{"poll: max_records 0", "POST", "/poll", `{"group":"g","topic":"cerrs","max_records":0}`, 400, "INVALID_REQUEST"},
		{"poll: max_records as a string", "POST", "/poll", `{"group":"g","topic":"cerrs","max_records":"5"}`, 400, "INVALID_REQUEST"},
		{"poll: negative timeout", "GET", "/poll?group=g&topic=cerrs&timeout_ms=-1", nil, 400, "INVALID_REQUEST"},
		{"poll: timeout too long", "GET", "/poll?group=g&topic=cerrs&timeout_ms=300001", nil, 400, "INVALID_REQUEST"},
		{"poll: timeout of the largest int64", "POST", "/poll", `{"group":"g","topic":"cerrs","timeout_ms":9223372036854775807}`, 400, "INVALID_REQUEST"},
		{"poll: session timeout of the largest int64", "POST", "/poll", `{"group":"g","topic":"cerrs","session_timeout_ms":9223372036854775807}`, 400, "INVALID_REQUEST"},
		{"poll: non-integer query", "GET", "/poll?group=g&topic=cerrs&max_records=ten", nil, 400, "INVALID_REQUEST"},
		{"poll: unknown query parameter", "GET", "/poll?group=g&topic=cerrs&offset=3", nil, 400, "INVALID_REQUEST"},
		{"poll: repeated query parameter", "GET", "/poll?group=g&topic=cerrs&topic=x", nil, 400, "INVALID_REQUEST"},
		{"poll: bad reset", "POST", "/poll", `{"group":"g","topic":"cerrs","reset":"middle"}`, 400, "INVALID_REQUEST"},
		{"poll: unknown topic", "GET", "/poll?group=g&topic=nope", nil, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"poll: member of another topic", "POST", "/poll", `{"group":"cerrs","topic":"cerrs-other"}`, 409, "CONSUMER_TOPIC_MISMATCH"},
		{"poll: another isolation than the member's", "GET", "/poll?group=cerrs&topic=cerrs&isolation=read_uncommitted", nil, 409, "CONSUMER_OPTIONS_MISMATCH"},
		{"poll: another reset than the member's", "POST", "/poll", `{"group":"cerrs","topic":"cerrs","reset":"latest"}`, 409, "CONSUMER_OPTIONS_MISMATCH"},
		{"poll: another session timeout than the member's", "POST", "/poll", `{"group":"cerrs","topic":"cerrs","session_timeout_ms":10000}`, 409, "CONSUMER_OPTIONS_MISMATCH"},
		{"poll: session timeout below the broker's minimum", "POST", "/poll", `{"group":"cerrs-st","topic":"cerrs","session_timeout_ms":1000,"timeout_ms":5000}`, 400, "INVALID_SESSION_TIMEOUT"},
		{"poll: session timeout the broker refuses, for a member that has another", "POST", "/poll", `{"group":"cerrs","topic":"cerrs","session_timeout_ms":1000}`, 409, "CONSUMER_OPTIONS_MISMATCH"},
		{"commit: no group", "POST", "/commit", `{"topic":"cerrs","partition":0,"offset":1}`, 400, "INVALID_REQUEST"},
		{"commit: offset without partition", "POST", "/commit", `{"group":"cerrs","offset":1}`, 400, "INVALID_REQUEST"},
		{"commit: partition without offset", "POST", "/commit", `{"group":"cerrs","topic":"cerrs","partition":0}`, 400, "INVALID_REQUEST"},
		{"commit: partition without topic", "POST", "/commit", `{"group":"cerrs","partition":0,"offset":1}`, 400, "INVALID_REQUEST"},
		{"commit: negative offset", "POST", "/commit", `{"group":"cerrs","topic":"cerrs","partition":0,"offset":-2}`, 400, "INVALID_REQUEST"},
		{"commit: unknown topic", "POST", "/commit", `{"group":"cerrs","topic":"nope","partition":0,"offset":1}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"commit: unknown partition", "POST", "/commit", `{"group":"cerrs","topic":"cerrs","partition":7,"offset":1}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"commit: positions of no consumer", "POST", "/commit", `{"group":"cerrs","consumer":"nobody"}`, 404, "UNKNOWN_CONSUMER"},
		{"commit: positions of another topic", "POST", "/commit", `{"group":"cerrs","topic":"cerrs-other"}`, 409, "CONSUMER_TOPIC_MISMATCH"},
		{"seek: no target", "POST", "/groups/cerrs/seek", `{"topic":"cerrs"}`, 400, "INVALID_REQUEST"},
		{"seek: two targets", "POST", "/groups/cerrs/seek", `{"topic":"cerrs","to":"earliest","offset":1}`, 400, "INVALID_REQUEST"},
		{"seek: bad to", "POST", "/groups/cerrs/seek", `{"topic":"cerrs","to":"start"}`, 400, "INVALID_REQUEST"},
		{"seek: negative offset", "POST", "/groups/cerrs/seek", `{"topic":"cerrs","offset":-1}`, 400, "INVALID_REQUEST"},
		{"seek: no topic", "POST", "/groups/cerrs/seek", `{"to":"latest"}`, 400, "INVALID_REQUEST"},
		{"seek: unknown topic", "POST", "/groups/cerrs/seek", `{"topic":"nope","to":"latest"}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"seek: unknown partition", "POST", "/groups/cerrs/seek", `{"topic":"cerrs","partition":3,"to":"latest"}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"close: unknown consumer", "DELETE", "/groups/cerrs/consumers/nobody", nil, 404, "UNKNOWN_CONSUMER"},
		{"describe: unknown group", "GET", "/groups/never-seen", nil, 404, "GROUP_ID_NOT_FOUND"},
	} {
		r := n.do(tc.method, tc.path, tc.body)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	// A commit naming a consumer the group does not have says so, not that the
	// group's members are not this node's HTTP consumers (its one member is).
	r := n.must(http.StatusConflict, "POST", "/commit", `{"group":"cerrs","consumer":"nobody","topic":"cerrs","partition":0,"offset":1}`)
	if msg := string(r.body); !strings.Contains(msg, `consumer \"nobody\" is not one of them`) || strings.Contains(msg, "not HTTP consumers") {
		t.Errorf("commit as a consumer that is not a member: %s", msg)
	}
	// Options the member has, said again, are no conflict.
	n.poll(map[string]any{"group": "cerrs", "topic": "cerrs", "reset": "earliest", "isolation": "read_committed", "timeout_ms": 0})
	// The refused member was dropped: a corrected poll creates a new one.
	n.poll(map[string]any{"group": "cerrs-st", "topic": "cerrs", "session_timeout_ms": 6000})
}

// TestSessionTimeoutRefused: the group coordinator refuses a member whose
// session timeout is outside its bounds (group.min.session.timeout.ms, 6 s); the
// poll that learns of it answers 400 INVALID_SESSION_TIMEOUT and drops the
// member, so a corrected poll starts afresh. A first poll that waits learns of it
// as soon as the join is refused, not after its timeout_ms; one that does not wait
// (timeout_ms=0) answers at once, and a later poll answers the refusal.
func TestSessionTimeoutRefused(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("st-refused", 1)
	refused := func(r response) bool {
		if r.status == http.StatusOK {
			return false
		}
		if r.status != http.StatusBadRequest || r.errorCode(t) != "INVALID_SESSION_TIMEOUT" || !strings.Contains(string(r.body), "session_timeout_ms 1000") {
			t.Fatalf("poll with session_timeout_ms 1000: %d %s, want 400 INVALID_SESSION_TIMEOUT naming it", r.status, r.body)
		}
		return true
	}

	waiting := map[string]any{"group": "st-refused", "topic": "st-refused", "session_timeout_ms": 1000, "timeout_ms": 60000}
	start := time.Now()
	if r := n.do("POST", "/poll", waiting); !refused(r) {
		t.Fatalf("waiting first poll: %d %s, want the refusal", r.status, r.body)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the refusal took %v: the poll waited for an assignment that could not come", took)
	}

	notWaiting := map[string]any{"group": "st-refused0", "topic": "st-refused", "session_timeout_ms": 1000, "timeout_ms": 0}
	wait.For(t, "a poll answering the refusal", func() bool {
		r := n.do("POST", "/poll", notWaiting)
		if r.status == http.StatusOK && string(r.body) != "{\"records\":[]}\n" {
			t.Fatalf("poll of a refused member: %s", r.body)
		}
		return refused(r)
	})

	// The refused members were dropped: corrected polls make new ones.
	for _, g := range []string{"st-refused", "st-refused0"} {
		n.poll(map[string]any{"group": g, "topic": "st-refused", "session_timeout_ms": 6000, "timeout_ms": 0})
	}
}

// TestIdleConsumerLeaves: a consumer instance outlives a poll longer than its
// session timeout, then leaves the group once unused for that long.
func TestIdleConsumerLeaves(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("idle", 1)
	body := map[string]any{"group": "idle", "topic": "idle", "session_timeout_ms": 6000, "timeout_ms": 200}
	n.poll(body)
	wait.For(t, "the member joins", func() bool { return len(n.group("idle").Members) == 1 })
	member := n.group("idle").Members[0].MemberID

	body["timeout_ms"] = 7000 // longer than the session timeout: in use all along
	n.poll(body)
	lastUse := time.Now()
	if g := n.group("idle"); len(g.Members) != 1 || g.Members[0].MemberID != member {
		t.Fatalf("the member changed during a long poll: %+v, was %s", g.Members, member)
	}
	wait.For(t, "the idle member leaves", func() bool { return len(n.group("idle").Members) == 0 })
	if idle := time.Since(lastUse); idle < 5*time.Second {
		t.Fatalf("the member left after %v idle, before its 6s session timeout", idle)
	}
	r := n.do("POST", "/commit", map[string]any{"group": "idle"})
	if r.status != http.StatusNotFound || r.errorCode(t) != "UNKNOWN_CONSUMER" {
		t.Fatalf("commit for the expired consumer: %d %s", r.status, r.body)
	}
}

// TestMixedGroup: an HTTP consumer and a franz-go consumer in one group split the
// partitions with no overlap, and each starts from what the other committed.
func TestMixedGroup(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	const topic, group, parts = "mixed", "mixed", 4
	n.createTopic(topic, parts)

	var kmu sync.Mutex
	kafkaAssigned := map[int32]bool{}
	kcl, adm := n.kafka(
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			kmu.Lock()
			defer kmu.Unlock()
			for _, p := range a[topic] {
				kafkaAssigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			kmu.Lock()
			defer kmu.Unlock()
			for _, p := range r[topic] {
				delete(kafkaAssigned, p)
			}
		}),
	)
	kafkaOwns := func() map[int32]bool {
		kmu.Lock()
		defer kmu.Unlock()
		out := map[int32]bool{}
		for p := range kafkaAssigned {
			out[p] = true
		}
		return out
	}
	var kafkaRecs []*kgo.Record
	kpoll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		kafkaRecs = append(kafkaRecs, kcl.PollFetches(ctx).Records()...)
		cancel()
	}

	httpBody := map[string]any{"group": group, "topic": topic, "consumer": "web", "timeout_ms": 300}
	var httpRecs []polledRecord
	// Both poll until the group is stable with two members that split the topic.
	wait.For(t, "two members splitting the partitions", func() bool {
		kpoll()
		httpRecs = append(httpRecs, n.poll(httpBody)...)
		g := n.group(group)
		if g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		owners := map[int32]string{}
		for _, m := range g.Members {
			for _, a := range m.Assignment {
				for _, p := range a.Partitions {
					if _, dup := owners[p]; dup {
						t.Fatalf("partition %d assigned twice: %+v", p, g.Members)
					}
					owners[p] = m.ClientID
				}
			}
		}
		ko := kafkaOwns()
		for p, c := range owners {
			if strings.HasPrefix(c, "strata-http/web@") == ko[p] {
				return false // the Kafka client has not caught up with the assignment yet
			}
		}
		return len(owners) == parts && len(ko) > 0 && len(ko) < parts
	})
	if len(httpRecs)+len(kafkaRecs) != 0 {
		t.Fatalf("records before any were produced")
	}

	// Each consumer reads exactly the partitions it owns.
	for p := range parts {
		n.produceN(topic, p, 0, 3)
	}
	ko := kafkaOwns()
	deadline := time.Now().Add(20 * time.Second)
	for len(httpRecs)+len(kafkaRecs) < parts*3 && time.Now().Before(deadline) {
		kpoll()
		httpRecs = append(httpRecs, n.poll(httpBody)...)
	}
	if len(httpRecs)+len(kafkaRecs) != parts*3 {
		t.Fatalf("read %d HTTP + %d Kafka records, want %d", len(httpRecs), len(kafkaRecs), parts*3)
	}
	for _, r := range httpRecs {
		if ko[r.Partition] {
			t.Fatalf("the HTTP consumer read partition %d, which the Kafka consumer owns", r.Partition)
		}
	}
	for _, r := range kafkaRecs {
		if !ko[r.Partition] {
			t.Fatalf("the Kafka consumer read partition %d, which it does not own", r.Partition)
		}
	}

	// The HTTP consumer commits its positions and leaves; the Kafka consumer takes
	// its partitions and starts at those commits: it reads only newer records.
	n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": group, "consumer": "web"})
	n.must(http.StatusOK, "DELETE", "/groups/"+group+"/consumers/web", nil)
	wait.For(t, "the Kafka consumer owns every partition", func() bool {
		kpoll()
		return len(kafkaOwns()) == parts
	})
	kafkaRecs = nil
	for p := range parts {
		n.produceN(topic, p, 3, 1)
	}
	for deadline := time.Now().Add(20 * time.Second); len(kafkaRecs) < parts && time.Now().Before(deadline); {
		kpoll()
	}
	for _, r := range kafkaRecs {
		if r.Offset != 3 {
			t.Fatalf("the Kafka consumer read offset %d of partition %d; the HTTP commit said 3", r.Offset, r.Partition)
		}
	}
	if len(kafkaRecs) != parts {
		t.Fatalf("the Kafka consumer read %d records, want %d", len(kafkaRecs), parts)
	}

	// The Kafka consumer commits and leaves; a new HTTP consumer starts at its commits.
	if err := kcl.CommitUncommittedOffsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	kcl.LeaveGroup()
	if c := n.group(group).committed(topic, 2); c != 4 {
		t.Fatalf("the Kafka consumer's commit is not visible over HTTP: %d", c)
	}
	for p := range parts {
		n.produceN(topic, p, 4, 1)
	}
	recs := n.pollN(map[string]any{"group": group, "topic": topic, "consumer": "web2"}, parts)
	for _, r := range recs {
		if r.Offset != 4 {
			t.Fatalf("the new HTTP consumer read offset %d of partition %d; the Kafka commit said 4", r.Offset, r.Partition)
		}
	}
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At != 4 {
			t.Errorf("committed %d for partition %d, want 4", o.At, o.Partition)
		}
	})
}

// TestCloseDuringPoll: closing a consumer ends its long poll at once with 503.
func TestCloseDuringPoll(t *testing.T) {
	t.Parallel()
	n := startNode(t) // its own node: the test waits on the node's count of polls in flight
	n.createTopic("closing", 1)
	body := map[string]any{"group": "closing", "topic": "closing", "timeout_ms": 300}
	n.poll(body)
	wait.For(t, "the member joins", func() bool { return len(n.group("closing").Members) == 1 })
	// The close must land while the poll waits: the poll counts as in flight from
	// when it reaches its route, a moment before it takes the consumer instance, so
	// a close in that moment makes the poll start a new instance and time out; the
	// test then tries again.
	for range 5 {
		done := make(chan response, 1)
		go func() {
			done <- (&testNode{Node: n.Node, t: t, base: n.base}).do("POST", "/poll", map[string]any{"group": "closing", "topic": "closing", "timeout_ms": 5000})
		}()
		n.waitInFlight("POST /poll", 1)
		start := time.Now()
		n.must(http.StatusOK, "DELETE", "/groups/closing/consumers/default", nil)
		r := <-done
		switch {
		case r.status == http.StatusServiceUnavailable && r.errorCode(t) == "CLOSED":
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("the poll ended %v after its consumer closed", d)
			}
			return
		case r.status != http.StatusOK:
			t.Fatalf("poll of a closed consumer: %d %s", r.status, r.body)
		}
		n.waitInFlight("POST /poll", 0)
	}
	t.Fatal("no poll was waiting when its consumer closed, in five tries")
}

// TestTooManyConsumers: an API refuses a consumer instance beyond its limit.
func TestTooManyConsumers(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("limited", 1)
	a, err := httpapi.New(httpapi.Config{KafkaAddr: n.KafkaAddr(), Cluster: oneTopicImage(t, "limited", 1), MaxConsumers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	limited := &testNode{Node: n.Node, t: t, base: srv.URL}
	limited.poll(map[string]any{"group": "limited", "topic": "limited", "consumer": "one"})
	r := limited.do("POST", "/poll", map[string]any{"group": "limited", "topic": "limited", "consumer": "two"})
	if r.status != http.StatusTooManyRequests || r.errorCode(t) != "TOO_MANY_CONSUMERS" {
		t.Fatalf("a second consumer over the limit of one: %d %s", r.status, r.body)
	}
	limited.must(http.StatusOK, "DELETE", "/groups/limited/consumers/one", nil)
	limited.poll(map[string]any{"group": "limited", "topic": "limited", "consumer": "two"})
}

// TestFirstPoll: a new member's first poll without timeout_ms waits for its
// assignment, then resolves where it starts. On a topic with records past that
// it returns them (however long the member's own offset lookups take); on an
// empty topic, or one read to the end by the group, it answers after the poll's
// own timeout (1 s), not a fixed longer wait.
func TestFirstPoll(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("first-records", 1)
	n.createTopic("first-empty", 1)
	n.produceN("first-records", 0, 0, 5)
	if recs := n.poll(map[string]any{"group": "first-records", "topic": "first-records"}); len(recs) == 0 || recs[0].Offset != 0 {
		t.Fatalf("first poll of a topic with records: %+v", recs)
	}
	for _, body := range []map[string]any{
		{"group": "first-empty", "topic": "first-empty"},
		{"group": "first-latest", "topic": "first-records", "reset": "latest"},
	} {
		start := time.Now()
		recs := n.poll(body)
		took := time.Since(start)
		if len(recs) != 0 {
			t.Fatalf("%v: first poll returned %+v", body, recs)
		}
		// The group joins at once (no initial rebalance delay in these tests); the
		// rest is the 1 s poll timeout and three offset lookups.
		if took < time.Second || took >= 3*time.Second {
			t.Fatalf("%v: an empty first poll took %v, want the 1 s poll timeout", body, took)
		}
	}
}

// TestDescribeKIP848Group: GET /groups/{group} describes a running KIP-848
// consumer group (group.protocol=consumer), which DescribeGroups answers
// GROUP_ID_NOT_FOUND: its member and assignment, the committed partition and
// the assigned one without a commit, each with its owner and lag. It was a
// 404 while GET /groups listed the group Stable.
func TestDescribeKIP848Group(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("kip848", 2)
	n.produceN("kip848", 0, 0, 3)
	n.produceN("kip848", 1, 0, 2)
	cl, _ := n.kafka(kgo.ConsumerGroup("kip848-g"), kgo.ConsumeTopics("kip848"), kgo.ServerSideBalancer(), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for read := 0; read < 5; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		read += fs.NumRecords()
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"kip848": {0: {Epoch: -1, Offset: 2}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	var g groupView
	wait.For(t, "the group described Stable with its member", func() bool {
		g = n.group("kip848-g")
		return g.State == "Stable" && len(g.Members) == 1
	})
	if a := g.Members[0].Assignment; len(a) != 1 || a[0].Topic != "kip848" || !slices.Equal(a[0].Partitions, []int32{0, 1}) {
		t.Fatalf("assignment %+v", a)
	}
	type pos struct{ committed, lag int64 }
	got := map[int32]pos{}
	for _, o := range g.Offsets {
		if o.Topic == "kip848" && o.Lag != nil {
			got[o.Partition] = pos{g.committed("kip848", o.Partition), *o.Lag}
		}
	}
	// Partition 1 has no commit: its lag is counted from the log start.
	if want := map[int32]pos{0: {2, 1}, 1: {-1, 2}}; !maps.Equal(got, want) || g.Lag != 3 {
		t.Fatalf("offsets %+v (lag %d), want %+v and lag 3", got, g.Lag, want)
	}
}
