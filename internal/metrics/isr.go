package metrics

import "github.com/prometheus/client_golang/prometheus"

// isrCounters count changes of in-sync replica sets made by this node as leader.
type isrCounters struct{ shrinks, expands prometheus.Counter }

func newISRCounters() isrCounters {
	return isrCounters{
		shrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "isr_shrinks_total",
			Help: "Times this node, as leader, removed a replica from a partition's ISR.",
		}),
		expands: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "isr_expands_total",
			Help: "Times this node, as leader, added a caught-up replica to a partition's ISR.",
		}),
	}
}

// OnISRShrink counts one replica leaving a partition's ISR; the replica layer
// calls it (through an interface it declares) when it shrinks an ISR as leader.
func (m *Metrics) OnISRShrink() { m.isr.shrinks.Inc() }

// OnISRExpand counts one replica joining a partition's ISR.
func (m *Metrics) OnISRExpand() { m.isr.expands.Inc() }
