package replica

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkLeaderAppend measures a leader's CPU work to append one produced
// batch of 64 KiB (64 records of 1 KiB), acks=1: validation, producer and
// offset bookkeeping, index entries. Segment writes are discarded (an in-memory
// file system whose .log files drop their bytes), so the write's system time and
// the disk do not drown the rest. The batch's CRC is computed once on the way
// (Partition.Append validates, the log appends with AppendValidated).
//
//	go test -run '^$' -bench BenchmarkLeaderAppend -benchmem ./internal/replica/
//
// Loaded 2-core machine (load average 25-26), 9 alternating runs each, ns/op
// meaningful only beside each other (B/op is the in-memory index files growing):
//
//	                                                   min ns/op  median ns/op  allocs/op
//	before (CRC checked by the partition, then the log)   13,769        27,936          0
//	after (once)                                          10,959        17,129          0
//
// The sub-benchmarks are batches of about 64 KiB of 1 KiB records (64) and of
// 100 B records (640): the second has ten times the records to walk. When
// the partition began walking an uncompressed batch's records
// (batch.ValidateRecords; 2-core machine, 5 alternating runs each at two
// load averages, median ns/op, 0 allocs/op either way):
//
//	                              load 6-9              load 1.0-1.4
//	                          value=1024  value=100  value=1024  value=100
//	before (header and CRC)       11,048      8,841       8,582      7,003
//	after (every record too)      13,189     27,491       9,630     20,471
//
// The walk alone (BenchmarkValidateRecords in internal/batch) is about 16 ns
// a record on this machine.
//
// The codec= sub-benchmarks are compressed batches of 64 records of 1 KiB
// JSON-like values (jsonValues): 66 KB uncompressed, 31 KB with lz4, 19 KB
// with zstd. When the partition began decompressing a compressed batch to
// walk its records (2-core machine at load average 9.5-11.5, 5 alternating
// runs each, median ns/op, 0 allocs/op either way):
//
//	                               codec=lz4  codec=zstd
//	before (header and CRC only)       4,596       2,994
//	after (decompressed, walked)      50,442     106,828
//
// When franz-go's decompressor gave way to Strata's bounded one (load average
// 2.2-2.4, 5 alternating runs each, median ns/op, 0 allocs/op either way):
//
//	                               codec=lz4  codec=zstd
//	franz-go's decoders               42,184     113,917
//	Strata's, bounded                 43,306     111,227
func BenchmarkLeaderAppend(b *testing.B) {
	for _, size := range []struct{ n, value int }{{64, 1024}, {640, 100}} {
		b.Run(fmt.Sprintf("value=%d", size.value), func(b *testing.B) {
			benchmarkLeaderAppend(b, batchtest.Build(batchtest.Options{Records: batchtest.Values(size.n, size.value)}))
		})
	}
	for _, codec := range []struct {
		name string
		id   int8
	}{{"lz4", 3}, {"zstd", 4}} {
		b.Run("codec="+codec.name, func(b *testing.B) {
			benchmarkLeaderAppend(b, batchtest.Build(batchtest.Options{Codec: codec.id, Records: jsonValues(64, 1024)}))
		})
	}
}

func benchmarkLeaderAppend(b *testing.B, records []byte) {
	benchmarkAppendTo(b, discardingPartition(b, 1, &metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}), records)
}

// benchmarkAppendTo appends records to leader p, b.N times.
func benchmarkAppendTo(b *testing.B, p *Partition, records []byte) {
	b.SetBytes(int64(len(records)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Append(records, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaderAppendRecompress measures a leader's append of an
// uncompressed batch to a topic whose compression.type names a codec, which
// rebuilds the batch with it (the cost a Kafka leader pays too).
func BenchmarkLeaderAppendRecompress(b *testing.B) {
	for _, ct := range []string{"lz4", "zstd", "gzip", "snappy"} {
		b.Run("compression.type="+ct, func(b *testing.B) {
			p := discardingPartition(b, 1, &metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
			cfg := metadata.DefaultTopicConfig()
			cfg.CompressionType = ct
			p.setConfig(&cfg)
			benchmarkAppendTo(b, p, batchtest.Build(batchtest.Options{Records: jsonValues(64, 1024)}))
		})
	}
}

// jsonValues returns n records whose values are size bytes of JSON-like
// events with pseudo-random fields (the same on every call): compressible as
// real payloads are, unlike batchtest.Values' runs of one byte.
func jsonValues(n, size int) []batchtest.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	events := []string{"click", "view", "purchase", "login", "logout"}
	rs := make([]batchtest.Record, n)
	for i := range rs {
		v := make([]byte, 0, size+128)
		for len(v) < size {
			v = fmt.Appendf(v, `{"id":%d,"user":"u%05d","event":"%s","amount":%d.%02d,"session":"%016x"}`,
				rng.Uint32(), rng.IntN(100000), events[rng.IntN(len(events))], rng.IntN(1000), rng.IntN(100), rng.Uint64())
		}
		rs[i] = batchtest.Record{TimestampDelta: int64(i), Value: v[:size]}
	}
	return rs
}

// BenchmarkReadForFollower measures a leader's work for one partition of a
// caught-up follower's fetch, the most frequent replica fetch: the divergence
// and range checks, recording the follower's progress and the high-water mark,
// no records to read.
//
//	go test -run '^$' -bench BenchmarkReadForFollower -benchmem ./internal/replica/
//
// Session 37, pinned to one CPU, 10 alternating runs of 5,000,000 ops each
// (load 0.08 before, 0.22 after; the runs split into a fast and a slow mode,
// so the fast half is compared), 0 allocs/op either way:
//
//	                                                         ns/op, fast half
//	before (epoch checked by the handler only)               55.5 - 63.4
//	after (also under the lock; the tier's partition start)  62.0 - 73.6
func BenchmarkReadForFollower(b *testing.B) {
	p := discardingPartition(b, 1, &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(64, 1024)}), 1); err != nil {
		b.Fatal(err)
	}
	req := FollowerFetchRequest{ReplicaID: 2, BrokerEpoch: -1, LeaderEpoch: 0, FetchOffset: p.LogEndOffset(), LastFetchedEpoch: 0, MaxBytes: 1 << 20}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ReadForFollower(req, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaderAppendBoundedBefore is BenchmarkLeaderAppend on a topic
// with message.timestamp.before.max.ms set: the leader reads every record's
// timestamp (the header cannot bound the smallest), uncompressed and lz4.
func BenchmarkLeaderAppendBoundedBefore(b *testing.B) {
	for _, codec := range []int8{0, 3} {
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			p := discardingPartition(b, 1, &metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
			cfg := metadata.DefaultTopicConfig()
			cfg.MessageTimestampBeforeMaxMs = 3_600_000
			p.setConfig(&cfg)
			records := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Codec: codec, Records: batchtest.Values(64, 1024)})
			b.SetBytes(int64(len(records)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Append(records, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFollowerAppend measures a follower's CPU work to append one
// fetched batch of 64 KiB (64 records of 1 KiB): validation,
// producer and transaction bookkeeping, index entries; segment writes are
// discarded as in BenchmarkLeaderAppend. The log checks the batch's CRC as it
// appends it, and the walks for producer and transaction state after it do not.
//
//	go test -run '^$' -bench BenchmarkFollowerAppend -benchmem ./internal/replica/
//
// Loaded 2-core machine (load average 8.3), 4 alternating runs of 2,000 ops
// each, ns/op meaningful only beside each other:
//
//	                                                      median ns/op  allocs/op
//	before (CRC checked by the log, then by two more walks)      14,566          0
//	after (once)                                                   6,393          0
func BenchmarkFollowerAppend(b *testing.B) {
	p := discardingPartition(b, 2, &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	const n = 64
	records := batchtest.Build(batchtest.Options{Records: batchtest.Values(n, 1024)})
	b.SetBytes(int64(len(records)))
	b.ReportAllocs()
	var next int64
	for b.Loop() {
		batch.SetBaseOffset(records, next) // not under the CRC
		if err := p.appendFromLeader(0, p.LogEndOffset(), records, next); err != nil {
			b.Fatal(err)
		}
		next += n
	}
}

// discardingPartition opens partition t-0 on broker localID in state, on a
// log whose segment writes are discarded (discardSegments).
func discardingPartition(b *testing.B, localID int32, state *metadata.Partition) *Partition {
	p := openPartition(b, discardSegments{vfs.NewMem()}, localID, state)
	b.Cleanup(func() { p.close() })
	return p
}

// openPartition opens partition t-0 on broker localID in state, on a log in fs;
// the caller closes it.
func openPartition(tb testing.TB, fs vfs.FS, localID int32, state *metadata.Partition) *Partition {
	tb.Helper()
	return openPartitionOn(tb, fs, "p", storage.Config{}, localID, state)
}

// openPartitionOn is openPartition on a log in dir, opened with cfg.
func openPartitionOn(tb testing.TB, fs vfs.FS, dir string, cfg storage.Config, localID int32, state *metadata.Partition) *Partition {
	tb.Helper()
	l, err := storage.Open(fs, dir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{}, 0, l, false, localID, producerExpiry{})
	if err != nil {
		l.Close()
		tb.Fatal(err)
	}
	p.setConfig(new(metadata.DefaultTopicConfig()))
	if _, err := p.applyState(state, time.Now()); err != nil {
		tb.Fatal(err)
	}
	return p
}

// discardSegments is a file system whose segment (.log) files take writes
// without keeping them.
type discardSegments struct{ vfs.FS }

func (d discardSegments) Create(name string) (vfs.File, error) {
	f, err := d.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return discardWrites{f}, nil
}

type discardWrites struct{ vfs.File }

func (discardWrites) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// BenchmarkReopenPartition opens a partition whose log holds 20,000 batches
// of three idempotent producers (8 MiB segments), after a clean close: from
// the producer-state snapshot written at close, or, with the snapshots
// removed (a log from before snapshots), by reading every batch header.
//
//	go test -run '^$' -bench BenchmarkReopenPartition -benchmem ./internal/replica/
//
// In-memory file system, loaded 2-core machine (load average about 25), 10
// opens each:
//
//	snapshot   0.25 ms/op  22,519 B/op  190 allocs/op
//	scan       6.00 ms/op  55,932 B/op  206 allocs/op
func BenchmarkReopenPartition(b *testing.B) {
	defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
	closeSnapshotMinBytes = 0
	fs := vfs.NewMem()
	cfg := storage.Config{SegmentBytes: 8 << 20, IndexMaxBytes: 1 << 20}
	open := func() *Partition {
		l, err := storage.Open(fs, "p", cfg)
		if err != nil {
			b.Fatal(err)
		}
		p, err := newPartition("t", metadata.UUID{}, 0, l, false, 1, producerExpiry{})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	p := open()
	p.setConfig(new(metadata.DefaultTopicConfig()))
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, time.Now()); err != nil {
		b.Fatal(err)
	}
	seq := map[int64]int32{}
	for i := range 20_000 {
		pid := int64(i % 3)
		batch := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, BaseSequence: seq[pid], Records: batchtest.Values(4, 100)})
		seq[pid] += 4
		if _, err := p.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.close(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"snapshot", "scan"} {
		if mode == "scan" {
			names, err := fs.List("p")
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range names {
				if strings.HasSuffix(n, ".snapshot") {
					if err := fs.Remove("p/" + n); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q := open()
				if (q.snapshotOffset >= 0) != (mode == "snapshot") {
					b.Fatalf("%s: state loaded from snapshot at %d", mode, q.snapshotOffset)
				}
				// Close without writing a snapshot: the scan case must find
				// none at its next open.
				q.snapshotOffset = q.log.LogEndOffset()
				if err := q.close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyOneChange applies images to a broker hosting 2,000 partitions
// (one topic, led here), each image changing one partition's ISR: what a
// metadata change anywhere in the cluster costs every broker.
func BenchmarkApplyOneChange(b *testing.B) {
	const partitions = 2000
	m, err := NewManager(vfs.NewMem(), "/logs", 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	id := metadata.UUID{4, 2}
	recs := []metadata.Record{&metadata.TopicRecord{Name: "many", ID: id, Configs: map[string]string{"segment.index.bytes": "65536"}}}
	for b := int32(1); b <= 3; b++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: b, Epoch: 1, Host: "127.0.0.1", Port: 9091 + b})
	}
	for p := range int32(partitions) {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		b.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := img.TopicByID(id).Partitions[i%partitions]
		isr := []int32{1, 2, 3}
		if len(p.ISR) == 3 {
			isr = isr[:2]
		}
		next, err := metadata.Apply(img, &metadata.PartitionChangeRecord{TopicID: id, Partition: p.Index,
			BasePartitionEpoch: p.PartitionEpoch, Leader: 1, LeaderEpoch: p.LeaderEpoch, ISR: isr})
		if err != nil {
			b.Fatal(err)
		}
		img = next.WithOffset(img.Offset() + 1)
		if err := m.Apply(img); err != nil {
			b.Fatal(err)
		}
	}
}
