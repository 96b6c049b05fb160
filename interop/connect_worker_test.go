package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// connectClassPath is Kafka Connect 4.3.1 (runtime, file and MirrorMaker 2
// connectors) as interop/install.sh resolves it from interop/connect.
const connectClassPath = "connect/target/jars/*"

// requireConnect skips the test (fails it in CI) when Kafka Connect cannot run.
func requireConnect(t *testing.T) {
	t.Helper()
	requireClient(t, client{name: "kafka-connect", missing: func() string {
		if _, err := exec.LookPath("java"); err != nil {
			return "java is not on PATH"
		}
		if jars, _ := filepath.Glob("connect/target/jars/connect-runtime-*.jar"); len(jars) == 0 {
			return "Kafka Connect is not resolved (connect/target/jars)"
		}
		return ""
	}})
}

// connectLogFlags keep a Connect JVM's log to what a test may want to read: the
// runtime's own INFO lines, WARN and above from the clients, the config dumps and
// the REST server. more are extra -D flags (a logger at debug, say).
func connectLogFlags(more ...string) []string {
	flags := []string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=info"}
	for _, quiet := range []string{"org.apache.kafka.clients", "org.apache.kafka.common",
		"org.apache.kafka.connect.runtime.rest", "org.eclipse.jetty", "org.glassfish",
		"org.apache.kafka.connect.runtime.distributed.DistributedConfig",
		"org.apache.kafka.connect.runtime.ConnectorConfig",
		"org.apache.kafka.connect.runtime.SourceConnectorConfig",
		"org.apache.kafka.connect.runtime.SinkConnectorConfig",
		"org.apache.kafka.connect.runtime.TaskConfig",
		"org.apache.kafka.connect.runtime.isolation"} {
		flags = append(flags, "-Dorg.slf4j.simpleLogger.log."+quiet+"=warn")
	}
	return append(flags, more...)
}

// workerProps are the properties of a distributed worker of group: string
// keys and values, the internal topics named after the group with the
// broker's default replication factor (-1: Strata's is the number of live
// brokers up to 3), offsets flushed every 500ms.
func workerProps(bootstrap []string, group string) map[string]string {
	return map[string]string{
		"bootstrap.servers":                 strings.Join(bootstrap, ","),
		"group.id":                          group,
		"key.converter":                     "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                   "org.apache.kafka.connect.storage.StringConverter",
		"config.storage.topic":              group + "-configs",
		"offset.storage.topic":              group + "-offsets",
		"status.storage.topic":              group + "-status",
		"config.storage.replication.factor": "-1",
		"offset.storage.replication.factor": "-1",
		"status.storage.replication.factor": "-1",
		"offset.flush.interval.ms":          "500",
	}
}

// writeProps writes props as a Java properties file in a new temporary directory.
func writeProps(t *testing.T, name string, props map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// connectWorker is a distributed Connect worker (one JVM) and its REST API.
type connectWorker struct {
	*javaApp
	id  string // host:port, the worker_id the status API names it by
	url string
}

// startConnectWorker starts a distributed worker with props and a REST listener
// on a free loopback port, and waits until it is healthy.
func startConnectWorker(t *testing.T, name string, props map[string]string, logFlags ...string) *connectWorker {
	t.Helper()
	w := launchConnectWorker(t, name, props, logFlags...)
	w.awaitHealthy(t)
	return w
}

// launchConnectWorker is startConnectWorker without the wait, to start several
// workers at once.
func launchConnectWorker(t *testing.T, name string, props map[string]string, logFlags ...string) *connectWorker {
	t.Helper()
	addr := freeAddr(t)
	props = maps.Clone(props)
	props["listeners"] = "http://" + addr
	path := writeProps(t, "worker.properties", props)
	args := slices.Concat(connectLogFlags(logFlags...),
		[]string{"-cp", connectClassPath, "org.apache.kafka.connect.cli.ConnectDistributed", path})
	w := &connectWorker{javaApp: startJavaApp(t, name, args...), id: addr, url: "http://" + addr}
	w.termStatus = 143
	return w
}

// awaitHealthy waits until GET /health says the worker has joined its group and
// read its config topic.
func (w *connectWorker) awaitHealthy(t *testing.T) {
	t.Helper()
	w.await(t, 90*time.Second, w.name+" healthy (GET /health)", func() error {
		code, body, err := w.call(http.MethodGet, "/health", nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
}

// await is testcluster.Eventually that fails at once, with the worker's log,
// when the worker has exited.
func (w *connectWorker) await(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testcluster.Eventually(t, timeout, what, func() error {
		if w.exited() {
			t.Fatalf("%s: %s exited (%v)\n%s", what, w.name, w.err, w.output())
		}
		return cond()
	})
}

var restClient = &http.Client{Timeout: 10 * time.Second}

// call sends a REST request with body (JSON-encoded unless nil) and returns the
// status code and the response body.
func (w *connectWorker) call(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, w.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := restClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// request sends a REST request and returns the response body, retrying while
// the worker answers that a rebalance is under way (409) or that it cannot do
// it yet (5xx: the leader unknown, a request timed out); any other refusal
// fails the test.
func (w *connectWorker) request(t *testing.T, method, path string, body any) []byte {
	t.Helper()
	var resp []byte
	w.await(t, 60*time.Second, method+" "+path, func() error {
		code, b, err := w.call(method, path, body)
		switch {
		case err != nil:
			return err
		case code >= 200 && code < 300:
			resp = b
			return nil
		case code == http.StatusConflict || code >= 500:
			return fmt.Errorf("%d %s", code, b)
		}
		t.Fatalf("%s %s: %d %s", method, path, code, b)
		return nil
	})
	return resp
}

// putConnector creates or reconfigures a connector.
func (w *connectWorker) putConnector(t *testing.T, name string, config map[string]string) {
	t.Helper()
	w.request(t, http.MethodPut, "/connectors/"+name+"/config", config)
}

// stopConnector stops a connector (PUT /connectors/NAME/stop: its tasks are
// shut down and their configs removed) and waits until it is STOPPED.
func (w *connectWorker) stopConnector(t *testing.T, name string) {
	t.Helper()
	w.request(t, http.MethodPut, "/connectors/"+name+"/stop", nil)
	w.await(t, 60*time.Second, "connector "+name+" STOPPED", func() error {
		st, err := w.status(name)
		if err != nil {
			return err
		}
		if st.Connector.State != "STOPPED" || len(st.Tasks) != 0 {
			return fmt.Errorf("want STOPPED without tasks: %s", st)
		}
		return nil
	})
}

// connectorOffsets is the body of GET and PATCH /connectors/NAME/offsets
// (KIP-875): each partition of the connector (a file, a topic partition) with
// its offset in it.
type connectorOffsets struct {
	Offsets []partitionOffset `json:"offsets"`
}

type partitionOffset struct {
	Partition map[string]any `json:"partition"`
	Offset    map[string]any `json:"offset"`
}

// offsets is GET /connectors/NAME/offsets.
func (w *connectWorker) offsets(t *testing.T, name string) connectorOffsets {
	t.Helper()
	var o connectorOffsets
	if err := json.Unmarshal(w.request(t, http.MethodGet, "/connectors/"+name+"/offsets", nil), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// connectorStatus is GET /connectors/NAME/status.
type connectorStatus struct {
	Connector unitStatus   `json:"connector"`
	Tasks     []unitStatus `json:"tasks"`
}

// unitStatus is the state of a connector or one of its tasks.
type unitStatus struct {
	ID       int    `json:"id"`
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace"`
}

func (s connectorStatus) String() string {
	parts := []string{"connector " + s.Connector.State + " on " + s.Connector.WorkerID}
	for _, task := range s.Tasks {
		parts = append(parts, fmt.Sprintf("task %d %s on %s", task.ID, task.State, task.WorkerID))
	}
	return strings.Join(parts, ", ")
}

// running reports whether the connector and its n tasks are RUNNING.
func (s connectorStatus) running(n int) error {
	if s.Connector.State != "RUNNING" || len(s.Tasks) != n {
		return fmt.Errorf("want the connector and %d tasks RUNNING: %s", n, s)
	}
	for _, task := range s.Tasks {
		if task.State != "RUNNING" {
			return fmt.Errorf("want the connector and %d tasks RUNNING: %s", n, s)
		}
	}
	return nil
}

// status is GET /connectors/NAME/status.
func (w *connectWorker) status(name string) (connectorStatus, error) {
	var st connectorStatus
	code, body, err := w.call(http.MethodGet, "/connectors/"+name+"/status", nil)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("%d %s", code, body)
	}
	return st, json.Unmarshal(body, &st)
}

// awaitConnectors polls the connectors' status until each is RUNNING with n
// RUNNING tasks and cond (when not nil) holds for them all; a FAILED connector
// or task fails the test at once with its stack trace.
func (w *connectWorker) awaitConnectors(t *testing.T, n int, cond func(map[string]connectorStatus) error, names ...string) map[string]connectorStatus {
	t.Helper()
	all := map[string]connectorStatus{}
	w.await(t, 60*time.Second, fmt.Sprintf("connectors %v RUNNING with %d tasks each", names, n), func() error {
		for _, name := range names {
			st, err := w.status(name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			for _, u := range append([]unitStatus{st.Connector}, st.Tasks...) {
				if u.State == "FAILED" {
					t.Fatalf("connector %s: %s\n%s\n%s", name, st, u.Trace, w.output())
				}
			}
			if err := st.running(n); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			all[name] = st
		}
		if cond != nil {
			return cond(all)
		}
		return nil
	})
	return all
}

// readTopic reads topic from the start with manual assignment of every
// partition until done holds for the values read so far (per partition, in
// offset order), failing the test after a minute. With readCommitted it reads
// as a read_committed consumer.
func readTopic(t *testing.T, bootstrap []string, topic string, readCommitted bool, done func(map[int32][]string) bool) map[int32][]string {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250 * time.Millisecond)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[int32][]string{}
	for !done(got) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: still not complete after a minute: %d partitions, %v", topic, len(got), got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
	}
	return got
}

// atLeast is a readTopic condition: n records in all.
func atLeast(n int) func(map[int32][]string) bool {
	return func(got map[int32][]string) bool {
		total := 0
		for _, vs := range got {
			total += len(vs)
		}
		return total >= n
	}
}
