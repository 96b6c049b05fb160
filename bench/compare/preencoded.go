package main

// The pre-encoded producer (-pre-encoded): a load generator for rows that
// measure the brokers rather than the client at small records. franz-go spends
// 0.6-0.8 µs of CPU per 100 B record, so on one pinned core it makes about
// 1.65M records/s whichever broker it writes to (docs/benchmarks.md, session
// 14), and at 1 KiB over four partitions it is at 0.9 of its core (session
// 31). This one builds one batch of ~1 MB of records (franz-go's batch size)
// once, then writes it again and again as a Produce request carrying that
// batch for each partition of the topic (as franz-go's request to a broker
// carries one batch per partition it leads), over one connection, up to
// preEncodedInFlight requests in flight (franz-go's limit), and counts the
// records of every request answered without an error.
// Its cost per record is a share of one socket write per request. The batch is
// not idempotent: the brokers assign its offsets each time and check nothing
// about its sequence.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/bench"
)

const (
	preEncodedBatchBytes = 990_000 // under franz-go's and Kafka's 1,000,012-byte batch limit
	preEncodedInFlight   = 5
	preEncodedVersion    = 9 // Produce v9: flexible, supported by both
	// preEncodedMaxAnswer bounds a Produce answer's size: each partition's
	// part is under a hundred bytes.
	preEncodedMaxAnswer = 64 << 10
)

// preEncodedProduce produces c.RecordSize-byte records to partitions 0 to
// c.Partitions-1 of c.Topic on c.Brokers[0] (their leader: one node) for
// c.Duration.
func preEncodedProduce(ctx context.Context, c bench.Config) (bench.Result, error) {
	partitions := max(1, c.Partitions)
	res := bench.Result{Mode: "produce", Topic: c.Topic, Partitions: partitions, RecordSize: c.RecordSize,
		Acks: c.Acks, Compression: "none", Producers: 1}
	acks := int16(-1)
	if c.Acks == bench.AcksLeader {
		acks = 1
	}
	frame, perRequest, err := preEncodedFrame(c.Topic, partitions, c.RecordSize, acks)
	if err != nil {
		return res, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.Brokers[0])
	if err != nil {
		return res, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()

	// The reader takes a slot back for every answer; the writer stops after
	// c.Duration and waits for the answers still owed.
	slots := make(chan struct{}, preEncodedInFlight)
	answered := make(chan error, 1)
	var acked int64
	start := time.Now()
	var last time.Time
	sent := 0
	go func() {
		answered <- readPreEncodedAnswers(bufio.NewReaderSize(nc, 64<<10), slots, func() {
			acked += int64(perRequest)
			last = time.Now()
		})
	}()
	var werr error
	readerDone := false // answered was received from
	// At least one request, however late the loop starts.
	for ctx.Err() == nil && (sent == 0 || time.Since(start) < c.Duration) {
		select {
		case slots <- struct{}{}:
		case werr = <-answered:
			readerDone = true
			werr = fmt.Errorf("pre-encoded producer: the connection ended early: %w", werr)
		}
		if werr != nil {
			break
		}
		binary.BigEndian.PutUint32(frame[8:], uint32(sent)) // correlation id
		if _, werr = nc.Write(frame); werr != nil {
			break
		}
		produceWrites.writes.Add(1)
		produceWrites.bytes.Add(int64(len(frame)))
		sent++
	}
	if werr == nil {
		// Every slot back means every request was answered.
		for range preEncodedInFlight {
			select {
			case slots <- struct{}{}:
			case werr = <-answered:
				readerDone = true
				werr = fmt.Errorf("pre-encoded producer: the connection ended early: %w", werr)
			case <-time.After(time.Minute):
				werr = errors.New("pre-encoded producer: answers still owed after a minute")
			}
			if werr != nil {
				break
			}
		}
	}
	nc.Close()
	if !readerDone {
		<-answered // the reader's end: the connection just closed
	}
	res.Records = acked
	res.Bytes = acked * int64(c.RecordSize)
	if elapsed := last.Sub(start); elapsed > 0 {
		res.ElapsedSeconds = elapsed.Seconds()
		res.RecordsPerSec = float64(res.Records) / elapsed.Seconds()
		res.MBPerSec = float64(res.Bytes) / 1e6 / elapsed.Seconds()
	}
	return res, werr
}

// preEncodedFrame is a Produce request frame (size prefix included, correlation
// id at bytes 8-11) of one uncompressed batch of size-byte records, as many as
// fit in preEncodedBatchBytes, to each of partitions 0 to partitions-1 of
// topic, and how many records the request carries in all.
func preEncodedFrame(topic string, partitions int32, size int, acks int16) ([]byte, int, error) {
	value := make([]byte, size)
	for i := range value {
		value[i] = 'A' + byte(i%26)
	}
	n := max(1, preEncodedBatchBytes/(size+12)) // a record's header is ~7-12 bytes
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i].Value = value
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		return nil, 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	req.SetVersion(preEncodedVersion)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-vs-kafka")).AppendRequest(nil, req, 0), n * int(partitions), nil
}

// readPreEncodedAnswers reads Produce answers, in the order of their
// correlation ids from 0, until the connection ends or one carries an error,
// calling ok and freeing a slot for each good one.
func readPreEncodedAnswers(br *bufio.Reader, slots <-chan struct{}, ok func()) error {
	var buf []byte
	for want := int32(0); ; want++ {
		corr, body, _, err := bench.ReadResponse(br, &buf, preEncodedMaxAnswer)
		if err != nil {
			return err
		}
		if corr != want {
			return fmt.Errorf("pre-encoded producer: the answer to request %d, want %d", corr, want)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = preEncodedVersion
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("pre-encoded producer: %w", err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return fmt.Errorf("pre-encoded producer: %s-%d: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
		ok()
		<-slots
	}
}
