package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// The fan-out rows (issue 19, goal 7): one producer of 1 KiB records (acks=all,
// unthrottled or at -fanout-rate) on a fresh one-partition topic, once without
// readers and once with -fanout readers that each read every record while it
// is produced, as that many consumer groups would (bench.Config.Fanout: each
// reader is assigned the partition directly). In each round both runs go back
// to back on each system, so the ratio of the two throughputs, per round, is
// what the goal is about: producer throughput with readers within 10% of
// without.
//
// The readers are raw by default (bench.Config.FanoutRaw): they read every
// byte of their Fetch answers but decode only batch headers. Readers that
// decode every record (-fanout-decode) cost the load generator more CPU per
// GB than the broker spends serving it, and on two cores that client CPU, not
// the broker, set the ratio (docs/benchmarks.md, session 14). Each run also
// records the broker's and the load generator's CPU seconds, from which the
// summary derives what serving a GB to the readers costs each side.

// fanoutTarget is the goal: throughput with readers over throughput without.
const fanoutTarget = 0.9

// fanoutCost is one fan-out run's load-independent counts.
type fanoutCost struct {
	brokerCPU, clientCPU float64 // seconds
	produced, served     float64 // GB produced; GB of Fetch responses to the readers
}

// fanoutDetail is one fan-out run in the JSON report: its result and the CPU
// seconds the broker and the load generator spent on it.
type fanoutDetail struct {
	bench.Result
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds"`
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
}

// fanoutRound is one round's pair of runs on one system.
type fanoutRound struct{ without, with fanoutCost }

// servedCost is the CPU seconds per GB served to the readers on the broker
// and in the load generator: each side's CPU in the run with readers less what
// producing the run's GB cost it without readers (per GB, the same round).
func (r fanoutRound) servedCost() (broker, client float64, ok bool) {
	if r.without.produced <= 0 || r.with.served <= 0 {
		return 0, 0, false
	}
	extra := func(with, without float64) float64 {
		return (with - without/r.without.produced*r.with.produced) / r.with.served
	}
	return extra(r.with.brokerCPU, r.without.brokerCPU), extra(r.with.clientCPU, r.without.clientCPU), true
}

func runFanout(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	n := o.extras.fanout
	readers, rate := "raw readers (every byte read, batch headers decoded)", "unthrottled"
	if o.extras.fanoutDecode {
		readers = "readers decoding every record"
	}
	if o.extras.fanoutRate > 0 {
		rate = fmt.Sprintf("offered %d records/s", o.extras.fanoutRate)
	}
	t := &extraTable{
		Title: fmt.Sprintf("Fan-out: one producer, 1 KiB, acks=all, %s, %s per run, without and with %d %s", rate, o.extras.fanoutDuration, n, readers),
		Note: "A run with readers fails unless every reader read every delivered record. The per-round ratio " +
			"compares runs on the same system a few seconds apart. CPU seconds per GB are load-independent " +
			"counts; records/s are rates on whatever machine this ran.",
	}
	p.Extras = append(p.Extras, t)
	without, with := "produce, no readers", fmt.Sprintf("produce, %d readers of every record", n)
	ratios := map[string][]float64{}
	rounds := map[string][]fanoutRound{}
	for round := 1; round <= o.rounds; round++ {
		for _, sys := range []string{"strata", "kafka"} {
			rates := map[string]float64{}
			var fr fanoutRound
			for _, row := range []string{without, with} {
				k := 0
				if row == with {
					k = n
				}
				err := runOnce(ctx, p, brokers, t, row, sys, round, func(ctx context.Context, _ string, seeds []string, round int) ([]measure, any, error) {
					cpu0, cpuErr := brokers[sys].cpuSeconds()
					client0, clientErr := readClientCounts()
					res, err := fanoutRun(ctx, o, seeds, k, round)
					cpu1, cpuErr1 := brokers[sys].cpuSeconds()
					client1, clientErr1 := readClientCounts()
					if err != nil {
						return nil, res, err
					}
					detail := fanoutDetail{Result: res}
					if cpuErr == nil && cpuErr1 == nil && clientErr == nil && clientErr1 == nil {
						cost := fanoutCost{brokerCPU: cpu1 - cpu0, clientCPU: client1.since(client0).cpuSeconds,
							produced: float64(res.Bytes) / 1e9, served: float64(res.FanoutFetchBytes) / 1e9}
						detail.BrokerCPUSeconds, detail.ClientCPUSeconds = cost.brokerCPU, cost.clientCPU
						if k == 0 {
							fr.without = cost
						} else {
							fr.with = cost
						}
					}
					rates[row] = res.RecordsPerSec
					ms := []measure{{metric: "records/s", value: res.RecordsPerSec},
						{metric: "producer p99 ms (send to ack)", value: res.Latency.P99, lowerIsBetter: true}}
					if k > 0 && res.FanoutFetches > 0 {
						ms = append(ms, measure{metric: "fetch responses per reader per s", value: float64(res.FanoutFetches) / float64(k) / res.ElapsedSeconds},
							measure{metric: "KiB per fetch response", value: float64(res.FanoutFetchBytes) / float64(res.FanoutFetches) / 1024})
					}
					return ms, detail, nil
				})
				if err != nil {
					return err
				}
			}
			if rates[without] > 0 && rates[with] > 0 {
				ratios[sys] = append(ratios[sys], rates[with]/rates[without])
			}
			rounds[sys] = append(rounds[sys], fr)
		}
	}
	t.Summary = append(t.Summary, fanoutSummary(n, ratios), fanoutCostSummary(rounds))
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

// fanoutCostSummary gives each system's CPU seconds per GB produced without
// readers and per GB served to them, on the broker and in the load generator
// (medians over the rounds).
func fanoutCostSummary(rounds map[string][]fanoutRound) string {
	say := func(sys string) string {
		var produce, broker, client, clientProduce []float64
		for _, r := range rounds[sys] {
			if b, c, ok := r.servedCost(); ok {
				produce = append(produce, r.without.brokerCPU/r.without.produced)
				clientProduce = append(clientProduce, r.without.clientCPU/r.without.produced)
				broker, client = append(broker, b), append(client, c)
			}
		}
		if len(broker) == 0 {
			return "no complete round"
		}
		return fmt.Sprintf("broker %.3f per GB produced, %.3f per GB served (rounds %s); load generator %.3f per GB produced, %.3f per GB read (rounds %s)",
			median(produce), median(broker), ratiosList(broker), median(clientProduce), median(client), ratiosList(client))
	}
	return fmt.Sprintf("CPU seconds (medians; per GB served: the run's CPU with readers less the same round's CPU per GB produced without them, "+
		"times the GB produced, over the GB of Fetch responses): Strata %s; Kafka %s.", say("strata"), say("kafka"))
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
		RecordSize: 1024, Duration: o.extras.fanoutDuration, Rate: o.extras.fanoutRate,
		Acks: bench.AcksAll, Compression: "none", Producers: 1, Consumers: 1,
		Fanout: readers, FanoutRaw: readers > 0 && !o.extras.fanoutDecode,
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
