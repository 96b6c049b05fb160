package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// Kafka Connect against Strata (interop/connect: Connect 4.3.1 with its file and
// MirrorMaker 2 connectors). Each test runs its own single-node cluster and one
// JVM per worker; the worker properties are workerProps' plus the test's own.

const (
	fileSource = "org.apache.kafka.connect.file.FileStreamSourceConnector"
	fileSink   = "org.apache.kafka.connect.file.FileStreamSinkConnector"
)

// startConnectCluster starts a one-node Strata cluster for Connect, or skips the
// test when Connect cannot run or the suite targets kfake.
func startConnectCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("Kafka Connect runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	requireConnect(t)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	return testcluster.Start(t, 1)
}

// TestConnectFileStream runs one distributed worker with a FileStreamSource
// connector copying a file into a topic and a FileStreamSink connector copying
// the topic into another file:
//
//  1. The worker creates its config, offset and status topics compacted (it
//     checks their cleanup.policy with DescribeConfigs) and joins its group
//     (protocol type connect, protocol sessioned).
//  2. The source connector creates its topic with the partitions, replication
//     factor (-1: the broker's default) and configs of its topic.creation.*
//     properties (KIP-158).
//  3. Lines written before the connectors start and lines appended while they
//     run reach the sink's file in order, each once; the topic holds each once.
//  4. The sink's consumer group commits the topic's end offset.
//  5. The stopped sink's offsets are read, reset and altered through the REST
//     API (KIP-875), and the resumed sink writes the lines from there again.
//  6. The worker stops cleanly on SIGTERM and leaves the group empty.
func TestConnectFileStream(t *testing.T) {
	c := startConnectCluster(t)
	bs := c.Bootstrap()
	adm := c.Admin()
	const group, topic = "connect-fs", "connect-fs-lines"
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.txt")
	lines := numberedLines("fs", 0, 50)
	appendLines(t, in, lines)

	w := startConnectWorker(t, "the worker", workerProps(bs, group))
	checkInternalTopics(t, adm, group)
	checkConnectGroup(t, adm, group, 1)

	w.putConnector(t, "fs-source", map[string]string{"connector.class": fileSource, "tasks.max": "1", "file": in, "topic": topic,
		"topic.creation.default.partitions":         "1",
		"topic.creation.default.replication.factor": "-1",
		"topic.creation.default.retention.ms":       "3600000"})
	w.awaitConnectors(t, 1, nil, "fs-source")
	var created kadm.ResourceConfig
	w.await(t, time.Minute, "the source connector to create "+topic, func() error {
		rc, err := adm.DescribeTopicConfigs(context.Background(), topic)
		if err != nil {
			return err
		}
		created, err = rc.On(topic, nil)
		if err == nil {
			err = created.Err
		}
		return err
	})
	if !slices.ContainsFunc(created.Configs, func(c kadm.Config) bool {
		return c.Key == "retention.ms" && c.MaybeValue() == "3600000" && c.Source == kmsg.ConfigSourceDynamicTopicConfig
	}) {
		t.Errorf("%s was not created with retention.ms=3600000: %+v", topic, created.Configs)
	}
	w.putConnector(t, "fs-sink", map[string]string{"connector.class": fileSink, "tasks.max": "1", "file": out, "topics": topic})
	w.awaitConnectors(t, 1, nil, "fs-sink")
	more := numberedLines("fs", 50, 100)
	appendLines(t, in, more)
	lines = append(lines, more...)

	awaitFile(t, w, out, lines)
	got := readTopic(t, bs, topic, false, atLeast(len(lines)))[0]
	if !slices.Equal(got, lines) {
		t.Fatalf("topic %s is not the lines in order:\n%s", topic, firstDifference(got, lines))
	}
	requireEndOffsets(t, adm, topic, map[int32]int64{0: int64(len(lines))})

	w.await(t, time.Minute, "the sink's group to commit the end offset", func() error {
		return committedAt(adm, "connect-fs-sink", topic, map[int32]int64{0: int64(len(lines))})
	})

	// KIP-875: the stopped sink's offsets are its group's, read, reset (the
	// group deleted) and altered through the REST API; resumed, it writes the
	// lines from the altered offset on again.
	w.stopConnector(t, "fs-sink")
	at := func(offset int) connectorOffsets {
		return connectorOffsets{[]partitionOffset{{
			Partition: map[string]any{"kafka_topic": topic, "kafka_partition": float64(0)},
			Offset:    map[string]any{"kafka_offset": float64(offset)},
		}}}
	}
	if got, want := w.offsets(t, "fs-sink"), at(len(lines)); !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /connectors/fs-sink/offsets: %+v, want %+v", got, want)
	}
	w.request(t, http.MethodDelete, "/connectors/fs-sink/offsets", nil)
	if got := w.offsets(t, "fs-sink"); len(got.Offsets) != 0 {
		t.Fatalf("offsets after a reset: %+v", got)
	}
	w.request(t, http.MethodPatch, "/connectors/fs-sink/offsets", at(60))
	if err := committedAt(adm, "connect-fs-sink", topic, map[int32]int64{0: 60}); err != nil {
		t.Fatalf("after PATCH /connectors/fs-sink/offsets: %v", err)
	}
	w.request(t, http.MethodPut, "/connectors/fs-sink/resume", nil)
	w.awaitConnectors(t, 1, nil, "fs-sink")
	awaitFile(t, w, out, slices.Concat(lines, lines[60:]))

	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, 30*time.Second, "the worker's group to be Empty after SIGTERM", func() error {
		gs, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return err
		}
		if g := gs[group]; g.State != "Empty" {
			return fmt.Errorf("group %s is %s with %d members", group, g.State, len(g.Members))
		}
		return nil
	})
}

// TestConnectExactlyOnceSource runs a worker with exactly.once.source.support
// enabled (KIP-618): its config topic is written by a transactional producer,
// each source task writes records and source offsets in transactions, and a
// reconfigured connector's old tasks are fenced with Admin.fenceProducers
// (InitProducerId for each old task's transactional id) before new ones start.
//
//  1. A FileStreamSource connector with exactly.once.support=required copies
//     lines (some written before it starts, some appended while it runs); a
//     read_committed reader sees each line once, in order, and the topic holds
//     transaction markers.
//  2. The transactional ids of the task and of the worker's config producer
//     are known to Strata's transaction coordinator.
//  3. A MirrorSourceConnector (exactly.once.support=required, read_committed
//     source consumer) copies a topic of 2 partitions with 2 tasks, then is
//     reconfigured to 1 task: the leader fences the 2 old tasks' producers and
//     the new task carries on; the copy holds every record once per partition,
//     in order, for records written before and after the fencing.
func TestConnectExactlyOnceSource(t *testing.T) {
	c := startConnectCluster(t)
	bs := c.Bootstrap()
	adm := c.Admin()
	const group, topic = "connect-eos", "connect-eos-lines"
	createTopics(t, bs[0], 1, topic)
	in := filepath.Join(t.TempDir(), "in.txt")
	lines := numberedLines("eos", 0, 60)
	appendLines(t, in, lines)

	props := workerProps(bs, group)
	props["exactly.once.source.support"] = "enabled"
	w := startConnectWorker(t, "the worker", props,
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect.runtime.Worker=debug")
	w.putConnector(t, "eos-file", map[string]string{"connector.class": fileSource, "tasks.max": "1",
		"file": in, "topic": topic, "exactly.once.support": "required", "transaction.boundary": "poll"})
	w.awaitConnectors(t, 1, nil, "eos-file")
	more := numberedLines("eos", 60, 100)
	appendLines(t, in, more)
	lines = append(lines, more...)

	got := readTopic(t, bs, topic, true, atLeast(len(lines)))[0]
	if !slices.Equal(got, lines) {
		t.Fatalf("read_committed %s is not the lines in order:\n%s", topic, firstDifference(got, lines))
	}
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup(topic, 0); end.Offset <= int64(len(lines)) {
		t.Errorf("%s ends at %d with %d records: no transaction markers", topic, end.Offset, len(lines))
	}
	txns, err := adm.ListTransactions(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{group + "-eos-file-0", "connect-cluster-" + group} {
		if _, ok := txns[id]; !ok {
			t.Errorf("transactional id %s unknown to the coordinator; listed: %v", id, slices.Sorted(maps.Keys(txns)))
		}
	}

	// KIP-875 on an exactly-once source: altering the stopped connector's
	// offsets first fences its task's producer (Admin.fenceProducers), then
	// writes the new offset in a transaction; resumed from position 0, it
	// copies the file again.
	w.stopConnector(t, "eos-file")
	info, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	position := func(at int64) connectorOffsets {
		return connectorOffsets{[]partitionOffset{{
			Partition: map[string]any{"filename": in},
			Offset:    map[string]any{"position": float64(at)},
		}}}
	}
	if got, want := w.offsets(t, "eos-file"), position(info.Size()); !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /connectors/eos-file/offsets: %+v, want %+v", got, want)
	}
	w.request(t, http.MethodPatch, "/connectors/eos-file/offsets", position(0))
	if !w.logged("Finished fencing out 1 task producers for source connector eos-file") {
		t.Errorf("altering eos-file's offsets fenced no producer")
	}
	w.request(t, http.MethodPut, "/connectors/eos-file/resume", nil)
	w.awaitConnectors(t, 1, nil, "eos-file")
	twice := slices.Concat(lines, lines)
	if got := readTopic(t, bs, topic, true, atLeast(len(twice)))[0]; !slices.Equal(got, twice) {
		t.Fatalf("read_committed %s after the reset is not the lines twice:\n%s", topic, firstDifference(got, twice))
	}

	// A MirrorSourceConnector copying a topic of this cluster into this
	// cluster ("here.<topic>"): 2 tasks, then 1.
	const mirrored = "connect-eos-mirror-in"
	createTopics(t, bs[0], 2, mirrored)
	produceLines(t, c, mirrored, "m", 0, 40)
	mirror := map[string]string{
		"connector.class":                       "org.apache.kafka.connect.mirror.MirrorSourceConnector",
		"tasks.max":                             "2",
		"exactly.once.support":                  "required",
		"source.consumer.isolation.level":       "read_committed",
		"source.cluster.alias":                  "here",
		"target.cluster.alias":                  "there",
		"source.cluster.bootstrap.servers":      strings.Join(bs, ","),
		"target.cluster.bootstrap.servers":      strings.Join(bs, ","),
		"topics":                                mirrored,
		"replication.factor":                    "1",
		"offset-syncs.topic.replication.factor": "1",
		"sync.topic.acls.enabled":               "false",
		"key.converter":                         "org.apache.kafka.connect.converters.ByteArrayConverter",
		"value.converter":                       "org.apache.kafka.connect.converters.ByteArrayConverter",
	}
	w.putConnector(t, "eos-mirror", mirror)
	w.awaitConnectors(t, 2, nil, "eos-mirror")
	requireSameRecords(t, bs, mirrored, bs, "here."+mirrored, 40)

	mirror["tasks.max"] = "1"
	w.putConnector(t, "eos-mirror", mirror)
	w.awaitConnectors(t, 1, nil, "eos-mirror")
	w.await(t, 30*time.Second, "the worker to fence the 2 old tasks' producers", func() error {
		if !w.logged("Finished fencing out 2 task producers for source connector eos-mirror") {
			return errors.New("no \"Finished fencing out 2 task producers\" in the worker's log")
		}
		return nil
	})
	produceLines(t, c, mirrored, "m", 40, 80)
	requireSameRecords(t, bs, mirrored, bs, "here."+mirrored, 80)
}

// TestConnectWorkerFailover runs two workers in one group, with exactly-once
// source support, and two FileStreamSource connectors:
//
//  1. Once both workers are in the group, the connectors and their tasks are
//     spread over both (incremental cooperative rebalancing) and copy their
//     files' first lines.
//  2. A writer keeps appending lines to both files while one worker is killed
//     (SIGKILL) with its task's transaction open: the other worker must
//     take the killed worker's connector and task over once its session has
//     expired and the scheduled rebalance delay has passed.
//  3. A read_committed reader of each topic sees every line written, once and
//     in order: the new task's producer fenced the old one and its open
//     transaction was aborted, and the task resumed from the offsets committed
//     with the last committed transaction.
func TestConnectWorkerFailover(t *testing.T) {
	c := startConnectCluster(t)
	bs := c.Bootstrap()
	adm := c.Admin()
	const group = "connect-fo"
	props := workerProps(bs, group)
	props["exactly.once.source.support"] = "enabled"
	props["session.timeout.ms"] = "6000"
	props["heartbeat.interval.ms"] = "1000"
	props["scheduled.rebalance.max.delay.ms"] = "3000"
	w1 := launchConnectWorker(t, "worker 1", props)
	w2 := launchConnectWorker(t, "worker 2", props)
	w1.awaitHealthy(t)
	w2.awaitHealthy(t)
	checkConnectGroup(t, adm, group, 2)

	dir := t.TempDir()
	names := []string{"fo-a", "fo-b"}
	files := map[string]string{}
	for _, name := range names {
		createTopics(t, bs[0], 1, name)
		files[name] = filepath.Join(dir, name+".txt")
		appendLines(t, files[name], numberedLines(name, 0, 30))
		w1.putConnector(t, name, map[string]string{"connector.class": fileSource, "tasks.max": "1",
			"file": files[name], "topic": name, "exactly.once.support": "required",
			"transaction.boundary": "interval", "transaction.boundary.interval.ms": "2000"})
	}
	before := w1.awaitConnectors(t, 1, func(all map[string]connectorStatus) error {
		if all["fo-a"].Tasks[0].WorkerID == all["fo-b"].Tasks[0].WorkerID {
			return fmt.Errorf("both tasks on %s, want one on each worker", all["fo-a"].Tasks[0].WorkerID)
		}
		return nil
	}, names...)
	t.Logf("before the kill: %v", before)
	for _, name := range names {
		readTopic(t, bs, name, true, atLeast(30))
	}

	// Kill worker 2 while its task's transaction is open (transactions span
	// 2s of lines).
	var victim string
	for name, st := range before {
		if st.Tasks[0].WorkerID == w2.id {
			victim = group + "-" + name + "-0"
		}
	}
	lw := startFileWriter(t, files, 30)
	testcluster.Eventually(t, 30*time.Second, "an open transaction of worker 2's task", func() error {
		d, err := adm.DescribeTransactions(context.Background(), victim)
		if err != nil {
			return err
		}
		if st := d[victim].State; st != "Ongoing" {
			return fmt.Errorf("%s is %s", victim, st)
		}
		return nil
	})
	killed := time.Now()
	w2.kill()
	after := w1.awaitConnectors(t, 1, func(all map[string]connectorStatus) error {
		for name, st := range all {
			if st.Connector.WorkerID != w1.id || st.Tasks[0].WorkerID != w1.id {
				return fmt.Errorf("%s: %s", name, st)
			}
		}
		return nil
	}, names...)
	t.Logf("worker 1 runs both connectors and tasks %.1fs after worker 2 was killed: %v", time.Since(killed).Seconds(), after)
	lw.awaitMore(t, 20)
	written, err := lw.stop()
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range names {
		want := numberedLines(name, 0, written)
		if got := readTopic(t, bs, name, true, atLeast(len(want)))[0]; !slices.Equal(got, want) {
			t.Fatalf("read_committed %s is not the lines in order, each once:\n%s", name, firstDifference(got, want))
		}
	}
}

// TestMirrorMaker runs MirrorMaker 2 in dedicated mode
// (org.apache.kafka.connect.mirror.MirrorMaker, one JVM) from one Strata cluster
// to another, with mirrorMakerProps:
//
//  1. Records written to a topic of 2 partitions on the source before MM2
//     starts, and records written while it runs, arrive on the target as
//     source.<topic>, each partition a copy of the source's.
//  2. A consumer group that read the topic on the source and committed its end
//     offsets gets them checkpointed (MirrorCheckpointConnector) and, with
//     sync.group.offsets.enabled, committed on the target translated to
//     source.<topic>'s end offsets.
//  3. The heartbeats and checkpoints topics exist on the target; MM2 stops
//     cleanly on SIGTERM.
func TestMirrorMaker(t *testing.T) {
	src := startConnectCluster(t)
	dst := testcluster.Start(t, 1, testcluster.WithFlags("--cluster-id", "strata-mm-target"))
	const topic, group = "mm-orders", "mm-readers"
	remote := "source." + topic
	src.CreateTopic(topic, [][]int32{{1}, {1}}, map[string]string{"retention.ms": "3600000"})
	produceLines(t, src, topic, "order", 0, 100)
	consumeAndCommit(t, src, group, topic, 100)

	mm := startJavaApp(t, "MirrorMaker", slices.Concat(connectLogFlags(), []string{"-cp", connectClassPath,
		"org.apache.kafka.connect.mirror.MirrorMaker",
		writeProps(t, "mm2.properties", mirrorMakerProps(src.Bootstrap(), dst.Bootstrap(), topic))})...)
	mm.termStatus = 143
	requireSameRecords(t, src.Bootstrap(), topic, dst.Bootstrap(), remote, 100)

	dadm := dst.Admin()
	ends, err := dadm.ListEndOffsets(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	testcluster.Eventually(t, time.Minute, "the group's offsets checkpointed and synced to the target", func() error {
		if mm.exited() {
			t.Fatalf("MirrorMaker exited: %v\n%s", mm.err, mm.output())
		}
		return committedAt(dadm, group, remote, want)
	})
	topics, err := dadm.ListTopics(context.Background(), "heartbeats", "source.checkpoints.internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"heartbeats", "source.checkpoints.internal"} {
		if d, ok := topics[name]; !ok || d.Err != nil {
			t.Errorf("topic %s on the target: %+v", name, d)
		}
	}
	// MM2 made the copy with the source topic's configs.
	rc, err := dadm.DescribeTopicConfigs(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := rc.On(remote, nil); err != nil || !slices.ContainsFunc(cfg.Configs, func(c kadm.Config) bool {
		return c.Key == "retention.ms" && c.MaybeValue() == "3600000"
	}) {
		t.Errorf("%s on the target has not the source's retention.ms=3600000: %+v (%v)", remote, cfg.Configs, err)
	}

	produceLines(t, src, topic, "order", 100, 150)
	requireSameRecords(t, src.Bootstrap(), topic, dst.Bootstrap(), remote, 150)
	if err := mm.stop(); err != nil {
		t.Fatal(err)
	}
}

// mirrorMakerProps is a dedicated MirrorMaker 2 setup replicating topic from the
// cluster "source" to the cluster "target", each of one node: replication
// factor 1 everywhere, topics and groups refreshed, checkpoints and
// heartbeats emitted and group offsets synced every second, an offset sync for
// every record (so that a group at the end translates to the end).
func mirrorMakerProps(source, target []string, topic string) map[string]string {
	return map[string]string{
		"clusters":                              "source, target",
		"source.bootstrap.servers":              strings.Join(source, ","),
		"target.bootstrap.servers":              strings.Join(target, ","),
		"source->target.enabled":                "true",
		"source->target.topics":                 topic,
		"replication.factor":                    "1",
		"checkpoints.topic.replication.factor":  "1",
		"heartbeats.topic.replication.factor":   "1",
		"offset-syncs.topic.replication.factor": "1",
		"offset.storage.replication.factor":     "1",
		"status.storage.replication.factor":     "1",
		"config.storage.replication.factor":     "1",
		"refresh.topics.interval.seconds":       "1",
		"refresh.groups.interval.seconds":       "1",
		"emit.checkpoints.interval.seconds":     "1",
		"emit.heartbeats.interval.seconds":      "1",
		"sync.group.offsets.enabled":            "true",
		"sync.group.offsets.interval.seconds":   "1",
		"offset.lag.max":                        "0",
	}
}

// consumeAndCommit reads n records of topic as the only member of group,
// commits and leaves.
func consumeAndCommit(t *testing.T, c *testcluster.Cluster, group, topic string, n int) {
	t.Helper()
	cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records of %s", group, got, n, topic)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
}

// fileWriter appends a numbered line to each of its files every 20ms.
type fileWriter struct {
	files map[string]string // line prefix -> path
	loop  *repeat
	mu    sync.Mutex
	next  int // number of the next line
}

// startFileWriter starts writing lines numbered from next on; it is stopped at
// the test's end if the test did not stop it.
func startFileWriter(t *testing.T, files map[string]string, next int) *fileWriter {
	lw := &fileWriter{files: files, next: next}
	lw.loop = startRepeat(20*time.Millisecond, func() error {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		for prefix, path := range lw.files {
			if err := writeLines(path, numberedLines(prefix, lw.next, lw.next+1)); err != nil {
				return err
			}
		}
		lw.next++
		return nil
	})
	t.Cleanup(func() { _ = lw.loop.stop() })
	return lw
}

// awaitMore waits until the writer has appended n more lines to each file.
func (lw *fileWriter) awaitMore(t *testing.T, n int) {
	t.Helper()
	lw.mu.Lock()
	n += lw.next
	lw.mu.Unlock()
	testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("%d lines in each file", n), func() error {
		if ended, err := lw.loop.ended(); ended {
			return fmt.Errorf("the writer stopped: %v", err)
		}
		lw.mu.Lock()
		defer lw.mu.Unlock()
		if lw.next < n {
			return fmt.Errorf("%d lines", lw.next)
		}
		return nil
	})
}

// stop stops the writer and returns how many lines each file holds, or the
// write that failed.
func (lw *fileWriter) stop() (int, error) {
	err := lw.loop.stop()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.next, err
}

// awaitFile waits until the file at path holds the lines want, failing the
// test at once when it holds anything but a prefix of them.
func awaitFile(t *testing.T, w *connectWorker, path string, want []string) {
	t.Helper()
	w.await(t, time.Minute, fmt.Sprintf("%s to hold %d lines", filepath.Base(path), len(want)), func() error {
		got, err := readLines(path)
		if err != nil {
			return err
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("%s is not the lines expected, in order, each once:\n%s", path, firstDifference(got, want))
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d lines", len(got), len(want))
		}
		return nil
	})
}

// numberedLines are the lines prefix-NNNN for from <= N < to.
func numberedLines(prefix string, from, to int) []string {
	var lines []string
	for i := from; i < to; i++ {
		lines = append(lines, fmt.Sprintf("%s-%04d", prefix, i))
	}
	return lines
}

// appendLines appends lines to the file at path, creating it if need be.
func appendLines(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := writeLines(path, lines); err != nil {
		t.Fatal(err)
	}
}

func writeLines(path string, lines []string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	return errors.Join(err, f.Close())
}

// readLines returns the complete lines of the file at path (none if it does not
// exist yet).
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	return lines[:len(lines)-1], nil // what follows the last newline is not a line yet
}

// firstDifference says where got first departs from want.
func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %q, want %q (got %d values, want %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("got %d values, want %d; the shorter is a prefix of the longer", len(got), len(want))
}

// checkInternalTopics checks a Connect group's internal topics as Connect makes
// them: compacted, the config topic with 1 partition, the offset topic with 25
// and the status topic with 5 (Connect's defaults).
func checkInternalTopics(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	partitions := map[string]int{group + "-configs": 1, group + "-offsets": 25, group + "-status": 5}
	names := slices.Sorted(maps.Keys(partitions))
	ctx := context.Background()
	topics, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if d := topics[name]; d.Err != nil || len(d.Partitions) != partitions[name] {
			t.Errorf("internal topic %s: %d partitions (%v), want %d", name, len(d.Partitions), d.Err, partitions[name])
		}
		rc, err := configs.On(name, nil)
		if err != nil {
			t.Fatalf("describing %s: %v", name, err)
		}
		if !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool {
			return c.Key == "cleanup.policy" && c.MaybeValue() == "compact"
		}) {
			t.Errorf("internal topic %s is not compacted", name)
		}
	}
}

// checkConnectGroup waits until the workers' group is Stable with n members
// and checks that it is a Connect group: protocol type connect, and the
// sessioned protocol (incremental cooperative rebalancing with signed
// inter-worker requests, Connect's default).
func checkConnectGroup(t *testing.T, adm *kadm.Client, group string, n int) {
	t.Helper()
	testcluster.Eventually(t, time.Minute, fmt.Sprintf("group %s Stable with %d members", group, n), func() error {
		gs, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return err
		}
		g := gs[group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != n {
			return fmt.Errorf("group %s: %s with %d members (%v)", group, g.State, len(g.Members), g.Err)
		}
		if g.ProtocolType != "connect" || g.Protocol != "sessioned" {
			t.Fatalf("group %s: protocol type %q, protocol %q; want connect, sessioned", group, g.ProtocolType, g.Protocol)
		}
		return nil
	})
}

// requireEndOffsets fails the test unless topic's partitions end at want.
func requireEndOffsets(t *testing.T, adm *kadm.Client, topic string, want map[int32]int64) {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		if end, _ := ends.Lookup(topic, p); end.Err != nil || end.Offset != w {
			t.Errorf("%s[%d] ends at %d (%v), want %d", topic, p, end.Offset, end.Err, w)
		}
	}
}

// committedAt reports whether group has committed want on topic's partitions.
func committedAt(adm *kadm.Client, group, topic string, want map[int32]int64) error {
	offsets, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return err
	}
	for p, w := range want {
		if o, ok := offsets.Lookup(topic, p); !ok || o.At != w {
			return fmt.Errorf("group %s committed %s[%d] at %d (known %v), want %d", group, topic, p, o.At, ok, w)
		}
	}
	return nil
}

// produceLines writes records with values prefix-NNNN for from <= N < to,
// keyed by N, to topic.
func produceLines(t *testing.T, c *testcluster.Cluster, topic, prefix string, from, to int) {
	t.Helper()
	cl := c.Client()
	defer cl.Close()
	var recs []*kgo.Record
	for i, v := range numberedLines(prefix, from, to) {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(from + i)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// requireSameRecords reads n records of topic from on one cluster and n of
// topic to on another (or the same), read_committed, and fails the test unless
// each partition of to holds exactly the values of the same partition of from,
// in order.
func requireSameRecords(t *testing.T, fromCluster []string, from string, toCluster []string, to string, n int) {
	t.Helper()
	src := readTopic(t, fromCluster, from, true, atLeast(n))
	dst := readTopic(t, toCluster, to, true, atLeast(n))
	for p, vs := range src {
		if !slices.Equal(dst[p], vs) {
			t.Fatalf("%s[%d] is not a copy of %s[%d]:\n%s", to, p, from, p, firstDifference(dst[p], vs))
		}
	}
	if len(dst) != len(src) {
		t.Fatalf("%s has records in %d partitions, %s in %d", to, len(dst), from, len(src))
	}
}
