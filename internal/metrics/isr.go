package metrics

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/metadata"
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

func (o isrObserver) AlterPartition(ctx context.Context, topicID metadata.UUID, partition, leaderEpoch, partitionEpoch int32, isr []int32) (*metadata.Partition, error) {
	var before []int32
	if o.m.cfg.Cluster != nil {
		if t := o.m.cfg.Cluster.Image().TopicByID(topicID); t != nil && int(partition) < len(t.Partitions) && partition >= 0 {
			before = t.Partitions[partition].ISR
		}
	}
	ip, err := o.next.AlterPartition(ctx, topicID, partition, leaderEpoch, partitionEpoch, isr)
	if err != nil || ip == nil || before == nil {
		return ip, err
	}
	removed, added := false, false
	for _, id := range before {
		removed = removed || !slices.Contains(ip.ISR, id)
	}
	for _, id := range ip.ISR {
		added = added || !slices.Contains(before, id)
	}
	if removed {
		o.m.OnISRShrink()
	}
	if added {
		o.m.OnISRExpand()
	}
	return ip, nil
}
