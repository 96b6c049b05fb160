package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/wait"
)

// decodeLines decodes one JSON object per line of s.
func decodeLines[T any](t *testing.T, s string) []T {
	t.Helper()
	var out []T
	for line := range strings.Lines(s) {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// consumeJSON consumes from the shared node with --output json and the given flags.
func consumeJSON(t *testing.T, topic string, flags ...string) []cli.RecordJSON {
	t.Helper()
	return consumeJSONAt(t, broker(t), topic, flags...)
}

func consumeJSONAt(t *testing.T, addr, topic string, flags ...string) []cli.RecordJSON {
	t.Helper()
	r := mustRunAt(t, addr, append([]string{"consume", topic, "--output", "json"}, flags...)...)
	return decodeLines[cli.RecordJSON](t, r.stdout)
}

func values(rs []cli.RecordJSON) string {
	var vs []string
	for _, r := range rs {
		if r.Value == nil {
			vs = append(vs, "<nil>")
		} else {
			vs = append(vs, *r.Value)
		}
	}
	return strings.Join(vs, ",")
}

func TestProduceConsumeKeysAndHeaders(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "3")

	in := "user1:a\nuser2:b\nuser3:c\nuser1:d\nuser2:e=f:g\n"
	r := runIn(t, in, "produce", topic, "--key-separator", ":", "-H", "src=cli", "-H", "env=test", "--output", "json")
	if r.code != 0 {
		t.Fatalf("produce: %s", r)
	}
	produced := decodeLines[producedJSON](t, r.stdout)
	if len(produced) != 5 {
		t.Fatalf("produce printed %d results, want 5:\n%s", len(produced), r.stdout)
	}
	at := map[int]producedJSON{}
	for _, p := range produced {
		if p.Error != "" || p.Partition < 0 || p.Offset < 0 || p.Topic != topic || p.Timestamp == nil {
			t.Fatalf("produced %+v", p)
		}
		at[p.Line] = p
	}
	if at[1].Partition != at[4].Partition || at[4].Offset <= at[1].Offset {
		t.Fatalf("user1's records: line 1 %+v, line 4 %+v: want one partition, increasing offsets", at[1], at[4])
	}

	got := consumeJSON(t, topic)
	if len(got) != 5 {
		t.Fatalf("consumed %d records, want 5: %+v", len(got), got)
	}
	byValue := map[string]cli.RecordJSON{}
	last := map[int32]int64{}
	for _, rec := range got {
		if prev, ok := last[rec.Partition]; ok && rec.Offset <= prev {
			t.Fatalf("partition %d: offset %d after %d", rec.Partition, rec.Offset, prev)
		}
		last[rec.Partition] = rec.Offset
		if rec.Topic != topic || rec.Key == nil || rec.Value == nil || rec.Timestamp.IsZero() {
			t.Fatalf("consumed %+v", rec)
		}
		if len(rec.Headers) != 2 || rec.Headers[0].Key != "src" || *rec.Headers[0].Value != "cli" ||
			rec.Headers[1].Key != "env" || *rec.Headers[1].Value != "test" {
			t.Fatalf("headers %+v", rec.Headers)
		}
		byValue[*rec.Value] = rec
	}
	for line, kv := range map[int][2]string{1: {"user1", "a"}, 2: {"user2", "b"}, 3: {"user3", "c"}, 4: {"user1", "d"}, 5: {"user2", "e=f:g"}} {
		rec, ok := byValue[kv[1]]
		if !ok || *rec.Key != kv[0] || rec.Partition != at[line].Partition || rec.Offset != at[line].Offset {
			t.Fatalf("line %d (%s:%s): consumed %+v, produced %+v", line, kv[0], kv[1], rec, at[line])
		}
	}

	r = mustRun(t, "consume", topic, "--partition", strconv.Itoa(int(at[1].Partition)), "--format", `%k=%v|%h|%T/%p@%o|%t\t%%`)
	first := strings.SplitN(r.stdout, "\n", 2)[0]
	want := fmt.Sprintf("user1=a|src=cli,env=test|%s/%d@%d|", topic, at[1].Partition, at[1].Offset)
	if !strings.HasPrefix(first, want) || !strings.HasSuffix(first, "\t%") {
		t.Fatalf("--format printed %q, want %q...\\t%%", first, want)
	}

	var d []describedTopicJSON
	mustJSON(t, &d, "topic", "describe", topic)
	hwm := int64(0)
	for _, p := range d[0].Partitions {
		hwm += p.HighWatermark
	}
	if hwm != 5 {
		t.Fatalf("high-water marks sum to %d, want 5: %+v", hwm, d[0].Partitions)
	}
}

func TestProduceOptions(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "3")
	total := 0
	for _, tc := range []struct {
		name  string
		flags []string
		check func(t *testing.T, p producedJSON)
	}{
		{"key", []string{"--key", "k1"}, nil},
		{"partition", []string{"--partition", "2"}, func(t *testing.T, p producedJSON) {
			if p.Partition != 2 {
				t.Errorf("partition %d, want 2", p.Partition)
			}
		}},
		{"acks=1", []string{"--acks", "1"}, nil},
		{"acks=0", []string{"--acks", "0", "--partition", "0"}, func(t *testing.T, p producedJSON) {
			if p.Offset != -1 {
				t.Errorf("acks=0 reported offset %d, want -1 (unknown)", p.Offset)
			}
		}},
		{"gzip", []string{"--compression", "gzip"}, nil},
		{"snappy", []string{"--compression", "snappy"}, nil},
		{"lz4", []string{"--compression", "lz4"}, nil},
		{"zstd", []string{"--compression", "zstd"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.name + "-1\n" + tc.name + "-2\n"
			r := runIn(t, in, append([]string{"produce", topic, "--output", "json"}, tc.flags...)...)
			if r.code != 0 {
				t.Fatalf("produce: %s", r)
			}
			ps := decodeLines[producedJSON](t, r.stdout)
			if len(ps) != 2 {
				t.Fatalf("%d results", len(ps))
			}
			for _, p := range ps {
				if p.Error != "" {
					t.Fatalf("record failed: %+v", p)
				}
				if tc.check != nil {
					tc.check(t, p)
				}
			}
			if tc.name == "key" && ps[0].Partition != ps[1].Partition {
				t.Errorf("one key, two partitions: %+v", ps)
			}
		})
		total += 2
	}
	// acks=0 gives no answer: wait until the records are there before reading.
	wait.For(t, "every record readable", func() bool {
		var d []describedTopicJSON
		mustJSON(t, &d, "topic", "describe", topic)
		n := int64(0)
		for _, p := range d[0].Partitions {
			n += p.HighWatermark
		}
		return n == int64(total)
	})
	got := consumeJSON(t, topic)
	seen := map[string]bool{}
	for _, r := range got {
		seen[*r.Value] = true
		if strings.HasPrefix(*r.Value, "key-") && (r.Key == nil || *r.Key != "k1") {
			t.Errorf("--key record %+v", r)
		}
		if strings.HasPrefix(*r.Value, "partition-") && r.Partition != 2 {
			t.Errorf("--partition record %+v", r)
		}
	}
	if len(got) != total || len(seen) != total {
		t.Fatalf("consumed %d records (%d distinct), want %d: %s", len(got), len(seen), total, values(got))
	}

	t.Run("verbose", func(t *testing.T) {
		r := runIn(t, "v\n", "produce", topic, "--partition", "1", "-v")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "line 1: partition 1 offset ") || !strings.Contains(r.stderr, "produced 1 records to "+topic) {
			t.Fatalf("verbose: %s", r)
		}
	})
}

func TestProduceFailures(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "1")

	r := runIn(t, "k:v\nno-separator\nk:w\n", "produce", topic, "--key-separator", ":")
	if r.code != 1 || !strings.Contains(r.stderr, "line 2: no key separator") || !strings.Contains(r.err.Error(), "1 of 3 records failed") {
		t.Fatalf("a line without separator: %s", r)
	}
	if got := values(consumeJSON(t, topic)); got != "v,w" {
		t.Fatalf("consumed %s, want the two good lines", got)
	}
	r = runIn(t, "x\n", "produce", topic, "--partition", "7", "--timeout", "5s")
	if r.code != 1 || !strings.Contains(r.err.Error(), "1 of 1 records failed") {
		t.Fatalf("producing to a partition that does not exist: %s", r)
	}
	for _, args := range [][]string{
		{"--acks", "2"},
		{"--compression", "brotli"},
		{"--key", "k", "--key-separator", ":"},
		{"-H", "novalue"},
		{"--partition", "-3"},
		{"--progress", "loud"},
		{"--progress-interval", "0s"},
	} {
		if r := runIn(t, "x\n", append([]string{"produce", topic}, args...)...); r.code != 2 {
			t.Errorf("produce %v: %s", args, r)
		}
	}
}

func TestConsumeFrom(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "1")
	var first []producedJSON
	r := runIn(t, "a\nb\nc\n", "produce", topic, "-o", "json")
	first = decodeLines[producedJSON](t, r.stdout)
	// Records after this instant are the second batch.
	var split time.Time
	for _, p := range first {
		if p.Timestamp.After(split) {
			split = *p.Timestamp
		}
	}
	split = split.Add(time.Millisecond)
	wait.For(t, "the clock to pass the first batch", func() bool { return time.Now().After(split) })
	runIn(t, "d\ne\n", "produce", topic)

	ms := strconv.FormatInt(split.UnixMilli(), 10)
	for _, tc := range []struct {
		from, want string
	}{
		{"earliest", "a,b,c,d,e"},
		{"latest", ""},
		{"0", "a,b,c,d,e"},
		{"3", "d,e"},
		{"5", ""},
		{"99", ""},
		{split.Format(time.RFC3339Nano), "d,e"},
		{"@" + ms, "d,e"},
		{ms, "d,e"},
		{"2000-01-01T00:00:00Z", "a,b,c,d,e"},
		{"@" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10), ""},
	} {
		t.Run(tc.from, func(t *testing.T) {
			if got := values(consumeJSON(t, topic, "--from", tc.from)); got != tc.want {
				t.Fatalf("--from %s: got %q, want %q", tc.from, got, tc.want)
			}
		})
	}
	t.Run("count", func(t *testing.T) {
		if got := values(consumeJSON(t, topic, "--from", "1", "--count", "2")); got != "b,c" {
			t.Fatalf("--count 2 from 1: %q", got)
		}
	})
	t.Run("bad", func(t *testing.T) {
		for _, from := range []string{"yesterday", "-1", "@x", "2024-13-01T00:00:00Z"} {
			if r := run(t, "consume", topic, "--from", from); r.code != 2 {
				t.Errorf("--from %s: %s", from, r)
			}
		}
		if r := run(t, "consume", topic, "--format", "%q"); r.code != 2 {
			t.Errorf("bad --format: %s", r)
		}
		if r := run(t, "consume", topic, "--partition", "4"); r.code != 1 {
			t.Errorf("missing partition: %s", r)
		}
	})
	t.Run("follow", func(t *testing.T) {
		// Start at the end: without --follow this would stop at once.
		done := make(chan result, 1)
		go func() { done <- run(t, "consume", topic, "--from", "5", "--follow", "--count", "2") }()
		runIn(t, "f\ng\n", "produce", topic)
		select {
		case r := <-done:
			if r.code != 0 || r.stdout != "f\ng\n" {
				t.Fatalf("follow: %s", r)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("consume --follow did not return after --count records")
		}
	})
}

func TestConsumeUnknownTopic(t *testing.T) {
	r := run(t, "consume", "no-such-topic-here")
	if r.code != 1 || !strings.Contains(r.err.Error(), `topic "no-such-topic-here"`) || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: %s", r)
	}
}

func TestProgress(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "1")
	env := map[string]string{cli.BrokersEnv: broker(t)}
	in := strings.Repeat("x\n", 50)

	// Not a terminal: plain lines on stderr (an interval this short prints on every record).
	r := invocation{env: env, stdin: in}.run(t, "produce", topic, "--progress-interval", "1ns")
	if r.code != 0 || !strings.Contains(r.stderr, "produce "+topic+": ") || !strings.Contains(r.stderr, "records/s") {
		t.Fatalf("plain progress: %s", r)
	}
	r = invocation{env: env}.run(t, "consume", topic, "--count", "50", "--progress-interval", "1ns")
	if r.code != 0 || !strings.Contains(r.stderr, "of 50 records") || !strings.Contains(r.stderr, "ETA") || strings.Count(r.stdout, "x\n") != 50 {
		t.Fatalf("plain consume progress: %s", r)
	}
	// JSON: never progress.
	r = invocation{env: env}.run(t, "consume", topic, "--output", "json", "--progress-interval", "1ns")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("json consume wrote to stderr: %s", r)
	}
	// A terminal on stderr, stdout redirected: a bar.
	r = invocation{env: env, stderrTerminal: true}.run(t, "consume", topic)
	if r.code != 0 || !strings.Contains(r.stderr, "records/s") || strings.Count(r.stdout, "x\n") != 50 {
		t.Fatalf("bar: %s", r)
	}
	// Records printed on the terminal are the progress: no bar.
	r = invocation{env: env, stderrTerminal: true, stdoutTerminal: true}.run(t, "consume", topic)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("bar over records on a terminal: %s", r)
	}
}

// TestProduceInterrupted: an interrupt while stdin blocks (a terminal) ends produce,
// and what was read is delivered.
func TestProduceInterrupted(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "1")
	stdin, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- invocation{ctx: ctx, stdinReader: stdin, env: map[string]string{cli.BrokersEnv: broker(t)}}.run(t, "produce", topic)
	}()
	io.WriteString(w, "one\ntwo\n")
	wait.For(t, "two records", func() bool {
		var d []describedTopicJSON
		mustJSON(t, &d, "topic", "describe", topic)
		return d[0].Partitions[0].HighWatermark == 2
	})
	cancel() // stdin stays open: the read blocks
	select {
	case r := <-done:
		if r.code != 0 || !strings.Contains(r.stderr, "produced 2 records") {
			t.Fatalf("interrupted produce: %s", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("produce did not return after the interrupt")
	}
	if got := values(consumeJSON(t, topic)); got != "one,two" {
		t.Fatalf("consumed %q", got)
	}
}

// hangUpListener accepts connections and closes each once its first request
// arrives, as a TLS listener does with a plaintext client.
func hangUpListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Read(make([]byte, 4096))
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProduceBrokerHangsUp: produce reports a listener that is not a usable Kafka
// broker up front, with the client's diagnosis and before reading stdin, as the
// other commands do; not as every record failed once --timeout has passed.
func TestProduceBrokerHangsUp(t *testing.T) {
	addr := hangUpListener(t)
	for _, output := range []string{"table", "json"} {
		r := runAt(t, addr, "a\nb\n", "produce", "t", "--timeout", "3s", "--output", output)
		if r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), "closed the connection") ||
			r.stdout != "" || strings.Contains(r.stderr, "line 1") || strings.Contains(r.err.Error(), "records failed") {
			t.Errorf("--output %s: %s", output, r)
		}
	}
}

// TestProduceGivesUpAtTimeout: when the broker stops answering Produce, the
// delivery gives up at --timeout and the summary and the exit error count every
// record as failed, each reported before the summary (or as its JSON line).
func TestProduceGivesUpAtTimeout(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// Handled with neither a response nor an error: kfake reads on and never
	// answers. (A SleepControl held until Close could leave kfake's control
	// goroutine blocked on its lock after the cluster stopped.)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true
	})
	addr := c.ListenAddrs()[0]

	r := runAt(t, addr, "a\nb\nc\n", "produce", "t", "--timeout", "2s")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "produced 0 records to t, 3 failed\n") ||
		strings.Count(r.stderr, "line ") != 3 || !strings.Contains(r.err.Error(), "3 of 3 records failed") {
		t.Fatalf("table: %s", r)
	}
	r = runAt(t, addr, "a\nb\n", "produce", "t", "--timeout", "2s", "--output", "json")
	lines := decodeLines[producedJSON](t, r.stdout)
	if r.code != 1 || len(lines) != 2 || lines[0].Error == "" || lines[1].Error == "" || !strings.Contains(r.err.Error(), "2 of 2 records failed") {
		t.Fatalf("json: %s", r)
	}
}
