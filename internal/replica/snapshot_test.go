package replica

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestSnapshotCodec: a state survives encoding, and every damaged payload
// (cut short, wrong version, trailing bytes, a count too large) is refused
// without a panic.
func TestSnapshotCodec(t *testing.T) {
	producers, txns := newProducerState(), newTxnState()
	for i := range 7 { // more batches than are kept
		producers.record(5, 1, int32(3*i), 3, int64(10*i), int64(10*i+2), int64(1000+i))
	}
	producers.record(9, 0, 0, 1, 100, 100, -1)
	producers.fence(9, 2, 4, 2000)
	producers.fence(12, 3, 1, 3000) // a marker alone
	put(&txns.open, 5, 60)
	txns.unreplicated = []endedTxn{{first: 9, marker: 30}, {first: 31, marker: 40}}

	payload := encodeSnapshot(producers, txns)
	gotP, gotT, err := decodeSnapshot(payload)
	if err != nil {
		t.Fatal(err)
	}
	if again := encodeSnapshot(gotP, gotT); !bytes.Equal(again, payload) {
		t.Fatalf("decoded state encodes differently:\n%x\n%x", again, payload)
	}
	if e := gotP.entries[5]; len(e.batches) != producerBatchesKept || e.batches[0].firstSeq != 6 || e.lastTimestamp != 1006 {
		t.Fatalf("producer 5 decoded as %+v", e)
	}
	if e := gotP.entries[9]; e.epoch != 2 || e.coordinatorEpoch != 4 || len(e.batches) != 0 {
		t.Fatalf("producer 9 decoded as %+v", e)
	}
	if gotT.open[5] != 60 || !slices.Equal(gotT.unreplicated, txns.unreplicated) {
		t.Fatalf("transactions decoded as %+v", gotT)
	}
	// The empty state.
	if _, _, err := decodeSnapshot(encodeSnapshot(newProducerState(), newTxnState())); err != nil {
		t.Fatalf("empty state: %v", err)
	}

	// Version 2 (as integ wrote it) held the aborted transactions, which the
	// log's index holds now: they are skipped.
	v2 := []byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1}
	v2 = binary.BigEndian.AppendUint64(v2, 9)
	v2 = binary.BigEndian.AppendUint64(v2, 3)
	v2 = binary.BigEndian.AppendUint64(v2, 8)
	v2 = append(v2, 0, 0, 0, 1)
	v2 = binary.BigEndian.AppendUint64(v2, 3)
	v2 = binary.BigEndian.AppendUint64(v2, 8)
	if _, gotT, err := decodeSnapshot(v2); err != nil || gotT.open[5] != 7 || !slices.Equal(gotT.unreplicated, []endedTxn{{3, 8}}) {
		t.Fatalf("version 2: %+v, %v", gotT, err)
	}

	for n := range len(payload) {
		if _, _, err := decodeSnapshot(payload[:n]); !errors.Is(err, errBadSnapshot) {
			t.Fatalf("payload cut to %d of %d bytes: %v", n, len(payload), err)
		}
	}
	bad := map[string][]byte{
		"version 5":      append([]byte{0, 5}, payload[2:]...),
		"trailing byte":  append(slices.Clone(payload), 0),
		"huge count":     append([]byte{0, 1, 0xff, 0xff, 0xff, 0xff}, payload[6:]...),
		"six batches":    func() []byte { b := slices.Clone(payload); b[2+4+8+2+4+8] = 6; return b }(),
		"version 2 cut":  v2[:len(v2)-1],
		"ended order":    encodeSnapshot(newProducerState(), &txnState{open: map[int64]int64{}, unreplicated: []endedTxn{{5, 9}, {1, 2}}}),
		"producer twice": append(append([]byte{0, 1, 0, 0, 0, 2}, bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 2)...), make([]byte, 8)...),
	}
	for name, b := range bad {
		if _, _, err := decodeSnapshot(b); !errors.Is(err, errBadSnapshot) {
			t.Errorf("%s: %v, want errBadSnapshot", name, err)
		}
	}
	// Any single flipped byte: an error or a state, never a panic.
	for i := range payload {
		b := slices.Clone(payload)
		b[i] ^= 0xa5
		decodeSnapshot(b)
	}
}

// snapshotWorkload appends idempotent and transactional batches of three
// producers, with commits and aborts, to a leader partition whose segments
// roll every few batches. It returns the state's encoding before and after
// each append, by log end offset: the reference any reopened log must rebuild.
func snapshotWorkload(t *testing.T, p *Partition) map[int64][]byte {
	t.Helper()
	want := map[int64][]byte{}
	note := func() { want[p.log.LogEndOffset()] = encodeState(p) }
	note()
	seq := map[int64]int32{}
	const rounds = 40
	for round := range rounds {
		for _, pid := range []int64{1, 2, 3} {
			txn := pid != 1
			mustAppend(t, p, txnBatch(t, pid, seq[pid], 4, txn))
			seq[pid] += 4
			note()
		}
		// Producer 2 commits every round, 3 aborts every other round and
		// leaves its last transaction open.
		mustMarker(t, p, 2, true)
		note()
		if round%2 == 1 && round < rounds-1 {
			mustMarker(t, p, 3, false)
			note()
		}
	}
	return want
}

// snapshotLogConfig is the log configuration of the snapshot tests'
// partitions: 4 KiB segments.
var snapshotLogConfig = storage.Config{SegmentBytes: 4096, IndexMaxBytes: 64 << 10}

// openSnapshotPartition opens a leader partition on dir with 4 KiB segments.
func openSnapshotPartition(t *testing.T, fsys vfs.FS, dir string) *Partition {
	t.Helper()
	return openPartitionOn(t, fsys, dir, snapshotLogConfig, 1, &metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0})
}

// encodeState is p's state as a snapshot payload, once the high-water mark
// has released the ended transactions it passed (which a reopened log, its
// HWM at the log start, holds until its HWM passes them again).
func encodeState(p *Partition) []byte {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.txns.lastStable(p.HighWatermark())
	return encodeSnapshot(p.producers, p.txns)
}

// requireState checks that p's state is the reference state at its log end.
func requireState(t *testing.T, p *Partition, want map[int64][]byte) {
	t.Helper()
	end := p.log.LogEndOffset()
	ref, ok := want[end]
	if !ok {
		t.Fatalf("no reference state at log end %d", end)
	}
	if got := encodeState(p); !bytes.Equal(got, ref) {
		t.Fatalf("state at %d differs from the one appends built:\n got %x\nwant %x", end, got, ref)
	}
}

func snapshotFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// copyDir copies a live partition directory file by file: what a kill -9
// leaves (the page cache survives it).
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestProducerSnapshotRestart: a reopened partition starts from the newest
// usable producer-state snapshot and ends with the state appends built, after
// a clean close, a kill -9, a torn or damaged snapshot, none at all (a log
// from before snapshots existed), a snapshot a crash left above the log end,
// and a power cut.
func TestProducerSnapshotRestart(t *testing.T) {
	defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
	closeSnapshotMinBytes = 0
	dir := t.TempDir()
	p := openSnapshotPartition(t, vfs.Default, dir)
	want := snapshotWorkload(t, p)
	rolls := p.log.Rolls()
	if rolls < 3 {
		t.Fatalf("only %d rolls: the workload must cross segments", rolls)
	}
	if n := len(snapshotFiles(t, dir)); n != 2 {
		t.Fatalf("%d snapshot files after %d rolls, want the newest 2", n, rolls)
	}
	// A small log (under closeSnapshotMinBytes) is scanned instead.
	small := newLeaderPartition(t, t.TempDir())
	mustAppend(t, small, txnBatch(t, 1, 0, 1, false))
	closeSnapshotMinBytes = 1 << 20
	if err := small.close(); err != nil {
		t.Fatal(err)
	}
	closeSnapshotMinBytes = 0
	if got := small.log.ProducerSnapshots(); len(got) != 0 {
		t.Fatalf("a small log wrote snapshots %v at close", got)
	}
	lastRoll := p.snapshotOffset
	killed := copyDir(t, dir) // before Close writes its snapshot
	end := p.log.LogEndOffset()
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	closed := copyDir(t, dir)

	reopen := func(t *testing.T, dir string, wantFrom int64) {
		t.Helper()
		p := openSnapshotPartition(t, vfs.Default, dir)
		defer p.close()
		if p.snapshotOffset != wantFrom {
			t.Errorf("state loaded from snapshot at %d, want %d", p.snapshotOffset, wantFrom)
		}
		requireState(t, p, want)
	}
	t.Run("clean close", func(t *testing.T) {
		reopen(t, copyDir(t, closed), end) // nothing left to scan
	})
	t.Run("kill", func(t *testing.T) {
		reopen(t, copyDir(t, killed), lastRoll) // scans from the last roll
	})
	t.Run("newest torn", func(t *testing.T) {
		d := copyDir(t, closed)
		newest := filepath.Join(d, fmt.Sprintf("%020d.snapshot", end))
		b, err := os.ReadFile(newest)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(newest, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		reopen(t, d, lastRoll)
	})
	t.Run("all damaged", func(t *testing.T) {
		d := copyDir(t, closed)
		for _, name := range snapshotFiles(t, d) {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-1] ^= 1
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		reopen(t, d, -1) // the full scan
	})
	t.Run("no snapshots (previous format)", func(t *testing.T) {
		d := copyDir(t, closed)
		for _, name := range snapshotFiles(t, d) {
			if err := os.Remove(name); err != nil {
				t.Fatal(err)
			}
		}
		reopen(t, d, -1)
	})
	t.Run("snapshot above the recovered end", func(t *testing.T) {
		// The newest segment lost its last batches (a torn tail): the
		// snapshot written at close covers records the log no longer has.
		d := copyDir(t, killed)
		if err := os.WriteFile(filepath.Join(d, filepath.Base(mustNewestSnapshot(t, closed))), mustRead(t, mustNewestSnapshot(t, closed)), 0o644); err != nil {
			t.Fatal(err)
		}
		logs, _ := filepath.Glob(filepath.Join(d, "*.log"))
		slices.Sort(logs)
		active := logs[len(logs)-1]
		st, err := os.Stat(active)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(active, st.Size()-10); err != nil {
			t.Fatal(err)
		}
		q := openSnapshotPartition(t, vfs.Default, d)
		defer q.close()
		if q.log.LogEndOffset() >= end {
			t.Fatalf("log end %d after the torn tail, want below %d", q.log.LogEndOffset(), end)
		}
		if q.snapshotOffset > q.log.LogEndOffset() {
			t.Fatalf("state loaded from a snapshot at %d, above the log end %d", q.snapshotOffset, q.log.LogEndOffset())
		}
		for _, name := range snapshotFiles(t, d) {
			if filepath.Base(name) == fmt.Sprintf("%020d.snapshot", end) {
				t.Fatalf("snapshot above the log end kept: %s", name)
			}
		}
		requireState(t, q, want)
	})
}

// TestProducerSnapshotPowerCut: snapshots are written without fsync; after a
// power cut at any point of the workload the reopened partition still has
// the state of the log it recovered.
func TestProducerSnapshotPowerCut(t *testing.T) {
	defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
	closeSnapshotMinBytes = 0
	const dir = "/data/t-0"
	fs := vfs.NewMem()
	p := openSnapshotPartition(t, fs, dir)
	want := map[int64][]byte{0: encodeSnapshot(newProducerState(), newTxnState())}
	seq := int32(0)
	for i := range 40 {
		mustAppend(t, p, txnBatch(t, 1, seq, 8, false))
		seq += 8
		p.txnMu.Lock()
		want[p.log.LogEndOffset()] = encodeSnapshot(p.producers, p.txns)
		p.txnMu.Unlock()
		if i%3 != 0 {
			continue
		}
		for _, opts := range [][]vfs.CrashOption{nil, {vfs.WithTornWrites(uint64(i))}} {
			clone := fs.CrashClone(opts...)
			q := openSnapshotPartition(t, clone, dir)
			requireState(t, q, want)
			q.close()
		}
	}
	p.close()
}

func mustNewestSnapshot(t *testing.T, dir string) string {
	t.Helper()
	names := snapshotFiles(t, dir)
	if len(names) == 0 {
		t.Fatal("no snapshot")
	}
	slices.Sort(names)
	return names[len(names)-1]
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotVersion1Loads: a snapshot written before ended transactions
// were kept (version 1, testdata/producer-snapshot-v1.hex, as the previous
// release wrote it) still loads, with none held.
func TestSnapshotVersion1Loads(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "producer-snapshot-v1.hex"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	producers, txns, err := decodeSnapshot(payload)
	if err != nil {
		t.Fatal(err)
	}
	e := producers.entries[5]
	if e == nil || e.epoch != 1 || len(e.batches) != 2 || e.batches[1] != (batchMeta{firstSeq: 3, lastSeq: 4, firstOffset: 20, lastOffset: 21, timestamp: 1001}) || e.lastTimestamp != 1001 {
		t.Fatalf("producer 5 decoded as %+v", e)
	}
	if e := producers.entries[9]; e == nil || e.epoch != 2 || e.coordinatorEpoch != 4 {
		t.Fatalf("producer 9 decoded as %+v", e)
	}
	if txns.open[5] != 20 || len(txns.unreplicated) != 0 {
		t.Fatalf("transactions decoded as %+v", txns)
	}
	// Written again, it is the current version.
	if again := encodeSnapshot(producers, txns); again[1] != snapshotVersion {
		t.Fatalf("re-encoded as version %d", again[1])
	}
}
