package metrics_test

import (
	"bufio"
	"context"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metrics"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func startNode(t *testing.T) *server.Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = ""
	cfg.GroupInitialDelay, cfg.OffsetsTopicPartition = 0, 1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg, testLogger(), vfs.Default)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// scrape reads a /metrics page into "name{k=v,...}" -> value, labels sorted.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	return parseText(t, resp.Body)
}

// parseText reads the Prometheus text format (label values here never hold
// commas, quotes or braces).
func parseText(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		series := line[:i]
		name, labels, _ := strings.Cut(series, "{")
		labels = strings.TrimSuffix(labels, "}")
		var ls []string
		for _, l := range strings.Split(labels, ",") {
			if l == "" {
				continue
			}
			k, val, _ := strings.Cut(l, "=")
			ls = append(ls, k+"="+strings.Trim(val, `"`))
		}
		sort.Strings(ls)
		out[name+"{"+strings.Join(ls, ",")+"}"] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sumOf(got map[string]float64, prefix string) float64 {
	total := 0.0
	for k, v := range got {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

// TestMetricsAfterWorkload produces and consumes through franz-go and checks that
// the node's /metrics moved as the workload says it should.
func TestMetricsAfterWorkload(t *testing.T) {
	n := startNode(t)
	url := "http://" + n.HTTPAddr() + "/metrics"
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const topic, partitions, records = "metered", 3, 300
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	perPartition := map[int32]int{}
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i%17)), Value: []byte(strings.Repeat("v", i%50))})
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		perPartition[r.Record.Partition]++
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	pollCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	for got < records && pollCtx.Err() == nil {
		fs := consumer.PollFetches(pollCtx)
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
	cancel()
	consumer.Close()
	if got != records {
		t.Fatalf("consumed %d of %d records", got, records)
	}

	// A produce to a partition that does not exist is an error of its own.
	bad := kmsg.NewPtrProduceRequest()
	bad.Acks, bad.TimeoutMillis = -1, 5000
	bt := kmsg.NewProduceRequestTopic()
	bt.Topic = topic
	if bt.TopicID, err = txntest.TopicID(ctx, cl, topic); err != nil { // v13 names it by id
		t.Fatal(err)
	}
	bp := kmsg.NewProduceRequestTopicPartition()
	bp.Partition, bp.Records = 99, recordBatch()
	bt.Partitions = append(bt.Partitions, bp)
	bad.Topics = append(bad.Topics, bt)
	resp, err := cl.Broker(1).Request(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to partition 99: %v", kerr.ErrorForCode(code))
	}

	m := scrape(t, url)
	tl := "{topic=" + topic + "}"
	if v := m["strata_topic_records_in_total"+tl]; v != records {
		t.Errorf("records in = %v, want %d", v, records)
	}
	stored := sumOf(m, "strata_log_size_bytes{partition=")
	if v := m["strata_topic_bytes_in_total"+tl]; v == 0 || v != stored {
		t.Errorf("bytes in = %v, want the %v bytes the partitions store", v, stored)
	}
	if v := m["strata_topic_records_out_total"+tl]; v != records {
		t.Errorf("records out = %v, want %d (one consumer read everything once)", v, records)
	}
	if v := m["strata_topic_bytes_out_total"+tl]; v != stored {
		t.Errorf("bytes out = %v, want %v (whole batches, each fetched once)", v, stored)
	}
	for p := range int32(partitions) {
		pl := "{partition=" + strconv.Itoa(int(p)) + ",topic=" + topic + "}"
		if v := m["strata_partition_high_watermark"+pl]; v != float64(perPartition[p]) {
			t.Errorf("partition %d HWM = %v, want %d produced", p, v, perPartition[p])
		}
		if v := m["strata_partition_last_stable_offset"+pl]; v != float64(perPartition[p]) {
			t.Errorf("partition %d LSO = %v, want the HWM %d (no transactions)", p, v, perPartition[p])
		}
		if v, ok := m["strata_partition_open_transactions"+pl]; !ok || v != 0 {
			t.Errorf("partition %d open transactions = %v (present %v), want 0", p, v, ok)
		}
		if v := m["strata_log_end_offset"+pl]; v != float64(perPartition[p]) {
			t.Errorf("partition %d LEO = %v, want %d", p, v, perPartition[p])
		}
		if v, ok := m["strata_log_start_offset"+pl]; !ok || v != 0 {
			t.Errorf("partition %d log start = %v", p, v)
		}
		if v := m["strata_log_segments"+pl]; v != 1 {
			t.Errorf("partition %d segments = %v", p, v)
		}
		if v := m["strata_partition_leader"+pl]; v != 1 {
			t.Errorf("partition %d leader = %v", p, v)
		}
		if perPartition[p] > 0 && m["strata_log_fsync_seconds_count"+pl] == 0 {
			t.Errorf("partition %d: no fsync counted under group commit", p)
		}
	}
	// The log directory's fsync histogram saw the group commits.
	if v := sumOf(m, "strata_log_dir_fsync_seconds_count{dir="); v == 0 {
		t.Error("no fsync in the log directory's histogram under group commit")
	}
	labelled := false
	for k := range m {
		labelled = labelled || strings.HasPrefix(k, "strata_log_dir_fsync_seconds_bucket{dir=/") && strings.HasSuffix(k, string(filepath.Separator)+"logs,le=0.0001}")
	}
	if !labelled {
		t.Error("the log directory's fsync histogram is not labelled with the directory's path")
	}
	for k, want := range map[string]float64{
		"strata_controller_active{}":           1,
		"strata_partitions_offline{}":          0,
		"strata_partitions_under_replicated{}": 0,
		"strata_partitions_led{}":              partitions,
		"strata_request_errors_total{api=Produce,error=UNKNOWN_TOPIC_OR_PARTITION}": 1,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{
		"strata_requests_total{api=Produce}", "strata_requests_total{api=Fetch}", "strata_requests_total{api=Metadata}",
		"strata_request_duration_seconds_count{api=Produce}", "strata_request_duration_seconds_bucket{api=Fetch,le=+Inf}",
		"strata_request_bytes_total{api=Produce}", "strata_response_bytes_total{api=Fetch}", "strata_connections_opened_total{}",
		"go_goroutines{}", "strata_metadata_offset{}",
	} {
		if m[k] <= 0 {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
	if m["strata_request_errors_total{api=Produce,error=NOT_LEADER_FOR_PARTITION}"] != 0 {
		t.Error("produce errors counted on the happy path")
	}

	// A consumer long-polling an empty partition is a parked fetch; closing every
	// client leaves no connection and nothing in flight.
	idle, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		idle.PollFetches(ctx)
	}()
	waitMetric(t, url, "a parked fetch", func(m map[string]float64) bool {
		return m["strata_purgatory_size{operation=fetch}"] >= 1 && m["strata_requests_in_flight{}"] >= 1
	})
	idle.Close()
	<-pollDone
	cl.Close()
	waitMetric(t, url, "every connection closed", func(m map[string]float64) bool {
		return m["strata_connections{}"] == 0 && m["strata_requests_in_flight{}"] == 0 &&
			m["strata_purgatory_size{operation=fetch}"] == 0 && m["strata_purgatory_size{operation=produce}"] == 0
	})
}

func waitMetric(t *testing.T, url, what string, cond func(map[string]float64) bool) {
	t.Helper()
	wait.Within(t, 20*time.Second, what, func() bool { return cond(scrape(t, url)) })
}

// recordBatch is one valid single-record batch.
func recordBatch() []byte {
	rec := kmsg.Record{Value: []byte("x")}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	records := rec.AppendTo(nil)
	b := kmsg.RecordBatch{Magic: 2, Length: int32(61 - 12 + len(records)), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: records}
	return b.AppendTo(nil)
}

// TestConsumerGroupLag: with a group coordinator as the lag source, lag is the
// high-water mark minus the committed offset.
func TestConsumerGroupLag(t *testing.T) {
	n := startNode(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "lagged", 2, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for p, k := range []int{10, 4} {
		for i := range k {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lagged", Partition: int32(p), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	gcfg := group.DefaultConfig()
	gcfg.OffsetsTopicPartitions = 1
	coord := group.New(gcfg, nopStore{}, testLogger())
	defer coord.Close()
	empty := iter.Seq2[group.Record, error](func(func(group.Record, error) bool) {})
	if err := coord.LoadPartitionAt(ctx, 0, 0, empty); err != nil {
		t.Fatal(err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation = "readers", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "lagged"
	for p, off := range []int64{3, 4} {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = int32(p), off, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	commit.Topics = append(commit.Topics, rt)
	for _, p := range coord.OffsetCommit(ctx, commit).Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(p.ErrorCode))
		}
	}

	parts, ok := n.ConsoleConfig().Replicas.(metrics.Partitions)
	if !ok {
		t.Fatal("the node's replicas do not list partitions")
	}
	m := metrics.New(metrics.Config{Partitions: parts, Groups: coord})
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	got := parseText(t, rec.Body)
	for k, want := range map[string]float64{
		"strata_consumer_group_lag{group=readers,partition=0,topic=lagged}": 10 - 3,
		"strata_consumer_group_lag{group=readers,partition=1,topic=lagged}": 4 - 4,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %t), want %v", k, v, ok, want)
		}
	}
}

type nopStore struct{}

func (nopStore) Append(context.Context, int32, int32, []group.Record) (int64, error) { return 0, nil }

// TestGroupLagEndToEnd: a franz-go consumer group reads and commits, more records
// arrive, and the node's own /metrics and console report the difference as lag.
func TestGroupLagEndToEnd(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	versions, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := versions[1]; !ok || v.Err != nil {
		t.Fatalf("ApiVersions: %+v %v", versions, ok)
	} else if _, _, ok := v.KeyVersions(int16(kmsg.FindCoordinator)); !ok {
		t.Skip("SKIPPING: this broker does not serve consumer groups yet (no FindCoordinator)")
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "e2e", 2, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	produceTo := func(p int32, k int) {
		for i := range k {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "e2e", Partition: p, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produceTo(0, 6)
	produceTo(1, 4)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup("e2e-readers"), kgo.ConsumeTopics("e2e"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for got < 10 && pollCtx.Err() == nil {
		got += len(consumer.PollFetches(pollCtx).Records())
	}
	cancel()
	if got != 10 {
		t.Fatalf("the group read %d of 10 records", got)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	produceTo(0, 7)

	url := "http://" + n.HTTPAddr()
	waitMetric(t, url+"/metrics", "lag 7 on partition 0 and 0 on partition 1", func(m map[string]float64) bool {
		p0, ok0 := m["strata_consumer_group_lag{group=e2e-readers,partition=0,topic=e2e}"]
		p1, ok1 := m["strata_consumer_group_lag{group=e2e-readers,partition=1,topic=e2e}"]
		return ok0 && ok1 && p0 == 7 && p1 == 0
	})
	resp, err := http.Get(url + "/console/api/groups/e2e-readers/lag")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"total":7`) {
		t.Fatalf("console lag: %d %s", resp.StatusCode, body)
	}
}
