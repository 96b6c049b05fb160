package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/replica"
)

// replicaFetches count this node's follower fetches to leader brokers: with
// incremental fetch sessions (KIP-227) an idle follower's requests and answers
// name no partitions, and full fetches happen only when a session starts.
type replicaFetches struct {
	requests, full, requestPartitions, responsePartitions prometheus.Counter
}

func newReplicaFetches() replicaFetches {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	return replicaFetches{
		requests: counter("replica_fetch_requests_total", "Fetch requests this node sent as a follower to leader brokers."),
		full: counter("replica_fetch_full_requests_total",
			"Follower fetch requests that named every partition fetched from that leader (a fetch session starting, or none)."),
		requestPartitions:  counter("replica_fetch_request_partitions_total", "Partitions named in this node's follower fetch requests."),
		responsePartitions: counter("replica_fetch_response_partitions_total", "Partitions in the answers to this node's follower fetch requests."),
	}
}

func (r replicaFetches) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.requests, r.full, r.requestPartitions, r.responsePartitions}
}

// ReplicaTransport wraps the replica layer's Transport (the follower's fetches)
// to count requests and the partitions each request and answer carries; its
// ListOffsets lookups pass through uncounted.
func (m *Metrics) ReplicaTransport(next replica.Transport) replica.Transport {
	return replicaTransport{r: m.fetches, next: next}
}

type replicaTransport struct {
	r    replicaFetches
	next replica.Transport
}

func (t replicaTransport) Fetch(ctx context.Context, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	t.r.requests.Inc()
	if req.SessionEpoch <= 0 {
		t.r.full.Inc()
	}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	t.r.requestPartitions.Add(float64(n))
	resp, err := t.next.Fetch(ctx, leader, req)
	if err != nil {
		return resp, err
	}
	n = 0
	for _, rt := range resp.Topics {
		n += len(rt.Partitions)
	}
	t.r.responsePartitions.Add(float64(n))
	return resp, nil
}

func (t replicaTransport) ListOffsets(ctx context.Context, leader int32, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	return t.next.ListOffsets(ctx, leader, req)
}
