package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// The OMB-style workload (issue 19, goal 9), in the manner of the OpenMessaging
// Benchmark: 4 producers and 2 consumers on a topic of 16 partitions, 1 KiB
// records, acks=all, a 1 ms producer linger, at fixed rates rising step by step
// (-omb-rates) to saturation. Each step is a bench.E2E run of -omb-duration on a
// fresh, primed topic; the consumers are assigned 8 partitions each, as a group
// of two would be. A step reports the rate achieved (records acknowledged per
// second of sending), the publish latency p50 and p99 (from the time a record
// was due to its acknowledgement) and the end-to-end p99 (due to arrival at a
// consumer). A system that achieves less than ombKeepUp of a step's rate in any
// round is saturated: it runs no higher step.
//
// Before a step's rounds each system runs the step once untimed (ombWarmUp), as
// the OpenMessaging Benchmark warms up before it measures: a step at a new rate
// grows the broker's page cache into pages not used before, which on a VM that
// hands free memory back to its host cost several ms per MB on first touch
// (docs/benchmarks.md, session 26). Without
// it that cost fell on round 1 of the system that ran first, always Strata:
// Strata fell behind at 100,000 records/s in round 1 only, twice in two runs.

const (
	ombProducers  = 4
	ombConsumers  = 2
	ombPartitions = 16
	ombLinger     = time.Millisecond
	// ombKeepUp is the share of a step's rate a system must achieve to go on.
	ombKeepUp = 0.95
)

func runOMB(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	t := &extraTable{
		Title: fmt.Sprintf("OMB-style workload: %d producers, %d partitions, %d consumers, 1 KiB, acks=all, linger %s, %s per step",
			ombProducers, ombPartitions, ombConsumers, ombLinger, o.extras.ombDuration),
		Note: fmt.Sprintf("Latencies are measured from the time each record was due, so a system that falls behind "+
			"its rate shows it (no coordinated omission). Each system runs a step once untimed before its rounds. A "+
			"system below %.0f%% of a step's rate in a round runs no higher step.", ombKeepUp*100),
	}
	p.Extras = append(p.Extras, t)
	saturated := map[string]int{} // system -> the first rate it could not keep up with
	sustained := map[string]int{} // system -> the highest rate it kept up with in every round
	for _, rate := range o.extras.ombRates {
		row := fmt.Sprintf("%s records/s", figure(float64(rate)))
		keptUp := map[string]bool{"strata": true, "kafka": true}
		for _, sys := range []string{"strata", "kafka"} {
			if saturated[sys] == 0 {
				ombWarmUp(ctx, o, p, brokers[sys], sys, row, rate)
			}
		}
		for round := 1; round <= o.rounds; round++ {
			for _, sys := range []string{"strata", "kafka"} {
				if saturated[sys] > 0 {
					continue
				}
				err := runOnce(ctx, p, brokers, t, row, sys, round, func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
					res, err := ombStep(ctx, o, seeds, rate, fmt.Sprintf("omb-%d-r%d", rate, round))
					if err != nil || res.ProducedPerSec < ombKeepUp*float64(rate) {
						keptUp[sys] = false
					}
					return ombMeasures(res), res, err
				})
				if err != nil {
					return err
				}
			}
		}
		for sys, ok := range keptUp {
			switch {
			case saturated[sys] > 0:
			case ok:
				sustained[sys] = rate
			default:
				saturated[sys] = rate
			}
		}
		if saturated["strata"] > 0 && saturated["kafka"] > 0 {
			break
		}
	}
	t.Summary = append(t.Summary, ombSummary(sustained, saturated))
	return nil
}

// ombMeasures are a step's figures.
func ombMeasures(res bench.Result) []measure {
	m := []measure{{metric: "achieved records/s", value: res.ProducedPerSec}}
	if res.ProduceLatency != nil {
		m = append(m,
			measure{metric: "publish p50 ms", value: res.ProduceLatency.P50, lowerIsBetter: true},
			measure{metric: "publish p99 ms", value: res.ProduceLatency.P99, lowerIsBetter: true})
	}
	return append(m, measure{metric: "e2e p99 ms", value: res.Latency.P99, lowerIsBetter: true})
}

// ombSummary says how far each system went.
func ombSummary(sustained, saturated map[string]int) string {
	say := func(sys string) string {
		s := "kept up with no step"
		if r := sustained[sys]; r > 0 {
			s = fmt.Sprintf("kept up with %s records/s", figure(float64(r)))
		}
		if r := saturated[sys]; r > 0 {
			return s + fmt.Sprintf(", fell behind at %s", figure(float64(r)))
		}
		return s + " (the highest step)"
	}
	return fmt.Sprintf("Strata %s; Kafka %s.", say("strata"), say("kafka"))
}

// ombWarmUp runs a step at rate against one system, untimed, and deletes its
// topic: its figures are logged, never tabled, and do not decide saturation.
func ombWarmUp(ctx context.Context, o options, p *pairing, b *system, sys, row string, rate int) {
	label := fmt.Sprintf("[%s] %s warm-up, %s", p.Name, row, sys)
	sc := openScope(ctx, label, false, b)
	defer sc.close(ctx)
	syscall.Sync()
	res, err := ombStep(ctx, o, b.seeds, rate, fmt.Sprintf("omb-%d-warmup", rate))
	logf("%s: %s achieved records/s%s", label, figure(res.ProducedPerSec), errSuffix(err))
}

// ombStep runs one rate step against seeds on a fresh topic.
func ombStep(ctx context.Context, o options, seeds []string, rate int, topic string) (bench.Result, error) {
	c := bench.Config{
		Brokers: seeds, Topic: topic,
		Partitions: ombPartitions, ReplicationFactor: int16(o.nodes),
		RecordSize: 1024, Duration: o.extras.ombDuration, Rate: rate,
		Acks: bench.AcksAll, Compression: "none", Producers: ombProducers, Consumers: ombConsumers,
		Linger:     ombLinger,
		ClientOpts: []kgo.Opt{kgo.ClientID("strata-vs-kafka")},
	}
	ctx, cancel := context.WithTimeout(ctx, o.extras.ombDuration+3*time.Minute)
	defer cancel()
	if err := primePartitions(ctx, seeds, c.Topic, c.Partitions, c.ReplicationFactor); err != nil {
		return bench.Result{}, err
	}
	return bench.E2E(ctx, c)
}
