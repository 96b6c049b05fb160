package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
)

// fanout is Config.Fanout readers that each read every new record of the topic
// while a produce run writes it, as that many consumer groups would (each gets
// every partition, assigned directly: no group coordination to measure).
type fanout struct {
	stop  context.CancelFunc
	read  []atomic.Int64
	done  chan error
	count int
	// fetches and bytes count the Fetch responses all readers received and
	// their size on the wire (franz-go's broker read hook, or the raw
	// readers' own count).
	fetches, bytes atomic.Int64
}

// OnBrokerRead counts Fetch responses (kgo.HookBrokerRead).
func (f *fanout) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		f.fetches.Add(1)
		f.bytes.Add(int64(bytesRead))
	}
}

// startFanout starts the readers at the topic's current end offsets.
func (c *Config) startFanout(ctx context.Context, partitions []int32) (*fanout, error) {
	_, end, err := listOffsets(ctx, c, partitions)
	if err != nil {
		return nil, err
	}
	readCtx, stop := context.WithCancel(ctx)
	f := &fanout{stop: stop, read: make([]atomic.Int64, c.Fanout), done: make(chan error, c.Fanout), count: c.Fanout}
	rc := *c
	rc.ClientOpts = append(append([]kgo.Opt(nil), c.ClientOpts...), kgo.WithHooks(f))
	for i := range c.Fanout {
		go func() {
			if c.FanoutRaw {
				f.done <- c.readRaw(readCtx, partitions, end, func(records int64, bytes int) {
					f.read[i].Add(records)
					f.fetches.Add(1)
					f.bytes.Add(int64(bytes))
				})
				return
			}
			f.done <- rc.readAll(readCtx, partitions, end, nil, nil, func(*kgo.Record) bool {
				f.read[i].Add(1)
				return true
			})
		}()
	}
	return f, nil
}

// finish waits, up to timeout, for every reader to have read delivered
// records, stops them and returns the fewest any of them read.
func (f *fanout) finish(delivered int64, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for f.fewest() < delivered && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.stop()
	var firstErr error
	for range f.count {
		if err := <-f.done; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	fewest := f.fewest()
	if firstErr == nil && fewest < delivered {
		firstErr = fmt.Errorf("%w: a fan-out reader read %d of %d delivered records within %s", ErrRecordsFailed, fewest, delivered, timeout)
	}
	return fewest, firstErr
}

func (f *fanout) fewest() int64 {
	n := f.read[0].Load()
	for i := range f.read {
		n = min(n, f.read[i].Load())
	}
	return n
}

// Fetch settings of a raw reader: franz-go's consumer defaults, and the Fetch
// version (v13: topic ids) that both Strata and Kafka 4 serve.
const (
	rawMaxWait           = 5 * time.Second
	rawMaxBytes          = 50 << 20
	rawMaxPartitionBytes = 1 << 20
	rawFetchVersion      = 13
)

// readRaw is one raw fan-out reader (Config.FanoutRaw): from the from offsets
// until ctx ends it sends Fetch requests of its own (no fetch session,
// read_uncommitted, franz-go's default sizes and wait) over a plaintext
// connection to each partition's leader, one long poll at a time per leader,
// reads each answer into one reused buffer and counts its records from the
// batch headers, telling onAnswer (records, bytes on the wire). Every byte of an answer is read from the
// socket, but no record is decoded (no CRC check, no decompression) and no
// memory is allocated per answer. An ended ctx is not an error.
func (c *Config) readRaw(ctx context.Context, partitions []int32, from map[int32]int64, onAnswer func(records int64, bytes int)) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return err
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, c.Topic)
	cl.Close()
	if err != nil {
		return fmt.Errorf("raw reader: metadata of %q: %w", c.Topic, err)
	}
	td, ok := md.Topics[c.Topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("raw reader: topic %q not in the metadata (%v)", c.Topic, td.Err)
	}
	byLeader := map[string]map[int32]int64{} // by the leader's address
	for _, p := range partitions {
		pd, ok := td.Partitions[p]
		i := slices.IndexFunc(md.Brokers, func(b kadm.BrokerDetail) bool { return ok && b.NodeID == pd.Leader })
		if i < 0 {
			return fmt.Errorf("raw reader: topic %q partition %d has no known leader", c.Topic, p)
		}
		addr := net.JoinHostPort(md.Brokers[i].Host, strconv.Itoa(int(md.Brokers[i].Port)))
		if byLeader[addr] == nil {
			byLeader[addr] = map[int32]int64{}
		}
		byLeader[addr][p] = from[p]
	}
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for addr, offsets := range byLeader {
		wg.Go(func() {
			if err := c.fetchRaw(ctx, addr, td.ID, offsets, onAnswer); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	return firstErr
}

// fetchRaw is readRaw's loop against the leader at addr, for the partitions
// it leads (offsets: each one's next offset, advanced as batches arrive).
func (c *Config) fetchRaw(ctx context.Context, addr string, topicID [16]byte, offsets map[int32]int64, onAnswer func(records int64, bytes int)) error {
	conn, err := (&net.Dialer{Timeout: c.drainTimeout()}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("raw reader: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	req := kmsg.NewPtrFetchRequest()
	req.Version = rawFetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(rawMaxWait/time.Millisecond), 1, rawMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = c.Topic, topicID
	for p := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, rawMaxPartitionBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-bench-raw"))
	var (
		out  []byte
		in   = make([]byte, 64<<10)
		resp = kmsg.NewPtrFetchResponse()
	)
	for corr := int32(0); ; corr++ {
		for i := range rt.Partitions {
			rt.Partitions[i].FetchOffset = offsets[rt.Partitions[i].Partition]
		}
		out = format.AppendRequest(out[:0], req, corr)
		body, respLen, err := rawRoundTrip(conn, out, &in, corr)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("raw reader: fetch from %s: %w", addr, err)
		}
		resp.Default()
		resp.Version = rawFetchVersion
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("raw reader: fetch response from %s: %w", addr, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("raw reader: fetch: %w", err)
		}
		var total int64
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("raw reader: fetch %s partition %d: %w", c.Topic, p.Partition, err)
				}
				next, ok := offsets[p.Partition]
				if !ok {
					continue
				}
				records, n, err := countBatches(p.RecordBatches, next)
				if err != nil {
					return fmt.Errorf("raw reader: %s partition %d at offset %d: %w", c.Topic, p.Partition, next, err)
				}
				offsets[p.Partition] = n
				total += records
			}
		}
		onAnswer(total, 4+respLen)
		if total > 0 {
			c.progress(total)
		}
	}
}

// rawRoundTrip writes one framed request and reads its response into *in
// (grown when too small), returning the response body after the header and
// the response's size (without its 4-byte size prefix).
func rawRoundTrip(conn net.Conn, req []byte, in *[]byte, corr int32) ([]byte, int, error) {
	if _, err := conn.Write(req); err != nil {
		return nil, 0, err
	}
	got, body, n, err := ReadResponse(conn, in, rawMaxBytes+1<<20)
	if err != nil {
		return nil, 0, err
	}
	if got != corr {
		return nil, 0, fmt.Errorf("response to request %d, want %d", got, corr)
	}
	return body, n, nil
}

// countBatches counts the records of the whole v2 batches in data that end at
// or after offset (control batches hold no records; a reader fetches from batch
// boundaries, so no batch is counted in part) from their headers alone,
// and returns the offset after the last whole batch (offset when there is
// none). A partial batch at the end (a broker may cut the last one at the
// size limit) is left for the next fetch.
func countBatches(data []byte, offset int64) (records, next int64, err error) {
	next = offset
	for len(data) >= batch.HeaderSize {
		size, err := batch.FrameSize(data)
		if err != nil {
			return records, next, err
		}
		if size > len(data) {
			break
		}
		h, _ := batch.ParseHeader(data)
		data = data[size:]
		if h.NextOffset() <= next {
			continue // already read
		}
		if !h.Control() {
			records += int64(h.NumRecords)
		}
		next = h.NextOffset()
	}
	return records, next, nil
}
