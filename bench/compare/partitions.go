package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/bench"
)

// The many-partitions rows (issue 19, goal 6), -partitions N: once per system,
// on the pairing's fresh brokers (1 node, or -nodes with every partition on
// every node), each step bounded:
//
//  1. RSS of the broker processes, then a CreateTopics of one topic of N
//     partitions (in steps of partitionsPerRequest: CreateTopics, then
//     CreatePartitions); the time from the request until a Metadata answer shows a
//     leader for every partition; the time until every node's log dirs
//     (DescribeLogDirs) hold every partition's replica; RSS again, and the
//     growth per partition;
//     then the time until every partition has taken a record (acks=all: its
//     leader and followers have created its log), and the growth per
//     partition again.
//  2. Metadata latency: p50 and p99 of back-to-back requests for every topic
//     and for one one-partition topic, on one connection.
//  3. Produce spread over min(N, 1000) partitions: 1 KiB records, acks=all,
//     franz-go with its 10 ms linger and a round-robin partitioner (every
//     produce request names many partitions); records/s and p99.
//  4. One consumer reads those partitions back from the start (records/s);
//     then another polls them all from their end for 2 s while nothing is
//     produced: the Fetch request bytes it writes (the first, a full fetch
//     naming every partition, and the median of the rest) show whether the
//     broker gave it a KIP-227 incremental fetch session (the later ones then
//     name no partition).
//  5. Restart of one broker (the last): SIGTERM, wait for its exit (timed;
//     one still running after partitionsStopBound is killed and the step
//     fails), exec it again with the same command line; the time from that
//     exec to its first
//     Metadata answer and to a record acknowledged (acks=all) on the last
//     partition of the N-partition topic; with several nodes, also until the
//     restarted broker is back in the ISR of every partition.

// partitionsSpread is how many partitions the produce and consume steps use.
const partitionsSpread = 1000

// Bounds of the steps: the whole workload at 10,000 partitions stays within
// about 20 minutes per system even when a step runs into its bound. The
// session-9 bounds (90 s to create, 30 s to drain the produce, 120 s to
// restart) were too short for a three-node Kafka on the loaded test machine:
// it took 285 s until every partition had taken a record, and 30 s after the
// produce step's 3 s it still had 2,802 of 50,001 records unacknowledged.
const (
	partitionsCreateBound   = 5 * time.Minute
	partitionsMetadataBound = 10 * time.Second
	partitionsMetadataReqs  = 200
	partitionsDrainBound    = 2 * time.Minute
	partitionsReadBound     = 60 * time.Second
	partitionsStopBound     = 5 * time.Minute
	partitionsRestartBound  = 5 * time.Minute
)

func runPartitions(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	n := o.extras.partitions
	spread := min(n, partitionsSpread)
	t := &extraTable{
		Title: fmt.Sprintf("Many partitions: a topic of %d partitions, produce and consume over %d, restart of one broker", n, spread),
		Note: "One run per system on the pairing's brokers. RSS per partition is the growth of the broker processes' " +
			"RSS (summed over nodes) from before the create to after it (every replica's log created: each node's " +
			"DescribeLogDirs lists every partition), over the partition count; with a record in each, to after every partition took one. Fetch request bytes are what an idle " +
			"consumer of every spread partition wrote: its first Fetch to a broker names every partition it reads " +
			"there; with a KIP-227 fetch session the later ones name none. The restart clocks start at the exec.",
	}
	p.Extras = append(p.Extras, t)
	fetchBytes := map[string][2]float64{}
	for _, sys := range []string{"strata", "kafka"} {
		b := brokers[sys]
		if err := b.alive(); err != nil {
			return err
		}
		syscall.Sync()
		ms, fb, err := partitionsRun(ctx, o, b, n, spread)
		// What was measured before a step failed stands.
		row := fmt.Sprintf("%d partitions", n)
		t.add(row, sys, 1, ms, nil)
		if err != nil {
			t.add(row, sys, 1, nil, err)
		}
		if fb[0] > 0 {
			fetchBytes[sys] = fb
		}
		var parts []string
		for _, m := range ms {
			parts = append(parts, fmt.Sprintf("%s %s", figure(m.value), m.metric))
		}
		logf("[%s] %d partitions, %s: %s%s", p.Name, n, sys, strings.Join(parts, ", "), errSuffix(err))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	t.Summary = append(t.Summary, fetchSessionSummary(spread, fetchBytes))
	return nil
}

// fetchSessionSummary says whether each idle consumer's later Fetch requests
// were incremental: much smaller than the first, which named every partition.
func fetchSessionSummary(partitions int, bytes map[string][2]float64) string {
	say := func(sys string) string {
		fb, ok := bytes[sys]
		if !ok {
			return "no fetches recorded"
		}
		first, rest := fb[0], fb[1]
		verdict := "incremental (later requests under a tenth of the first)"
		if rest <= 0 || rest*10 > first {
			verdict = "**not incremental**"
		}
		return fmt.Sprintf("first %s B, median of the rest %s B: %s", figure(first), figure(rest), verdict)
	}
	return fmt.Sprintf("Fetch requests of an idle consumer of %d partitions: Strata %s; Kafka %s.", partitions, say("strata"), say("kafka"))
}

// partitionsRun is the whole workload against one system. It returns what it
// measured up to the first failing step, and the consumer's first and median
// later Fetch request sizes.
func partitionsRun(ctx context.Context, o options, b *system, n, spread int) (ms []measure, fetchBytes [2]float64, err error) {
	rf := int16(o.nodes)
	big, one, spreadTopic := fmt.Sprintf("scale-%d", n), "scale-one", fmt.Sprintf("scale-spread-%d", spread)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.ClientID("strata-vs-kafka-partitions"))
	if err != nil {
		return nil, fetchBytes, err
	}
	defer cl.Close()

	rssBefore, _, err := b.memory()
	if err != nil {
		return nil, fetchBytes, err
	}
	began := time.Now()
	took, err := createLeaded(ctx, cl, big, int32(n), rf)
	if err != nil {
		return nil, fetchBytes, err
	}
	ms = append(ms, measure{metric: "create until every partition has a leader, s", value: took.Seconds(), lowerIsBetter: true})
	// Both systems show a leader before every follower has created its
	// replica's log (session 16: 3 s after the leaders showed, each of three
	// Strata nodes had opened 1,041-1,504 of its 5,000 logs), so RSS is read
	// once every node's log dirs hold every partition.
	if err := waitReplicas(ctx, replicaCounter(kadm.NewClient(cl), big), o.nodes, n); err != nil {
		return ms, fetchBytes, err
	}
	ms = append(ms, measure{metric: "create until every replica's log exists, s", value: time.Since(began).Seconds(), lowerIsBetter: true})
	rssAfter, _, err := b.memory()
	if err != nil {
		return ms, fetchBytes, err
	}
	ms = append(ms,
		measure{metric: "RSS before create, MiB", value: float64(rssBefore) / 1024, lowerIsBetter: true},
		measure{metric: "RSS after create, MiB", value: float64(rssAfter) / 1024, lowerIsBetter: true},
		measure{metric: "RSS per partition, KiB", value: float64(rssAfter-rssBefore) / float64(n), lowerIsBetter: true})
	// A Kafka broker shows a new partition's leader before it has created the
	// partition's log: it creates them one after another on its metadata
	// thread (30-60 a second per broker on the loaded test machine), and a
	// topic created later is unknown to it until it is done. Every partition
	// takes a record here, so the later steps do not run against brokers still
	// creating logs (session 9's Kafka ran out of priming's 2 minutes on the
	// spread topic so).
	if err := primeWithin(ctx, partitionsCreateBound, b.seeds, big, int32(n), rf, nil); err != nil {
		return ms, fetchBytes, fmt.Errorf("writing every partition of %s: %w", big, err)
	}
	ms = append(ms, measure{metric: "create until every partition took an acks=all record, s", value: time.Since(began).Seconds(), lowerIsBetter: true})
	rssWritten, _, err := b.memory()
	if err != nil {
		return ms, fetchBytes, err
	}
	ms = append(ms, measure{metric: "RSS per partition with a record in each, KiB", value: float64(rssWritten-rssBefore) / float64(n), lowerIsBetter: true})

	if _, err := createLeaded(ctx, cl, one, 1, rf); err != nil {
		return ms, fetchBytes, err
	}
	for _, q := range []struct {
		name   string
		topics []string
	}{{"all topics", nil}, {"one topic", []string{one}}} {
		lat, err := metadataLatency(ctx, cl, q.topics)
		if err != nil {
			return ms, fetchBytes, fmt.Errorf("metadata of %s: %w", q.name, err)
		}
		ms = append(ms,
			measure{metric: "Metadata of " + q.name + ", p50 ms", value: lat[0], lowerIsBetter: true},
			measure{metric: "Metadata of " + q.name + ", p99 ms", value: lat[1], lowerIsBetter: true})
	}

	prod, err := spreadProduce(ctx, o, b.seeds, spreadTopic, int32(spread))
	if err != nil {
		return ms, fetchBytes, fmt.Errorf("produce over %d partitions: %w", spread, err)
	}
	ms = append(ms,
		measure{metric: fmt.Sprintf("produce over %d partitions, records/s", spread), value: prod.RecordsPerSec},
		measure{metric: fmt.Sprintf("produce over %d partitions, p99 ms", spread), value: prod.Latency.P99, lowerIsBetter: true})

	cons, err := spreadConsume(ctx, o, b.seeds, spreadTopic, int32(spread), prod.Records+int64(spread))
	if err != nil {
		return ms, fetchBytes, fmt.Errorf("consume of %d partitions: %w", spread, err)
	}
	ms = append(ms, measure{metric: fmt.Sprintf("consume of %d partitions, records/s", spread), value: cons.RecordsPerSec})
	fetches, err := idleFetches(ctx, b.seeds, spreadTopic, int32(spread))
	if err != nil {
		return ms, fetchBytes, fmt.Errorf("idle consumer of %d partitions: %w", spread, err)
	}
	if len(fetches) < 2 {
		return ms, fetchBytes, fmt.Errorf("idle consumer of %d partitions: %d fetches in %s", spread, len(fetches), idleFetchFor)
	}
	fetchBytes = [2]float64{float64(fetches[0]), medianInt(fetches[1:])}
	ms = append(ms,
		measure{metric: "idle consumer: first Fetch request, bytes", value: fetchBytes[0], lowerIsBetter: true},
		measure{metric: "idle consumer: later Fetch requests, median bytes", value: fetchBytes[1], lowerIsBetter: true})

	rs, err := restartLast(ctx, b, big, int32(n), o.nodes)
	ms = append(ms, rs...)
	return ms, fetchBytes, err
}

// createLeaded creates topic and returns the time from the request until a
// Metadata answer shows a leader for every partition.
func createLeaded(ctx context.Context, cl *kgo.Client, topic string, partitions int32, rf int16) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, partitionsCreateBound)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(partitionsCreateBound.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, min(partitions, partitionsPerRequest), rf
	req.Topics = append(req.Topics, rt)
	began := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		// A create that outlived the request's timeout still goes on.
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.RequestTimedOut) {
			return 0, fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	for have := min(partitions, partitionsPerRequest); have < partitions; {
		have = min(partitions, have+partitionsPerRequest)
		if err := growTopic(ctx, cl, topic, have); err != nil {
			return 0, err
		}
	}
	seen := 0 // partitions with a leader in the last answer
	for {
		led, err := countPartitions(ctx, cl, topic, leaded)
		if err == nil && led == int(partitions) {
			return time.Since(began), nil
		}
		if err == nil {
			seen = led
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s: %d of %d partitions had a leader in the last answer within %s (last error: %v)", topic, seen, partitions, partitionsCreateBound, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process's state
	}
}

// replicaCounts is how many partitions of a topic each broker's log dirs
// hold, by broker id.
type replicaCounts map[int32]int

// replicaCounter counts topic's replicas on every broker with a
// DescribeLogDirs of each: a broker lists a partition there once it has
// created the partition's log.
func replicaCounter(adm *kadm.Client, topic string) func(context.Context) (replicaCounts, error) {
	return func(ctx context.Context) (replicaCounts, error) {
		all, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			return nil, err
		}
		counts := replicaCounts{}
		for broker, dirs := range all {
			counts[broker] = 0
			for _, d := range dirs {
				if d.Err != nil {
					return nil, fmt.Errorf("broker %d, log dir %s: %w", broker, d.Dir, d.Err)
				}
				counts[broker] += len(d.Topics[topic])
			}
		}
		return counts, nil
	}
}

// everyReplica: brokers answered and each holds every one of partitions
// (every partition is on every node: its replication factor is the node count).
func (c replicaCounts) everyReplica(brokers, partitions int) bool {
	if len(c) != brokers {
		return false
	}
	for _, n := range c {
		if n != partitions {
			return false
		}
	}
	return true
}

// waitReplicas polls count until every one of brokers holds every one of
// partitions, for up to partitionsCreateBound.
func waitReplicas(ctx context.Context, count func(context.Context) (replicaCounts, error), brokers, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, partitionsCreateBound)
	defer cancel()
	var last replicaCounts // the last answer
	for {
		c, err := count(ctx)
		if err == nil && c.everyReplica(brokers, partitions) {
			return nil
		}
		if err == nil {
			last = c
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not every one of %d brokers held the logs of all %d partitions within %s: the last answer's counts by broker %v (last error: %v)", brokers, partitions, partitionsCreateBound, map[int32]int(last), err)
		}
		time.Sleep(100 * time.Millisecond) // polling another process's state
	}
}

// partitionsPerRequest bounds the partitions one CreateTopics or
// CreatePartitions request adds: Kafka's controller refuses a request that
// would write more than 10,000 metadata records (POLICY_VIOLATION), so a
// bigger topic is created in steps, on both systems alike.
const partitionsPerRequest = 5000

// growTopic raises topic's partition count to total.
func growTopic(ctx context.Context, cl *kgo.Client, topic string, total int32) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(partitionsCreateBound.Milliseconds())
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, total
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("growing %s to %d partitions: %w", topic, total, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.RequestTimedOut) {
			return fmt.Errorf("growing %s to %d partitions: %w", topic, total, err)
		}
	}
	return nil
}

// countPartitions is how many partitions of topic a Metadata answer from r
// (a client: any broker; one broker) shows with which true.
func countPartitions(ctx context.Context, r kmsg.Requestor, topic string, which func(kmsg.MetadataResponseTopicPartition) bool) (int, error) {
	resp, err := metadataRequest(topic).RequestWith(ctx, r)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, err
		}
		for _, p := range t.Partitions {
			if which(p) {
				n++
			}
		}
	}
	return n, nil
}

// leaded: the partition has a leader and no error.
func leaded(p kmsg.MetadataResponseTopicPartition) bool { return p.ErrorCode == 0 && p.Leader >= 0 }

// metadataRequest asks about topics (none: every topic).
func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// metadataLatency sends up to partitionsMetadataReqs Metadata requests for
// topics (nil: every topic) one after another to the first seed broker and
// returns their p50 and p99 in milliseconds.
func metadataLatency(ctx context.Context, cl *kgo.Client, topics []string) ([2]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, partitionsMetadataBound)
	defer cancel()
	var took []time.Duration
	for range partitionsMetadataReqs {
		req := metadataRequest(topics...)
		began := time.Now()
		_, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			if ctx.Err() != nil && len(took) >= 10 {
				break // the bound: what was measured so far stands
			}
			return [2]float64{}, err
		}
		took = append(took, time.Since(began))
	}
	return [2]float64{ms(percentile(took, 0.50)), ms(percentile(took, 0.99))}, nil
}

// percentile of durations (nearest rank); 0 if there are none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func medianInt(vs []int) float64 {
	f := make([]float64, len(vs))
	for i, v := range vs {
		f[i] = float64(v)
	}
	return median(f)
}

// spreadProduce produces 1 KiB records round-robin over a fresh topic of
// partitions partitions for -duration.
func spreadProduce(ctx context.Context, o options, seeds []string, topic string, partitions int32) (bench.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, primeTimeout+o.duration+partitionsDrainBound+time.Minute)
	defer cancel()
	if err := primePartitions(ctx, seeds, topic, partitions, int16(o.nodes)); err != nil {
		return bench.Result{}, err
	}
	return bench.Produce(ctx, bench.Config{
		Brokers: seeds, Topic: topic, Partitions: partitions, ReplicationFactor: int16(o.nodes),
		RecordSize: 1024, Duration: o.duration, Acks: bench.AcksAll, Compression: "none",
		Producers: 1, Consumers: 1, Linger: bench.DefaultLinger, DrainTimeout: partitionsDrainBound,
		ClientOpts: []kgo.Opt{kgo.ClientID("strata-vs-kafka"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())},
	})
}

// spreadConsume reads count records of topic from the start with one consumer.
func spreadConsume(ctx context.Context, o options, seeds []string, topic string, partitions int32, count int64) (bench.Result, error) {
	res, err := bench.Consume(ctx, bench.Config{
		Brokers: seeds, Topic: topic, Partitions: partitions, ReplicationFactor: int16(o.nodes), RecordSize: 1024,
		Count: count, Duration: partitionsReadBound, Acks: bench.AcksAll, Compression: "none",
		Producers: 1, Consumers: 1,
		ClientOpts: []kgo.Opt{kgo.ClientID("strata-vs-kafka")},
	})
	if err == nil && res.Records < count {
		err = fmt.Errorf("read %d of %d records within %s", res.Records, count, partitionsReadBound)
	}
	return res, err
}

// idleFetchFor is how long idleFetches polls.
const idleFetchFor = 2 * time.Second

// idleFetches polls every partition of topic from its end for idleFetchFor,
// with 100 ms long polls, and returns the sizes of the Fetch requests the
// consumer wrote, in order. Nothing is produced meanwhile, so with a fetch
// session every request after the first (which names every partition) names
// none; without one each names every partition again.
func idleFetches(ctx context.Context, seeds []string, topic string, partitions int32) ([]int, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtEnd()
	}
	var fetches fetchRecorder
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("strata-vs-kafka-idle"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.WithHooks(&fetches))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, idleFetchFor)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return nil, fmt.Errorf("partition %d: %w", fe.Partition, fe.Err)
			}
		}
	}
	return fetches.sizes(), nil
}

// fetchRecorder is a franz-go hook that keeps the size of every Fetch request
// a client writes (its connections call it concurrently).
type fetchRecorder struct {
	mu  sync.Mutex
	all []int
}

func (f *fetchRecorder) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, err error) {
	if key != int16(kmsg.Fetch) || err != nil {
		return
	}
	f.mu.Lock()
	f.all = append(f.all, bytesWritten)
	f.mu.Unlock()
}

func (f *fetchRecorder) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

// restartLast restarts the system's last broker and measures how long it
// takes to serve again.
func restartLast(ctx context.Context, b *system, topic string, partitions int32, nodes int) ([]measure, error) {
	ctx, cancel := context.WithTimeout(ctx, partitionsStopBound+partitionsRestartBound+time.Minute)
	defer cancel()
	seed := b.seeds[len(b.seeds)-1]
	nodeID := int32(len(b.seeds))
	stopping := time.Now()
	began, err := b.restart(ctx, len(b.seeds)-1, partitionsStopBound)
	if err != nil {
		return nil, fmt.Errorf("restarting %s: %w", seed, err)
	}
	ms := []measure{{metric: "restart: SIGTERM to exit, s", value: began.Sub(stopping).Seconds(), lowerIsBetter: true}}
	deadline := began.Add(partitionsRestartBound)
	for {
		if err := probe(ctx, seed, 1); err == nil {
			ms = append(ms, measure{metric: "restart: exec to first Metadata, s", value: time.Since(began).Seconds(), lowerIsBetter: true})
			break
		}
		if err := b.alive(); err != nil {
			return ms, err
		}
		if time.Now().After(deadline) {
			return ms, fmt.Errorf("%s answered no Metadata within %s of its restart", seed, partitionsRestartBound)
		}
		time.Sleep(10 * time.Millisecond) // polling a process we cannot be told about
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.ClientID("strata-vs-kafka-restart"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(time.Until(deadline)))
	if err != nil {
		return ms, err
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topic, Partition: partitions - 1, Value: []byte("after restart")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return ms, fmt.Errorf("producing to %s partition %d after the restart: %w", topic, partitions-1, err)
	}
	ms = append(ms, measure{metric: "restart: exec to produce on the last partition, s", value: time.Since(began).Seconds(), lowerIsBetter: true})
	if nodes == 1 {
		return ms, nil
	}
	for {
		in, err := countPartitions(ctx, cl, topic, func(p kmsg.MetadataResponseTopicPartition) bool { return slices.Contains(p.ISR, nodeID) })
		if err == nil && in == int(partitions) {
			ms = append(ms, measure{metric: "restart: exec to back in every ISR, s", value: time.Since(began).Seconds(), lowerIsBetter: true})
			return ms, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return ms, fmt.Errorf("node %d was back in the ISR of %d of %d partitions within %s (last error: %v)", nodeID, in, partitions, partitionsRestartBound, err)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state
	}
}

// restart stops broker i (SIGTERM, then waits for its exit) and starts it
// again with the command line it had; it returns when the new process was
// started. A broker that has not exited grace after the SIGTERM is killed and
// not started again: its start would be a recovery, not a restart (a loaded
// Kafka with 11,000 partitions wrote a producer snapshot per partition for
// more than 45 s, and then recovered every log for more than 5 minutes).
func (s *system) restart(ctx context.Context, i int, grace time.Duration) (time.Time, error) {
	if len(s.procs) == len(s.seeds) {
		// One process per broker, started by this harness.
		old := s.procs[i]
		if !old.stopWithin(grace) {
			return time.Time{}, fmt.Errorf("%s did not exit within %s of SIGTERM (killed)", old.name, grace)
		}
		began := time.Now()
		p, err := spawn(old.name, old.logPath+".restart", old.bin, old.args...)
		if err != nil {
			return began, err
		}
		s.procs[i] = p
		return began, nil
	}
	// A strata dev cluster: the node is a child of the dev cluster process.
	pid, args, err := s.brokerByAddr(s.seeds[i])
	if err != nil {
		return time.Time{}, err
	}
	if err := stopPID(ctx, pid, grace); err != nil {
		return time.Time{}, err
	}
	began := time.Now()
	logPath := s.procs[0].logPath + fmt.Sprintf(".node-%d.restart", i+1)
	p, err := spawn(fmt.Sprintf("strata node %d (restarted)", i+1), logPath, args[0], args[1:]...)
	if err != nil {
		return began, err
	}
	s.procs = append(s.procs, p)
	devPIDs := s.pids
	s.pids = func() []int {
		var out []int
		for _, q := range devPIDs() {
			if q != pid {
				out = append(out, q)
			}
		}
		return append(out, p.cmd.Process.Pid)
	}
	return began, nil
}

// brokerByAddr finds the broker process listening on addr (a strata server's
// --kafka-addr) and returns its pid and command line.
func (s *system) brokerByAddr(addr string) (int, []string, error) {
	for _, pid := range s.pids() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		for j := 0; j+1 < len(args); j++ {
			if args[j] == "--kafka-addr" && args[j+1] == addr {
				return pid, args, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no broker process listens on %s", addr)
}

// stopPID sends SIGTERM to pid (not this process's child) and waits until it
// has exited; after grace it sends SIGKILL and returns an error, as
// restart's own processes.
func stopPID(ctx context.Context, pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	kill := time.Now().Add(grace)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie its parent has yet to reap.
		if err != nil || strings.Contains(string(data), ") Z ") {
			return nil
		}
		if time.Now().After(kill) {
			syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("pid %d did not exit within %s of SIGTERM (killed)", pid, grace)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond) // polling a process we cannot wait for
	}
}
