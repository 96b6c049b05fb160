// Command abortcompare runs one script of transactions against a Kafka broker
// and a Strata broker and compares what read_committed fetches answer: two
// franz-go transactional producers interleave transactions of 40 KiB records
// over 1 MiB segments, aborting some, then a raw read_committed Fetch from
// every offset of the partition, with 1 byte and 1 MiB of partition maximum,
// is answered with its next offset, last stable offset and aborted
// transactions (producers named a and b). It is how Strata's per-segment
// aborted-transaction index was checked against Kafka 4.4's .txnindex.
//
// Both brokers plain (no SASL), one node each; for Kafka a KRaft node as
// bench/compare starts one, with the transaction state log's replication
// factor and min.insync.replicas at 1:
//
//	go run ./interop/cmd/abortcompare -kafka 127.0.0.1:9092 -strata 127.0.0.1:9292
//
// The exit status is 1 when any case differs.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/interop/cmd/internal/sidebyside"
)

func main() {
	topic := fmt.Sprintf("aborts%06d", rand.IntN(1e6))
	sidebyside.Main("abortcompare", 5*time.Minute, func(ctx context.Context, addr string) ([]sidebyside.Result, error) {
		return run(ctx, addr, topic)
	})
}

const rounds = 12

func run(ctx context.Context, addr, topic string) ([]sidebyside.Result, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")}, topic); err != nil {
		return nil, err
	}
	end := func() (int64, error) {
		o, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, err
		}
		l, _ := o.Lookup(topic, 0)
		return l.Offset, l.Err
	}
	names := map[int64]string{}
	producer := func(name string) (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(topic+"-"+name), kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	a, err := producer("a")
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := producer("b")
	if err != nil {
		return nil, err
	}
	defer b.Close()
	pad := strings.Repeat("x", 40<<10)
	produce := func(cl *kgo.Client, name string) error {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(name + pad)}).FirstErr(); err != nil {
			return err
		}
		pid, _, err := cl.ProducerID(ctx)
		names[pid] = name
		return err
	}
	// endTxn ends cl's transaction and waits for its marker, so that the
	// next record lands after it on both brokers.
	endTxn := func(cl *kgo.Client, commit bool) error {
		before, err := end()
		if err != nil {
			return err
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return err
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			now, err := end()
			if err == nil && now > before {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the marker did not come: end offset %d, %v", now, err)
			}
		}
	}
	for r := range rounds {
		steps := []func() error{
			a.BeginTransaction, func() error { return produce(a, "a") },
			b.BeginTransaction, func() error { return produce(b, "b") },
			func() error { return produce(a, "a") }, func() error { return produce(a, "a") },
			func() error { return endTxn(a, r%2 == 1) },
			func() error { return produce(b, "b") },
			func() error { return endTxn(b, r%3 != 0) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return nil, fmt.Errorf("round %d: %w", r, err)
			}
		}
	}
	last, err := end()
	if err != nil {
		return nil, err
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td := md.Topics[topic]
	leader := admin.Broker(int(td.Partitions[0].Leader))
	var outs []sidebyside.Result
	for from := int64(0); from <= last; from++ {
		for _, maxBytes := range []int32{1, 1 << 20} {
			out, err := fetch(ctx, leader, topic, [16]byte(td.ID), from, maxBytes, names)
			if err != nil {
				out = "error: " + err.Error()
			}
			outs = append(outs, sidebyside.Result{Name: fmt.Sprintf("from %d, %d bytes", from, maxBytes), Out: out})
		}
	}
	return outs, nil
}

// fetch sends one read_committed Fetch and renders the partition's answer.
func fetch(ctx context.Context, br *kgo.Broker, topic string, id [16]byte, from int64, maxBytes int32, names map[int64]string) (string, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = maxBytes
	req.IsolationLevel = 1
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = from, maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return "", err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Sprintf("error code %d, %d topics", resp.ErrorCode, len(resp.Topics)), nil
	}
	p := resp.Topics[0].Partitions[0]
	next := int64(-1)
	for rec := p.RecordBatches; len(rec) >= 61; {
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(rec); err != nil {
			break
		}
		next = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
		rec = rec[12+batch.Length:]
	}
	var aborted []string
	for _, a := range p.AbortedTransactions {
		name := names[a.ProducerID]
		if name == "" {
			name = fmt.Sprint(a.ProducerID)
		}
		aborted = append(aborted, fmt.Sprintf("%s@%d", name, a.FirstOffset))
	}
	return fmt.Sprintf("error %d, next %d, lso %d, aborted [%s]", p.ErrorCode, next, p.LastStableOffset, strings.Join(aborted, " ")), nil
}
