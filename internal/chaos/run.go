package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/chaos/history"
)

// cluster is what a run drives: a multi-process cluster or an in-process one.
type cluster interface {
	// seeds are how the harness's clients reach the nodes (through the
	// proxies), as a super user on a secured cluster.
	seeds() brokers
	// workloadSeeds are how the workload's clients do, as the principal the
	// ACLs grant what it needs on a secured cluster.
	workloadSeeds() brokers
	// inject applies f, holds it, heals it and says what it did; healthy waits
	// until the topic is fully replicated again (a rolling restart waits for it
	// between nodes).
	inject(f Fault, healthy func(time.Duration) error) (string, error)
	// warmedUp runs once the workload is flowing, before the first fault.
	warmedUp()
	// heal ends every fault: every node running, every link up.
	heal()
	// stopAll stops every node; their logs stay readable by replica.
	stopAll()
	// replica reads a stopped node's copy of topic-partition below end.
	replica(node int32, topic string, partition int32, end int64) (replicaLog, error)
	// httpAddrs are the nodes' HTTP API addresses (not behind the proxies).
	httpAddrs() []string
}

// runConfig is one run.
type runConfig struct {
	name       string
	seed       uint64
	nodes      int
	kinds      []Kind
	faultTime  time.Duration // inject faults for about this long
	maxFaults  int           // and at most this many (0: no limit)
	topic      string
	partitions int32
	interval   time.Duration // between one producer's sends
	// topicConfigs are extra configs of the workload's topics (a tiered run's).
	topicConfigs map[string]string
	// batchMaxBytes bounds the plain producers' batches (0: kgo's default).
	batchMaxBytes int32
	// roles are roles the schedule may pick beyond the usual ones (a
	// transactional run's coordinator).
	roles []Role
	// share adds the share-group workload (sharework.go) on the plain
	// workload's topic; nil: none.
	share *shareConfig
	// script, when set, is the faults to inject, in order, instead of the
	// seeded schedule's.
	script []Fault
	// sends bounds each plain producer's sends (0: no bound).
	sends int
}

// RunResult is what one run injected and what the checks found.
type RunResult struct {
	Name      string
	Seed      uint64
	Nodes     int
	FaultTime time.Duration // from the first fault to the last heal
	Faults    map[Kind]int
	// Events is the resolved schedule: when, what, on which node, how long the
	// cluster took to be fully replicated again.
	Events []string
	Check  history.Result
	// MaxUnavailable is the longest time one partition went without an
	// acknowledged write while faults were being injected.
	MaxUnavailable time.Duration
	// Findings are failures to recover (not healthy in time, group not
	// drained); the anomalies are in Check.
	Findings []string
	// SendErrors counts the errors of sends that were not acknowledged.
	SendErrors map[string]int
	// Share counts what the share-group workload did (nil: none ran).
	Share *history.ShareCounts

	history any // what was checked (a history.History or TxnHistory), kept for a failed run's report
}

// OK reports whether the run found nothing wrong.
func (r *RunResult) OK() bool { return r.Check.OK() && len(r.Findings) == 0 }

// Timeouts of the steps after the faults. Generous: the machine is small and
// shared, and a wait that gives up early is a false alarm.
const (
	healthyTimeout   = 90 * time.Second
	unhealthyTimeout = 15 * time.Second // after a failure to recover, see healthy in run
	drainTimeout     = 90 * time.Second
	warmAcks         = 200 // acknowledged writes before the first fault
)

// run creates the topic, starts the workload, injects faults from the seeded
// schedule, heals, drains and checks. It fails t only when it cannot go on;
// anomalies and findings are in the result for the caller to judge.
func run(t *testing.T, c cluster, cfg runConfig, rec *history.Recorder) RunResult {
	t.Helper()
	res := RunResult{Name: cfg.name, Seed: cfg.seed, Nodes: cfg.nodes, Faults: map[Kind]int{}}
	lap := stopwatch(t)
	adm := newAdmin(t, c.seeds())
	if err := createTopic(adm, cfg.topic, cfg.partitions, 3, cfg.topicConfigs); err != nil {
		t.Fatalf("creating %s: %v", cfg.topic, err)
	}
	ps := newProbes(t, c.seeds())
	healthy := healthCheck(ps, cfg)
	if err := healthy(healthyTimeout); err != nil {
		t.Fatalf("before any fault: %v", err)
	}
	w, err := startWorkload(workloadConfig{seeds: c.workloadSeeds(), topic: cfg.topic, interval: cfg.interval, sends: cfg.sends, batchMaxBytes: cfg.batchMaxBytes}, rec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	var sw *shareWorkload
	if cfg.share != nil {
		if sw, err = startShareWorkload(*cfg.share, adm, c.httpAddrs(), cfg.topic, t.Logf); err != nil {
			t.Fatal(err)
		}
		defer sw.close()
	}
	lap("topic and workload started")
	warmUp(t, c, func() int64 { return w.acked.Load() })
	lap("warm-up")

	ph := injectFaults(t, c, cfg, healthy, &res)
	lap("faults")
	if isTiered(cfg.topicConfigs) {
		if err := waitTiered(c.seeds(), cfg.topic, cfg.partitions, tieredTimeout); err != nil {
			res.Findings = append(res.Findings, err.Error())
		}
	}

	// Drain: producers answered, the group caught up, a fresh full read.
	w.stopProducers(drainTimeout)
	groupEnd, err := endOffsets(adm, cfg.topic, cfg.partitions)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	if err := w.drainGroup(adm, groupEnd, drainTimeout); err != nil {
		res.Findings = append(res.Findings, err.Error())
	}
	w.close()
	end, err := endOffsets(adm, cfg.topic, cfg.partitions)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	final, err := finalRead(c.seeds(), cfg.topic, end, drainTimeout)
	if err != nil {
		t.Fatalf("final read: %v", err)
	}
	isr := settledISRs(t, ps, cfg, &res)
	lap("plain drain and final read")
	sends, polls := rec.Snapshot()
	res.SendErrors = map[string]int{}
	var acks []ack
	for _, s := range sends {
		if s.Outcome != history.OK {
			res.SendErrors[s.Err]++
		} else {
			acks = append(acks, ack{s.Partition, s.At})
		}
	}
	h := history.History{Sends: sends, Polls: polls, Final: final, GroupEnd: groupEnd}
	res.history, res.Check = h, history.Check(h)
	if sw != nil {
		checkShare(c, sw, sends, &res)
		lap("share drain and dead-letter read")
	}
	ph.summarize(&res, acks, cfg.partitions)

	// Log agreement: every in-sync replica, read from its stopped node.
	c.stopAll()
	checkReplicas(c, &res, cfg.topic, cfg.partitions, isr, end, final, false)
	lap("nodes stopped and replicas compared")
	return res
}

// stopwatch returns a function that logs how long the step it names took
// since the previous call: where a run's time goes.
func stopwatch(t *testing.T) func(step string) {
	last := time.Now()
	return func(step string) {
		t.Logf("run: %s took %.1fs", step, time.Since(last).Seconds())
		last = time.Now()
	}
}

// checkShare drains the share-group workload, reads the dead-letter topic and
// adds CheckShare's anomalies and counts to res.
func checkShare(c cluster, sw *shareWorkload, sends []history.Send, res *RunResult) {
	if err := sw.drain(c.seeds(), sends, drainTimeout); err != nil {
		res.Findings = append(res.Findings, "share group: "+err.Error())
	}
	sh := history.ShareHistory{Topic: sw.topic, Group: sw.group, Limit: shareDeliveryLimit, Sends: sends}
	sh.Deliveries, sh.Acks = sw.snapshot()
	var err error
	if sh.DeadLetters, err = readDeadLetters(c.seeds(), sw.dlq, drainTimeout); err != nil {
		res.Findings = append(res.Findings, "reading the dead-letter topic: "+err.Error())
	}
	r, counts := history.CheckShare(sh)
	if res.Check.Counts == nil {
		res.Check.Counts = map[string]int{}
	}
	for class, n := range r.Counts {
		res.Check.Counts[class] += n
	}
	res.Check.Examples = append(res.Check.Examples, r.Examples...)
	res.Share = &counts
	res.history = struct {
		Plain history.History
		Share history.ShareHistory
	}{res.history.(history.History), sh}
}

// healthCheck returns the run's wait for a fully replicated cluster. Once the
// cluster has failed to recover in time, later waits are short: the finding
// is made, and the drain and the checks still have to run.
func healthCheck(ps probes, cfg runConfig) func(time.Duration) error {
	unhealthy := false
	return func(timeout time.Duration) error {
		if unhealthy {
			timeout = min(timeout, unhealthyTimeout)
		}
		_, err := ps.waitHealthy(cfg.topic, cfg.nodes, cfg.partitions, timeout)
		unhealthy = unhealthy || err != nil
		return err
	}
}

// warmUp waits until the workload has warmAcks acknowledged writes, then tells
// the cluster.
func warmUp(t *testing.T, c cluster, acked func() int64) {
	t.Helper()
	if err := waitFor(healthyTimeout, func() error {
		if n := acked(); n < warmAcks {
			return fmt.Errorf("%d acknowledged writes", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("warming up: %v", err)
	}
	c.warmedUp()
}

// phase is what injectFaults did: when it started and ended, and each fault.
type phase struct {
	start, end time.Time
	events     []event
}

type event struct {
	at   time.Time
	text string
}

// ack is one acknowledged write: its partition and when.
type ack struct {
	partition int32
	at        time.Time
}

// injectFaults injects faults from cfg's schedule for cfg.faultTime (at most
// cfg.maxFaults), or cfg.script's faults in order, waiting for a fully
// replicated cluster after each, then heals everything. Faults and findings
// go into res.
func injectFaults(t *testing.T, c cluster, cfg runConfig, healthy func(time.Duration) error, res *RunResult) phase {
	t.Helper()
	next := NewSchedule(cfg.seed, cfg.kinds, cfg.partitions).WithRoles(cfg.roles...).Next
	if cfg.script != nil {
		script := cfg.script
		cfg.faultTime, cfg.maxFaults = time.Duration(math.MaxInt64), len(script)
		next = func() Fault {
			f := script[0]
			script = script[1:]
			return f
		}
	}
	ph := phase{start: time.Now()}
	for time.Since(ph.start) < cfg.faultTime && (cfg.maxFaults == 0 || len(ph.events) < cfg.maxFaults) {
		f := next()
		time.Sleep(f.Gap) // the schedule's quiet time between faults
		at := time.Now()
		what, err := c.inject(f, healthy)
		if err != nil {
			res.Findings = append(res.Findings, fmt.Sprintf("t=%.1fs %s: %v", at.Sub(ph.start).Seconds(), f, err))
			break
		}
		res.Faults[f.Kind]++
		healStart := time.Now()
		err = healthy(healthyTimeout)
		ev := event{at, fmt.Sprintf("t=%5.1fs %s; fully replicated %.1fs after healing", at.Sub(ph.start).Seconds(), what, time.Since(healStart).Seconds())}
		t.Log(ev.text)
		ph.events = append(ph.events, ev)
		if err != nil {
			res.Findings = append(res.Findings, fmt.Sprintf("after %s: %v", what, err))
			break
		}
	}
	c.heal()
	res.FaultTime = time.Since(ph.start)
	if err := healthy(healthyTimeout); err != nil {
		res.Findings = append(res.Findings, fmt.Sprintf("after the final heal: %v", err))
	}
	ph.end = time.Now()
	return ph
}

// summarize adds the events, each with the longest write gap until the next,
// and the phase's longest gap to res.
func (ph phase) summarize(res *RunResult, acks []ack, partitions int32) {
	if res.Check.Counts == nil {
		res.Check.Counts = map[string]int{}
	}
	res.Check.Counts[ReplicaDivergence] = 0 // a class with a count, even when clean
	res.MaxUnavailable = longestGap(acks, partitions, ph.start, ph.end)
	for i, ev := range ph.events {
		until := ph.end
		if i+1 < len(ph.events) {
			until = ph.events[i+1].at
		}
		res.Events = append(res.Events, fmt.Sprintf("%s; longest write gap of a partition until the next fault %.1fs",
			ev.text, longestGap(acks, partitions, ev.at, until).Seconds()))
	}
}

// settledISRs returns each partition's ISR once the cluster is fully
// replicated, or as it is when it does not get there (a finding).
func settledISRs(t *testing.T, ps probes, cfg runConfig, res *RunResult) map[int32][]int32 {
	t.Helper()
	isr, err := ps.waitHealthy(cfg.topic, cfg.nodes, cfg.partitions, unhealthyTimeout)
	if err != nil {
		res.Findings = append(res.Findings, fmt.Sprintf("after the drain: %v", err))
		if isr, err = ps.isrs(cfg.topic); err != nil {
			t.Fatalf("the ISRs after the drain: %v", err)
		}
	}
	return isr
}

// checkReplicas compares every in-sync replica of topic's partitions, read from
// the stopped nodes, with each other and with final (see checkAgreement).
func checkReplicas(c cluster, res *RunResult, topic string, partitions int32, isr map[int32][]int32, end map[int32]int64, final map[int32][]history.Record, committedOnly bool) {
	for p := range partitions {
		logs, errs := map[int32]replicaLog{}, map[int32]error{}
		for _, node := range isr[p] {
			if l, err := c.replica(node, topic, p, end[p]); err != nil {
				errs[node] = err
			} else {
				logs[node] = l
			}
		}
		checkAgreement(&res.Check, topic, p, final[p], logs, errs, committedOnly)
	}
}

// tieredTimeout bounds the wait for a tiered topic to have deleted a prefix
// locally: uploads that failed during the faults back off for up to a minute.
const tieredTimeout = 90 * time.Second

// listOffsets answers ListOffsets at timestamp ts (-2 earliest, -4 earliest
// local, -5 the end of the uploaded part) for every partition of topic.
func listOffsets(cl *kgo.Client, topic string, partitions int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// waitTiered waits until some partition of topic has a local log start above
// its log start (ListOffsets earliest-local above earliest: a prefix uploaded
// and deleted locally, to be read back from the store by the final read), and
// says what it saw when none does in time.
func waitTiered(seeds brokers, topic string, partitions int32, timeout time.Duration) error {
	cl, err := kgo.NewClient(clientOpts(seeds, "chaos-tier-probe")...)
	if err != nil {
		return err
	}
	defer cl.Close()
	list := func(ts int64) (map[int32]int64, error) { return listOffsets(cl, topic, partitions, ts) }
	return waitFor(timeout, func() error {
		earliest, err := list(-2)
		if err != nil {
			return err
		}
		local, err := list(-4)
		if err != nil {
			return err
		}
		for p, l := range local {
			if l > earliest[p] {
				return nil
			}
		}
		return fmt.Errorf("%s: nothing tiered yet: earliest offsets %v, earliest local %v", topic, earliest, local)
	})
}

// isTiered says whether configs make a topic tiered.
func isTiered(configs map[string]string) bool { return configs["remote.storage.enable"] == "true" }

// waitFor polls cond every 100ms until it returns nil or timeout passes.
func waitFor(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newAdmin(t *testing.T, seeds brokers) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(clientOpts(seeds, "chaos-admin")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates a topic with min.insync.replicas=2 and configs.
func createTopic(adm *kadm.Client, topic string, partitions int32, replicas int16, configs map[string]string) error {
	cfgs := map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}
	for k, v := range configs {
		cfgs[k] = kmsg.StringPtr(v)
	}
	return waitFor(healthyTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := adm.CreateTopic(ctx, partitions, replicas, cfgs, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		return nil
	})
}

// probes are one client per node, each asking only its node: a healthy
// cluster is one on which every node agrees, since a node just back from a
// pause or a partition answers from stale metadata for a moment.
type probes []*kgo.Client

func newProbes(t *testing.T, seeds brokers) probes {
	t.Helper()
	var ps probes
	for i, s := range seeds.addrs {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s), kgo.ClientID(fmt.Sprintf("chaos-probe-%d", i+1)), kgo.RequestRetries(0)}, seeds.auth...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		ps = append(ps, cl)
	}
	return ps
}

// partitionView is one partition as one node's metadata shows it.
type partitionView struct {
	leader, epoch int32
	isr, replicas []int32
}

// metadata asks probe i's node alone about topic.
func (ps probes) metadata(i int, topic string) (brokers int, parts map[int32]partitionView, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := ps[i].SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	md := resp.(*kmsg.MetadataResponse)
	parts = map[int32]partitionView{}
	for _, t := range md.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, nil, err
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			parts[p.Partition] = partitionView{p.Leader, p.LeaderEpoch, slices.Sorted(slices.Values(p.ISR)), p.Replicas}
		}
	}
	return len(md.Brokers), parts, nil
}

// waitHealthy waits until every node sees every node as a live broker and
// every partition of topic with a leader and all its replicas in sync, and all
// agree on each partition's leader and epoch. It returns the ISRs.
func (ps probes) waitHealthy(topic string, nodes int, partitions int32, timeout time.Duration) (map[int32][]int32, error) {
	var agreed map[int32]partitionView
	err := waitFor(timeout, func() error {
		agreed = nil
		for i := range ps {
			brokers, parts, err := ps.metadata(i, topic)
			if err != nil {
				return fmt.Errorf("node %d: %w", i+1, err)
			}
			if brokers != nodes {
				return fmt.Errorf("node %d sees %d live brokers of %d", i+1, brokers, nodes)
			}
			if len(parts) != int(partitions) {
				return fmt.Errorf("node %d sees %d partitions of %d", i+1, len(parts), partitions)
			}
			for p, v := range parts {
				if v.leader < 0 || len(v.isr) != len(v.replicas) {
					return fmt.Errorf("node %d: partition %d: leader %d, replicas %v, isr %v", i+1, p, v.leader, v.replicas, v.isr)
				}
			}
			if agreed == nil {
				agreed = parts
				continue
			}
			for p, v := range parts {
				if a := agreed[p]; a.leader != v.leader || a.epoch != v.epoch {
					return fmt.Errorf("partition %d: node 1 sees leader %d epoch %d, node %d leader %d epoch %d", p, a.leader, a.epoch, i+1, v.leader, v.epoch)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	isr := map[int32][]int32{}
	for p, v := range agreed {
		isr[p] = v.isr
	}
	return isr, nil
}

// isrs returns each partition's ISR as the first node that answers sees it,
// fully replicated or not.
func (ps probes) isrs(topic string) (map[int32][]int32, error) {
	var errs []error
	for i := range ps {
		_, parts, err := ps.metadata(i, topic)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		isr := map[int32][]int32{}
		for p, v := range parts {
			isr[p] = v.isr
		}
		return isr, nil
	}
	return nil, errors.Join(errs...)
}

// endOffsets returns every partition's end offset (its high-water mark).
func endOffsets(adm *kadm.Client, topic string, partitions int32) (map[int32]int64, error) {
	out := map[int32]int64{}
	err := waitFor(drainTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		for p := range partitions {
			o, ok := ends.Lookup(topic, p)
			if !ok || o.Err != nil {
				return fmt.Errorf("partition %d: %v", p, o.Err)
			}
			out[p] = o.Offset
		}
		return nil
	})
	return out, err
}

// finalRead reads every partition of topic from its start to end with a fresh
// consumer.
func finalRead(seeds brokers, topic string, end map[int32]int64, timeout time.Duration) (map[int32][]history.Record, error) {
	recs, err := finalReadWith(seeds, topic, end, timeout)
	if err != nil {
		return nil, err
	}
	out := map[int32][]history.Record{}
	for p, rs := range recs {
		for _, r := range rs {
			out[p] = append(out[p], history.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		}
	}
	return out, nil
}

// finalReadWith is finalRead with the records whole (headers too).
func finalReadWith(seeds brokers, topic string, end map[int32]int64, timeout time.Duration) (map[int32][]*kgo.Record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range end {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(clientOpts(seeds, "chaos-final-read"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read up to %v of %v in %v", next, end, timeout)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				out[r.Partition] = append(out[r.Partition], r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, nil
}

// longestGap is the longest stretch within [from, to] in which one of the
// partitions had no acknowledged write.
func longestGap(all []ack, partitions int32, from, to time.Time) time.Duration {
	acks := map[int32][]time.Time{}
	for _, a := range all {
		if !a.at.Before(from) && !a.at.After(to) {
			acks[a.partition] = append(acks[a.partition], a.at)
		}
	}
	var longest time.Duration
	for p := range partitions {
		ts := acks[p]
		slices.SortFunc(ts, time.Time.Compare)
		prev := from
		for _, at := range append(ts, to) {
			longest = max(longest, at.Sub(prev))
			prev = at
		}
	}
	return longest
}

// keepLogsOnFailure copies the node logs at paths into a directory that
// outlives the test when t fails, and says where.
func keepLogsOnFailure(t *testing.T, paths []string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", "chaos-logs-")
		if err != nil {
			t.Log(err)
			return
		}
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
			}
		}
		t.Logf("node logs kept in %s", dir)
	})
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.SplitAfter(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
