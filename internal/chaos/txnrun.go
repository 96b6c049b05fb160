package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/chaos/history"
)

// Shapes of a transactional run.
const (
	txnOutputPartitions = 2
	txnTimeout          = 10 * time.Second // transaction.timeout.ms of its clients
	// stableTimeout bounds the wait for every last stable offset to reach its
	// high-water mark after healing: a transaction its producer left open is
	// aborted by the coordinator after txnTimeout.
	stableTimeout = txnTimeout + drainTimeout
)

// runTxn is run for the transactional workload: transactions over cfg.topic's
// partitions, read_committed readers, and a copy stage into cfg.topic-out that
// commits its input offsets in its transactions. After the faults it waits for
// every partition's LSO to reach its HWM, reads both topics with
// read_committed from offset 0, checks the history with history.CheckTxn and
// compares the replicas of both topics.
func runTxn(t *testing.T, c cluster, cfg runConfig) RunResult {
	t.Helper()
	res := RunResult{Name: cfg.name, Seed: cfg.seed, Nodes: cfg.nodes, Faults: map[Kind]int{}}
	adm := newAdmin(t, c.seeds())
	wcfg := txnConfig{seeds: c.workloadSeeds(), topic: cfg.topic, partitions: cfg.partitions, timeout: txnTimeout}.withDefaults()
	if isTiered(cfg.topicConfigs) {
		wcfg.keyBytes = 1 << 10
	}
	if err := createTopic(adm, cfg.topic, cfg.partitions, 3, cfg.topicConfigs); err != nil {
		t.Fatalf("creating %s: %v", cfg.topic, err)
	}
	if err := createTopic(adm, wcfg.output, txnOutputPartitions, 3, nil); err != nil {
		t.Fatalf("creating %s: %v", wcfg.output, err)
	}
	ps := newProbes(t, c.seeds())
	healthy := healthCheck(ps, cfg)
	if err := healthy(healthyTimeout); err != nil {
		t.Fatalf("before any fault: %v", err)
	}
	rec := &txnRecorder{}
	w, err := startTxnWorkload(wcfg, rec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	warmUp(t, c, func() int64 { return w.committed.Load() * int64(wcfg.writes) })

	ph := injectFaults(t, c, cfg, healthy, &res)
	if isTiered(cfg.topicConfigs) {
		if err := waitTiered(c.seeds(), cfg.topic, cfg.partitions, tieredTimeout); err != nil {
			res.Findings = append(res.Findings, err.Error())
		}
	}

	// Drain: every producer ends its transaction, the readers stop, every
	// transaction left open is ended by its coordinator, the copy stage
	// catches up with what was committed.
	w.stopProducers()
	w.stopReaders()
	h := history.TxnHistory{}
	var finding error
	if h.StableEnd, h.End, finding = waitStable(adm, cfg.topic, cfg.partitions, stableTimeout); finding != nil {
		res.Findings = append(res.Findings, finding.Error())
	}
	var sentinels map[int32]int64
	if h.Final, sentinels, finding = readCommitted(c.seeds(), cfg.topic, cfg.partitions, drainTimeout); finding != nil {
		res.Findings = append(res.Findings, "reading "+cfg.topic+": "+finding.Error())
	} else {
		res.Findings = append(res.Findings, checkEveryOffset(c.seeds(), cfg.topic, cfg.partitions, sentinels, drainTimeout)...)
	}
	copied := map[int32]int64{} // one past each partition's last committed input
	for p, recs := range h.Final {
		if len(recs) > 0 {
			copied[p] = recs[len(recs)-1].Offset + 1
		}
	}
	if err := drainCommitted(adm, wcfg.group, cfg.topic, copied, drainTimeout); err != nil {
		res.Findings = append(res.Findings, fmt.Sprintf("the copy stage did not catch up: %v", err))
	}
	w.stopCopiers()
	if h.CopyCommitted, err = committedOffsets(adm, wcfg.group, cfg.topic); err != nil {
		t.Fatalf("the copy stage's offsets: %v", err)
	}
	_, outEnd, finding := waitStable(adm, wcfg.output, txnOutputPartitions, stableTimeout)
	if finding != nil {
		res.Findings = append(res.Findings, finding.Error())
	}
	if h.Output, sentinels, finding = readCommitted(c.seeds(), wcfg.output, txnOutputPartitions, drainTimeout); finding != nil {
		res.Findings = append(res.Findings, "reading "+wcfg.output+": "+finding.Error())
	} else {
		res.Findings = append(res.Findings, checkEveryOffset(c.seeds(), wcfg.output, txnOutputPartitions, sentinels, drainTimeout)...)
	}
	h.Output = withoutSentinels(h.Output)
	h.Txns, h.Polls = rec.snapshot()
	res.history = h
	res.Check = history.CheckTxn(h)
	res.SendErrors = map[string]int{}
	var acks []ack
	for _, tx := range h.Txns {
		if tx.Outcome != history.TxnCommitted {
			res.SendErrors[tx.Outcome.String()+": "+tx.Err]++
			continue
		}
		for _, wr := range tx.Writes {
			acks = append(acks, ack{wr.Partition, tx.At})
		}
	}
	ph.summarize(&res, acks, cfg.partitions)

	isr := settledISRs(t, ps, cfg, &res)
	outISR, err := ps.isrs(wcfg.output)
	if err != nil {
		t.Fatalf("the ISRs of %s: %v", wcfg.output, err)
	}
	c.stopAll()
	checkReplicas(c, &res, cfg.topic, cfg.partitions, isr, h.End, h.Final, true)
	checkReplicas(c, &res, wcfg.output, txnOutputPartitions, outISR, outEnd, h.Output, true)
	return res
}

// waitStable waits until every partition's last stable offset equals its
// high-water mark and returns both; when they do not meet in time it returns
// the last ones seen and says so.
func waitStable(adm *kadm.Client, topic string, partitions int32, timeout time.Duration) (stable, end map[int32]int64, err error) {
	err = waitFor(timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		stables, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		s, e := map[int32]int64{}, map[int32]int64{}
		for p := range partitions {
			eo, ok1 := ends.Lookup(topic, p)
			so, ok2 := stables.Lookup(topic, p)
			if !ok1 || !ok2 || eo.Err != nil || so.Err != nil {
				return fmt.Errorf("partition %d: %v, %v", p, eo.Err, so.Err)
			}
			s[p], e[p] = so.Offset, eo.Offset
		}
		stable, end = s, e
		for p := range partitions {
			if s[p] != e[p] {
				return fmt.Errorf("%s-%d: last stable offset %d, high-water mark %d", topic, p, s[p], e[p])
			}
		}
		return nil
	})
	if err != nil && end == nil {
		return nil, nil, fmt.Errorf("listing the offsets of %s: %w", topic, err)
	}
	if err != nil {
		return stable, end, fmt.Errorf("hanging transactions: %w", err)
	}
	return stable, end, nil
}

// readCommitted reads every partition of topic with read_committed from
// offset 0. A read_committed reader cannot tell where a partition ends (the
// last offsets may be markers or aborted records it never returns), so it first
// appends a non-transactional sentinel to each partition and reads up to it; the
// sentinels are left out of what it returns; their offsets are returned too.
func readCommitted(seeds brokers, topic string, partitions int32, timeout time.Duration) (map[int32][]history.Record, map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pr, err := kgo.NewClient(append(clientOpts(seeds, "chaos-sentinel"),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)...)
	if err != nil {
		return nil, nil, err
	}
	defer pr.Close()
	sentinel := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		r, err := pr.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s%s-%d", sentinelPrefix, topic, p))}).First()
		if err != nil {
			return nil, nil, fmt.Errorf("writing the sentinel of partition %d: %w", p, err)
		}
		sentinel[p] = r.Offset
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(clientOpts(seeds, "chaos-final-read"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	out := map[int32][]history.Record{}
	reached := map[int32]bool{}
	for len(reached) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, sentinel, fmt.Errorf("read %d of %d partitions up to their sentinels in %v", len(reached), partitions, timeout)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Offset < sentinel[r.Partition]:
				out[r.Partition] = append(out[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value)})
			case r.Offset == sentinel[r.Partition]:
				reached[r.Partition] = true
			}
		})
	}
	return out, sentinel, nil
}

// sentinelPrefix starts the value of every sentinel readCommitted writes.
const sentinelPrefix = "sentinel-"

// withoutSentinels drops the records that the copy stage copied from the
// input's sentinels.
func withoutSentinels(recs map[int32][]history.Record) map[int32][]history.Record {
	for p, rs := range recs {
		recs[p] = slices.DeleteFunc(rs, func(r history.Record) bool { return strings.HasPrefix(r.Value, sentinelPrefix) })
	}
	return recs
}

// txnCoordinator is the node coordinating the transactions of the first
// transactional producer.
func txnCoordinator(adm *kadm.Client) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, ok := adm.FindTxnCoordinators(ctx, txnID(0))[txnID(0)]
	switch {
	case !ok:
		return 0, fmt.Errorf("no coordinator for %s", txnID(0))
	case r.Err != nil:
		return 0, fmt.Errorf("the coordinator of %s: %w", txnID(0), r.Err)
	}
	return r.NodeID, nil
}
