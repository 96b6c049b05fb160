package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// produce appends the placed records of call and returns one result per record,
// in order. Records of a partition this node leads are built into one batch and
// appended directly (the measured fast path, see docs/http.md); the others go
// through an embedded producer to the partition's leader; records of a partition
// without a leader fail at once. acks=all then waits for the high-water mark to
// pass the local batches.
func (a *API) produce(ctx context.Context, call produceCall) []produceResult {
	ctx, cancel := context.WithTimeout(ctx, call.timeout)
	defer cancel()
	out := make([]produceResult, len(call.records))
	byPartition := map[int32][]int{}
	var order []int32
	for i, r := range call.records {
		out[i].Partition = r.partition
		if _, ok := byPartition[r.partition]; !ok {
			order = append(order, r.partition)
		}
		byPartition[r.partition] = append(byPartition[r.partition], i)
	}
	type localWait struct {
		p   *replica.Partition
		res replica.AppendResult
		idx []int
	}
	var remote []int
	var waits []localWait
	for _, part := range order {
		idx := byPartition[part]
		if call.meta.Partitions[part].Leader == metadata.NoLeader {
			setErrors(out, idx, errorf(http.StatusServiceUnavailable, kerr.LeaderNotAvailable.Message, "partition %d of %q has no leader", part, call.topic))
			continue
		}
		p := a.localLeader(call.topic, part)
		if p == nil {
			remote = append(remote, idx...)
			continue
		}
		res, err := a.appendLocal(p, call, idx, out)
		switch {
		case errors.Is(err, replica.ErrNotLeader):
			remote = append(remote, idx...)
		case err != nil:
			setErrors(out, idx, err)
		case call.acks == -1:
			waits = append(waits, localWait{p, res, idx})
		}
	}
	if len(remote) > 0 {
		a.produceRemote(ctx, call, remote, out)
	}
	for _, w := range waits {
		if err := w.p.WaitCommitted(ctx, w.res, call.timeout); err != nil {
			setErrors(out, w.idx, err)
		}
	}
	return out
}

func setErrors(out []produceResult, idx []int, err error) {
	ae := fromErr(err)
	for _, i := range idx {
		out[i].Offset, out[i].Error = -1, ae
	}
}

// localLeader is the partition when this node leads it, else nil.
func (a *API) localLeader(topic string, index int32) *replica.Partition {
	if a.cfg.Partitions == nil {
		return nil
	}
	p, err := a.cfg.Partitions.Partition(topic, index)
	if err != nil || !p.IsLeader() {
		return nil
	}
	return p
}

// appendLocal appends the records idx of call as one batch to p, which this node
// leads, fills in their offsets and returns where the batch landed.
func (a *API) appendLocal(p *replica.Partition, call produceCall, idx []int, out []produceResult) (replica.AppendResult, error) {
	first := call.records[idx[0]].timestamp
	recs := make([]batch.Record, len(idx))
	for k, i := range idx {
		r := call.records[i]
		recs[k] = batch.Record{Key: r.key, Value: r.value, Headers: r.headers, TimestampDelta: r.timestamp - first}
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: first}, recs)
	if err != nil {
		return replica.AppendResult{}, err
	}
	res, err := p.Append(b, call.acks)
	if err != nil {
		return replica.AppendResult{}, err
	}
	if a.cfg.Observer != nil {
		a.cfg.Observer.Produced(call.topic, p.Index, int64(len(b)), int64(len(idx)))
	}
	for k, i := range idx {
		out[i].Offset = res.BaseOffset + int64(k)
		if call.acks == 0 {
			out[i].Offset = -1
		}
	}
	return res, nil
}

// produceRemote sends the records idx of call through the embedded producer of
// call's acks level.
func (a *API) produceRemote(ctx context.Context, call produceCall, idx []int, out []produceResult) {
	cl, err := a.producers.client(call.acks)
	if err != nil {
		setErrors(out, idx, err)
		return
	}
	krs := make([]*kgo.Record, len(idx))
	where := make(map[*kgo.Record]int, len(idx))
	for k, i := range idx {
		r := call.records[i]
		kr := &kgo.Record{Topic: call.topic, Partition: r.partition, Key: r.key, Value: r.value, Timestamp: time.UnixMilli(r.timestamp)}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[k] = kr
		where[kr] = i
	}
	for _, res := range cl.ProduceSync(ctx, krs...) {
		i := where[res.Record]
		switch {
		case res.Err != nil:
			out[i].Offset, out[i].Error = -1, fromErr(res.Err)
		case call.acks == 0:
			out[i].Offset = -1
		default:
			out[i].Offset = res.Record.Offset
		}
	}
}

// producers are the embedded Kafka producers, one per acks level, each made on
// first use and pointed at this node's Kafka listener (any broker of the cluster
// would do: the client finds each partition's leader itself).
type producers struct {
	cfg Config
	mu  struct {
		sync.Mutex
		byAcks map[int16]*kgo.Client
		closed bool
	}
}

func (p *producers) init(cfg Config) {
	p.cfg = cfg
	p.mu.byAcks = map[int16]*kgo.Client{}
}

// maxProducerBatch bounds the embedded producers' batches; records the topic
// refuses (max.message.bytes) are refused by the leader, not by the client.
const maxProducerBatch = 64 << 20

func (p *producers) client(acks int16) (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, kgo.ErrClientClosed
	}
	if cl := p.mu.byAcks[acks]; cl != nil {
		return cl, nil
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.cfg.KafkaAddr),
		kgo.ClientID("strata-http"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(int32(min(p.cfg.MaxBodyBytes, maxProducerBatch))),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	opts = append(opts, p.cfg.ClientOpts...)
	switch acks {
	case 0:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	p.mu.byAcks[acks] = cl
	return cl, nil
}

func (p *producers) close() {
	p.mu.Lock()
	p.mu.closed = true
	clients := p.mu.byAcks
	p.mu.byAcks = nil
	p.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
}
