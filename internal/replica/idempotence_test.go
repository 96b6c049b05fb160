package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestDuplicateAnswersOriginalTimestamp: a retried batch of an idempotent
// producer is answered as Kafka answers it (UnifiedLog.append with a
// duplicate): the original batch's offsets and, as its log append time, the
// original batch's max timestamp as stored, whatever the topic's timestamp
// type. A LogAppendTime topic's retry answered -1, so the client reported its
// own create time for records stored with the broker's.
func TestDuplicateAnswersOriginalTimestamp(t *testing.T) {
	for name, typ := range map[string]metadata.TimestampType{"CreateTime": metadata.CreateTime, "LogAppendTime": metadata.LogAppendTime} {
		t.Run(name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			cfg := metadata.DefaultTopicConfig()
			cfg.MessageTimestampType = typ
			p.setConfig(&cfg)
			if err := p.log.Reconfigure(storage.Config{LogAppendTime: typ == metadata.LogAppendTime}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			b := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, BaseSequence: 0, FirstTimestamp: now,
				Records: []batchtest.Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampDelta: 5}}})
			first := mustAppend(t, p, slices.Clone(b)) // a LogAppendTime log stamps what it appends
			stored := now + 5                          // CreateTime: the batch's max timestamp
			if typ == metadata.LogAppendTime {
				stored = first.LogAppendTime
			}
			retry := mustAppend(t, p, b)
			if retry.BaseOffset != first.BaseOffset || retry.LastOffset != first.LastOffset || retry.LogAppendTime != stored {
				t.Fatalf("retry answered %+v, want offsets %d-%d and log append time %d (first append %+v)",
					retry, first.BaseOffset, first.LastOffset, stored, first)
			}
			if p.LogEndOffset() != 2 {
				t.Fatalf("log end %d after the retry, want 2", p.LogEndOffset())
			}
		})
	}
}

// TestIdleProducersExpire: the cleaner forgets a producer whose last batch or
// transaction marker on a partition is older than producer.id.expiration.ms,
// unless its transaction there is open, as Kafka's periodic
// removeExpiredProducers does (KIP-854). Strata kept every producer id a
// partition ever saw, in memory and in every snapshot, for good. A forgotten
// producer is unknown again: any sequence starts it.
func TestIdleProducersExpire(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	now := time.Now()
	at := func(pid int64, seq int32, ts time.Time, transactional bool) []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, Transactional: transactional, ProducerID: pid, BaseSequence: seq, FirstTimestamp: ts.UnixMilli()},
			[]batch.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	idle := now.Add(-2 * time.Hour)
	mustAppend(t, p, at(7, 0, idle, false))                  // idle: forgotten
	mustAppend(t, p, at(8, 0, idle, true))                   // idle, but its transaction is open
	mustAppend(t, p, at(9, 0, now.Add(-time.Minute), false)) // recent
	mustAppend(t, p, at(10, 0, idle, true))                  // idle batch, recent marker
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: 10, Commit: true, Timestamp: now.UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, at(11, 0, idle, true)) // idle batch, idle marker: forgotten
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: 11, Commit: true, Timestamp: idle.UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}

	m := &Manager{now: func() time.Time { return now }, opts: Options{ProducerIDExpiration: time.Hour}}
	m.clean(p)
	infos, err := p.Producers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, pi := range infos {
		ids = append(ids, pi.ProducerID)
	}
	if !slices.Equal(ids, []int64{8, 9, 10}) {
		t.Fatalf("producers after the cleaner: %v, want [8 9 10]", ids)
	}
	if _, err := p.Append(at(7, 40, now, false), 1); err != nil {
		t.Fatalf("a forgotten producer's next batch, at any sequence: %v", err)
	}
}

// TestProducerStateSurvivesDeletedBatchesAcrossRestart: a producer whose
// batches DeleteRecords removed is still known after a clean restart, as in
// Kafka, whose close snapshots the state at the log end (kept while it lies
// above the log start): a zombie of an older epoch is refused and a retry of
// its last batch is answered as a duplicate.
// Strata wrote no snapshot on close for a log under 1 MiB and rebuilt the state
// from the records left, which no longer named the producer: the zombie was
// taken and the retry appended again.
func TestProducerStateSurvivesDeletedBatchesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	p := newLeaderPartition(t, dir)
	idem := func(epoch int16, seq int32) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, ProducerEpoch: epoch, BaseSequence: seq,
			FirstTimestamp: time.Now().UnixMilli(), Records: []batchtest.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	}
	mustAppend(t, p, idem(2, 0))
	last := mustAppend(t, p, idem(2, 2))
	mustAppend(t, p, batchtest.Build(batchtest.Options{}))
	p.maybeAdvanceHighWatermark()
	if _, err := p.DeleteRecords(4); err != nil { // the producer's batches: 0-3
		t.Fatal(err)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	p = newLeaderPartition(t, dir)
	t.Cleanup(func() { p.close() })
	if _, err := p.Append(idem(1, 0), 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("a zombie's batch after the restart: %v, want ErrInvalidProducerEpoch", err)
	}
	res, err := p.Append(idem(2, 2), 1)
	if err != nil || res.BaseOffset != last.BaseOffset {
		t.Fatalf("retry of the last batch after the restart: %+v, %v; want the original offset %d", res, err, last.BaseOffset)
	}
	if end := p.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d, want 5 (nothing appended)", end)
	}
}

// TestSequenceAfterMarkerStartsAtZero: a producer known here only from a
// transaction marker at its epoch (KIP-890 bumps the epoch at every end of a
// transaction, and the marker carries the new one) has appended nothing at
// that epoch, so its next batch must start at sequence 0: Kafka's
// checkSequence takes the last sequence as none (-1) and refuses any other
// with OUT_OF_ORDER_SEQUENCE_NUMBER. Strata took any sequence: a batch
// pipelined behind a refused first one was appended ahead of it, and the
// first one's retry then failed for good.
func TestSequenceAfterMarkerStartsAtZero(t *testing.T) {
	s := newProducerState()
	s.record(7, 3, 0, 5, 0, 4, -1)
	s.fence(7, 4, 0, -1) // the end of the transaction bumps the epoch to 4
	if _, err := s.check(7, 4, 1, 1, false); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence 1 as the first batch at the marker's epoch: %v, want ErrOutOfOrderSequence", err)
	}
	if _, err := s.check(7, 4, 0, 1, false); err != nil {
		t.Fatalf("sequence 0 as the first batch at the marker's epoch: %v", err)
	}
	s.fence(9, 2, 0, -1) // a producer known only from its marker
	if _, err := s.check(9, 2, 5, 1, false); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence 5 from a producer known only from its marker: %v, want ErrOutOfOrderSequence", err)
	}
}

// TestExpiredProducersDroppedOnSnapshotLoad: a partition that loads a
// producer-state snapshot leaves out the producers idle for longer than
// producer.id.expiration.ms, those in an open transaction excepted, as
// Kafka's loadFromSnapshot filters with isProducerExpired. Strata kept them
// until the cleaner's next pass: DescribeProducers listed them after a
// restart, and a producer expired before it was still fenced by its old
// epoch.
func TestExpiredProducersDroppedOnSnapshotLoad(t *testing.T) {
	defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
	closeSnapshotMinBytes = 0
	now := time.Now()
	expiry := producerExpiry{after: time.Hour, now: func() time.Time { return now }}
	dir := t.TempDir()
	open := func() *Partition {
		t.Helper()
		l, err := storage.Open(vfs.Default, dir, storage.Config{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := newPartition("t", metadata.UUID{}, 0, l, false, 1, expiry)
		if err != nil {
			t.Fatal(err)
		}
		p.setConfig(new(metadata.DefaultTopicConfig()))
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, now); err != nil {
			t.Fatal(err)
		}
		return p
	}
	at := func(pid int64, epoch int16, seq int32, ts time.Time, transactional bool) []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, Transactional: transactional, ProducerID: pid, ProducerEpoch: epoch,
			BaseSequence: seq, FirstTimestamp: ts.UnixMilli()}, []batch.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	idle := now.Add(-2 * time.Hour)
	p := open()
	mustAppend(t, p, at(7, 3, 0, idle, false))                  // idle: dropped
	mustAppend(t, p, at(8, 0, 0, idle, true))                   // idle, but its transaction is open
	mustAppend(t, p, at(9, 0, 0, now.Add(-time.Minute), false)) // recent
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	p = open()
	t.Cleanup(func() { p.close() })
	if p.snapshotOffset != 3 {
		t.Fatalf("state loaded from snapshot at %d, want 3", p.snapshotOffset)
	}
	infos, err := p.Producers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, pi := range infos {
		ids = append(ids, pi.ProducerID)
	}
	if !slices.Equal(ids, []int64{8, 9}) {
		t.Fatalf("producers after the restart: %v, want [8 9]", ids)
	}
	if _, err := p.Append(at(7, 1, 5, now, false), 1); err != nil {
		t.Fatalf("an expired producer's batch at an older epoch after the restart: %v, want it taken as a new producer's", err)
	}
}

// TestAppendCheckOrder: a produced batch that breaks more than one rule gets
// the error of the rule Kafka checks first (UnifiedLog's
// analyzeAndValidateProducerState, then ProducerAppendInfo): a retry of a
// cached batch is answered with its original offsets before anything else; a
// transactional batch that would open a transaction is refused for an epoch
// older than the producer's, then for a missing verification; then the epoch
// and the sequence of any batch; a non-transactional batch inside the
// producer's transaction only then. Strata refused a non-transactional batch
// inside a transaction with INVALID_TXN_STATE whatever its epoch and sequence,
// and checked the verification before the duplicate and the epoch.
func TestAppendCheckOrder(t *testing.T) {
	const pid = 7
	type step struct {
		epoch, seq    int
		transactional bool
		marker        bool // a transaction marker at epoch (transaction version 0) instead of a batch
	}
	build := func(t *testing.T, s step) []byte {
		t.Helper()
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: int16(s.epoch), BaseSequence: int32(s.seq), Transactional: s.transactional},
			[]batch.Record{{Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		history  []step // appended verified (a transactional batch's guard started first)
		next     step
		verify   bool // next is appended with AppendOpts.Verify and no guard
		wantErr  error
		wantBase int64 // when wantErr is nil: the answer's base offset
	}{
		{name: "non-transactional at an older epoch in a transaction", history: []step{{epoch: 2, transactional: true}},
			next: step{epoch: 1, seq: 1}, wantErr: ErrInvalidProducerEpoch},
		{name: "non-transactional with a gap in a transaction", history: []step{{transactional: true}},
			next: step{seq: 5}, wantErr: ErrOutOfOrderSequence},
		{name: "non-transactional in sequence in a transaction", history: []step{{transactional: true}},
			next: step{seq: 1}, wantErr: ErrInvalidTxnState},
		{name: "retry of an ended transaction's batch", history: []step{{transactional: true}, {marker: true}},
			next: step{transactional: true}, verify: true, wantBase: 0},
		{name: "unverified at an older epoch", history: []step{{epoch: 2, transactional: true}, {epoch: 2, marker: true}},
			next: step{epoch: 1, transactional: true}, verify: true, wantErr: ErrInvalidProducerEpoch},
		{name: "unverified with a gap", history: []step{{transactional: true}, {marker: true}},
			next: step{seq: 5, transactional: true}, verify: true, wantErr: ErrInvalidTxnState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			t.Cleanup(func() { p.close() })
			for _, s := range tc.history {
				if s.marker {
					if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: int16(s.epoch)}, 0); err != nil {
						t.Fatal(err)
					}
					continue
				}
				mustAppendVerified(t, p, build(t, s), p.StartTxnVerification(pid, int16(s.epoch)))
			}
			leo := p.LogEndOffset()
			res, err := p.AppendWith(build(t, tc.next), 1, AppendOpts{Verify: tc.verify})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("append: %v, want %v", err, tc.wantErr)
			}
			if err == nil && res.BaseOffset != tc.wantBase {
				t.Fatalf("answered base offset %d, want %d", res.BaseOffset, tc.wantBase)
			}
			if (err != nil || tc.wantBase < leo) && p.LogEndOffset() != leo {
				t.Fatalf("log end %d, want %d: the batch was appended", p.LogEndOffset(), leo)
			}
		})
	}
}

// TestTransactionVersion2FirstSequence: a transactional batch of transaction
// version 2 (AppendOpts.EpochBump) from a producer with no batch on the
// partition must start at sequence 0 (Kafka's ProducerAppendInfo.checkSequence
// with a verification that supports the epoch bump): its client starts every
// transaction at sequence 0 of a new epoch, so another first sequence means
// batches before it were lost. Older clients, and non-transactional batches,
// start an unknown producer at any sequence. Strata started a version 2
// producer at any sequence too.
func TestTransactionVersion2FirstSequence(t *testing.T) {
	const pid = 7
	for _, tc := range []struct {
		name          string
		history       []int32 // sequences of transactional batches at epoch 0 appended before
		seq           int32
		transactional bool
		epochBump     bool
		wantErr       error
	}{
		{name: "unknown producer at 0", seq: 0, transactional: true, epochBump: true},
		{name: "unknown producer past 0", seq: 3, transactional: true, epochBump: true, wantErr: ErrOutOfOrderSequence},
		{name: "in its transaction", history: []int32{0}, seq: 1, transactional: true, epochBump: true},
		{name: "transaction version 1", seq: 3, transactional: true},
		{name: "non-transactional", seq: 3, epochBump: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeaderPartition(t, t.TempDir())
			t.Cleanup(func() { p.close() })
			for _, seq := range tc.history {
				if _, err := p.AppendWith(txnBatch(t, pid, seq, 1, true), 1, AppendOpts{EpochBump: true}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := p.AppendWith(txnBatch(t, pid, tc.seq, 1, tc.transactional), 1, AppendOpts{EpochBump: tc.epochBump})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("append: %v, want %v", err, tc.wantErr)
			}
		})
	}
}
