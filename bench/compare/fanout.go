package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// The fan-out rows (issue 19, goal 7): one unthrottled producer of 1 KiB records
// (acks=all) on a fresh one-partition topic, once without readers and once with
// -fanout readers that each read every record while it is produced, as that many
// consumer groups would (bench.Config.Fanout: each reader is assigned the
// partition directly). In each round both runs go back to back on each system,
// so the ratio of the two throughputs, per round, is what the goal is about:
// producer throughput with readers within 10% of without.

// fanoutTarget is the goal: throughput with readers over throughput without.
const fanoutTarget = 0.9

func runFanout(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	n := o.extras.fanout
	t := &extraTable{
		Title: fmt.Sprintf("Fan-out: one producer, 1 KiB, acks=all, unthrottled, %s per run, without and with %d readers", o.extras.fanoutDuration, n),
		Note: "A run with readers fails unless every reader read every delivered record. The per-round ratio " +
			"compares runs on the same system a few seconds apart.",
	}
	p.Extras = append(p.Extras, t)
	without, with := "produce, no readers", fmt.Sprintf("produce, %d readers of every record", n)
	ratios := map[string][]float64{}
	for round := 1; round <= o.rounds; round++ {
		for _, sys := range []string{"strata", "kafka"} {
			rates := map[string]float64{}
			for _, row := range []string{without, with} {
				readers := 0
				if row == with {
					readers = n
				}
				err := runOnce(ctx, p, brokers, t, row, sys, round, func(ctx context.Context, _ string, seeds []string, round int) ([]measure, any, error) {
					res, err := fanoutRun(ctx, o, seeds, readers, round)
					if err == nil {
						rates[row] = res.RecordsPerSec
					}
					return []measure{{metric: "records/s", value: res.RecordsPerSec}}, res, err
				})
				if err != nil {
					return err
				}
			}
			if rates[without] > 0 && rates[with] > 0 {
				ratios[sys] = append(ratios[sys], rates[with]/rates[without])
			}
		}
	}
	t.Summary = append(t.Summary, fanoutSummary(n, ratios))
	return nil
}

// fanoutSummary gives each system's median ratio of producer throughput with
// readers to without, against the goal.
func fanoutSummary(readers int, ratios map[string][]float64) string {
	say := func(sys string) string {
		r := ratios[sys]
		if len(r) == 0 {
			return "no complete round"
		}
		return fmt.Sprintf("%.2f (rounds %s)", median(r), ratiosList(r))
	}
	return fmt.Sprintf("Producer throughput with %d readers over without, median of the per-round ratios: Strata %s, goal >= %.2g: %s; Kafka %s.",
		readers, say("strata"), fanoutTarget, verdict(median(ratios["strata"]), fanoutTarget, false), say("kafka"))
}

func ratiosList(vs []float64) string {
	s := ""
	for i, v := range vs {
		if i > 0 {
			s += " / "
		}
		s += fmt.Sprintf("%.2f", v)
	}
	return s
}

// fanoutRun is one produce run with readers readers on a fresh, primed topic.
func fanoutRun(ctx context.Context, o options, seeds []string, readers, round int) (bench.Result, error) {
	c := bench.Config{
		Brokers: seeds, Topic: fmt.Sprintf("fanout-%d-r%d", readers, round),
		Partitions: 1, ReplicationFactor: int16(o.nodes),
		RecordSize: 1024, Duration: o.extras.fanoutDuration,
		Acks: bench.AcksAll, Compression: "none", Producers: 1, Consumers: 1, Fanout: readers,
		Linger:     bench.DefaultLinger,
		ClientOpts: []kgo.Opt{kgo.ClientID("strata-vs-kafka")},
	}
	ctx, cancel := context.WithTimeout(ctx, o.extras.fanoutDuration+3*time.Minute)
	defer cancel()
	if err := prime(ctx, seeds, c.Topic, c.ReplicationFactor); err != nil {
		return bench.Result{}, err
	}
	return bench.Produce(ctx, c)
}
