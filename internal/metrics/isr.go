package metrics

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/replica"
)

// isrCounters count changes of in-sync replica sets made by this node as leader.
type isrCounters struct{ shrinks, expands prometheus.Counter }

func newISRCounters() isrCounters {
	return isrCounters{
		shrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "isr_shrinks_total",
			Help: "ISR changes this node made as leader that removed replicas from a partition's ISR.",
		}),
		expands: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "isr_expands_total",
			Help: "ISR changes this node made as leader that added caught-up replicas to a partition's ISR.",
		}),
	}
}

// OnISRShrink counts one ISR change that removed replicas.
func (m *Metrics) OnISRShrink() { m.isr.shrinks.Inc() }

// OnISRExpand counts one ISR change that added replicas.
func (m *Metrics) OnISRExpand() { m.isr.expands.Inc() }

// ISRChanger wraps the replica layer's ISRChanger (the leader's AlterPartition to
// the controller) to count the changes the controller accepts: against the ISR in
// the image before the change, one that removes replicas is a shrink and one that
// adds replicas an expand (one that does both counts as both).
func (m *Metrics) ISRChanger(next replica.ISRChanger) replica.ISRChanger {
	return isrObserver{m: m, next: next}
}

type isrObserver struct {
	m    *Metrics
	next replica.ISRChanger
}

func (o isrObserver) AlterPartitions(ctx context.Context, changes []replica.ISRChange) ([]replica.ISRResult, error) {
	befores := make([][]int32, len(changes))
	if o.m.cfg.Cluster != nil {
		img := o.m.cfg.Cluster.Image()
		for i, ch := range changes {
			if t := img.TopicByID(ch.TopicID); t != nil && ch.Partition >= 0 && int(ch.Partition) < len(t.Partitions) {
				befores[i] = t.Partitions[ch.Partition].ISR
			}
		}
	}
	results, err := o.next.AlterPartitions(ctx, changes)
	if err != nil {
		return results, err
	}
	for i, res := range results {
		if i < len(befores) && res.Err == nil && res.Partition != nil && befores[i] != nil {
			o.count(befores[i], res.Partition.ISR)
		}
	}
	return results, nil
}

// count counts one accepted change from the ISR before to the ISR after.
func (o isrObserver) count(before, after []int32) {
	removed, added := false, false
	for _, id := range before {
		removed = removed || !slices.Contains(after, id)
	}
	for _, id := range after {
		added = added || !slices.Contains(before, id)
	}
	if removed {
		o.m.OnISRShrink()
	}
	if added {
		o.m.OnISRExpand()
	}
}
