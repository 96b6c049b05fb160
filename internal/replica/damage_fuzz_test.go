package replica

import (
	"bytes"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

const damagedDir = "/data/t-0"

// The partition directories FuzzReopenDamagedPartition damages.
const (
	// leaderDir: a leader's transactional workload (snapshotWorkload).
	leaderDir = iota
	// followerDir: the leader's batches appended by a follower, in fetches
	// of one to three batches, under four leader epochs, with a divergent
	// batch of a deposed leader truncated away.
	followerDir
	// compactedDir: a leader log compacted once (cleaned segments with
	// offset gaps and thinned batches, the cleaner's checkpoint), then
	// snapshotWorkload on top.
	compactedDir
	damageDirs
)

// damageBase is a cleanly closed partition directory and what a reopened
// copy must agree with.
type damageBase struct {
	once    sync.Once
	fsys    *vfs.MemFS
	want    map[int64][]byte // the reference producer state, by log end offset
	bytes   []byte           // every batch of the log, in order
	active  []byte           // the active segment's file
	epochs  []storage.EpochEntry
	aborted []AbortedTxn // the aborted-transaction index, whole
	// firstDirty is the end of the clean section: a rebuilt
	// aborted-transaction index may lack the transactions begun below it
	// whose batches compaction removed (no reader needs them), so of those
	// only what it holds is checked.
	firstDirty int64
	// followEpoch is the leader epoch a follower's directory reopens
	// following at; -1 for a leader's.
	followEpoch int32
}

// damageBases are built once per fuzzing process, on first use.
var damageBases [damageDirs]damageBase

// damageBaseFor returns directory dir's base, building it on first use.
func damageBaseFor(t *testing.T, dir int) *damageBase {
	b := &damageBases[dir]
	b.once.Do(func() {
		defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
		closeSnapshotMinBytes = 0
		fsys := vfs.NewMem()
		var p *Partition
		switch dir {
		case leaderDir:
			p = openSnapshotPartition(t, fsys, damagedDir)
			b.want, b.followEpoch = snapshotWorkload(t, p), -1
		case followerDir:
			leader := damageBaseFor(t, leaderDir)
			p, b.followEpoch = followerWorkload(t, fsys, leader.bytes, leader.want)
			b.want = leader.want
		case compactedDir:
			p = openSnapshotPartition(t, fsys, damagedDir)
			compactedWorkload(t, p)
			b.want, b.followEpoch = snapshotWorkload(t, p), -1
		}
		b.seal(t, fsys, p)
	})
	if b.fsys == nil {
		t.Skip("the base partition failed to build")
	}
	return b
}

// seal records p's log, epochs, aborted transactions and clean section in b,
// closes p and keeps its directory.
func (b *damageBase) seal(t *testing.T, fsys *vfs.MemFS, p *Partition) {
	t.Helper()
	b.bytes = logBytes(t, p.log, p.log.LogEndOffset())
	b.epochs = p.log.Epochs()
	b.firstDirty = p.log.FirstDirtyOffset()
	var err error
	if b.aborted, err = p.log.AbortedTxns(p.log.LogStartOffset(), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(damagedDir)
	if err != nil {
		t.Fatal(err)
	}
	if b.active, err = vfs.ReadFile(fsys, path.Join(damagedDir, activeSegment(names))); err != nil {
		t.Fatal(err)
	}
	b.fsys = fsys
}

// activeSegment is the name of the highest-based segment file among names.
func activeSegment(names []string) string {
	logs := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasSuffix(n, ".log") })
	return slices.Max(logs)
}

// followerWorkload appends the leader's batches (leaderLog) to a follower, as
// its fetches bring them: the epochs change at fixed batches, and at the
// second change the follower first takes a batch of a leader deposed before
// it was committed, and truncates it when the next leader's epoch shows the
// divergence. After each fetch the follower's state must be the leader's at
// the same log end (want). It returns the follower and the last leader epoch.
func followerWorkload(t *testing.T, fsys vfs.FS, leaderLog []byte, want map[int64][]byte) (*Partition, int32) {
	t.Helper()
	var batches [][]byte
	for it := batch.NewStoredIter(leaderLog); it.Next(); {
		batches = append(batches, it.Batch())
	}
	// The leader epoch of the batches from each index on (2 wrote only the
	// divergent batch).
	epochs := []struct {
		from  int
		epoch int32
	}{{0, 0}, {50, 1}, {100, 3}, {150, 5}}
	p := openFollowerPartition(t, fsys, 0)
	fetch := func(epoch int32, b []byte) {
		t.Helper()
		// The leader's high-water mark: past everything fetched.
		if err := p.appendFromLeader(epoch, p.LogEndOffset(), b, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
	}
	e := 0
	for i := 0; i < len(batches); {
		if e+1 < len(epochs) && i == epochs[e+1].from {
			e++
			if e == 2 {
				// Leader 2 wrote a batch (opening a transaction) that
				// this follower fetched, and lost its leadership before
				// it was committed.
				end := p.log.LogEndOffset()
				follow(t, p, 2)
				fetch(2, stampedBatch(t, 77, 0, true, end, 2))
				follow(t, p, epochs[e].epoch)
				if err := p.truncateTo(epochs[e].epoch, p.LogEndOffset(), end); err != nil {
					t.Fatal(err)
				}
				requireState(t, p, want)
			} else {
				follow(t, p, epochs[e].epoch)
			}
		}
		n := min(1+i%3, len(batches)-i)
		if e+1 < len(epochs) {
			n = min(n, epochs[e+1].from-i)
		}
		var fetched []byte
		for _, b := range batches[i : i+n] {
			b = bytes.Clone(b)
			batch.SetPartitionLeaderEpoch(b, epochs[e].epoch)
			fetched = append(fetched, b...)
		}
		fetch(epochs[e].epoch, fetched)
		requireState(t, p, want)
		i += n
	}
	if got := len(p.log.Epochs()); got != len(epochs) {
		t.Fatalf("the follower's epoch cache has %d entries, want %d: %v", got, len(epochs), p.log.Epochs())
	}
	return p, epochs[len(epochs)-1].epoch
}

// openFollowerPartition opens partition t-0 on broker 2, following broker 1
// at epoch, on damagedDir with 4 KiB segments.
func openFollowerPartition(t *testing.T, fsys vfs.FS, epoch int32) *Partition {
	t.Helper()
	return openPartitionOn(t, fsys, damagedDir, snapshotLogConfig, 2, followingOne(epoch))
}

// follow makes follower p follow broker 1 at epoch.
func follow(t *testing.T, p *Partition, epoch int32) {
	t.Helper()
	if _, err := p.applyState(followingOne(epoch), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// followingOne is the partition state of broker 2 following broker 1 at epoch.
func followingOne(epoch int32) *metadata.Partition {
	return &metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: epoch}
}

// stampedBatch is txnBatch's batch of one record at sequence seq as a leader
// of epoch stamps it at offset.
func stampedBatch(t *testing.T, pid int64, seq int32, transactional bool, offset int64, epoch int32) []byte {
	t.Helper()
	b := txnBatch(t, pid, seq, 1, transactional)
	batch.SetBaseOffset(b, offset)
	batch.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// compactedWorkload appends keyed batches for a compaction pass to thin and
// remove, then runs it: each round, a batch without a producer and one of
// producers 11 (idempotent), 12 (transactions, committed) and 13
// (transactions, every other one aborted), whose keys recur (but one in
// every third round) until the last five rounds. Those write each key once
// and end every transaction, so the producers' last five batches survive
// the pass unchanged: a state rebuilt by scanning the compacted log then
// agrees with the one appends built, whichever snapshot the scan starts
// from.
func compactedWorkload(t *testing.T, p *Partition) {
	t.Helper()
	const rounds, uniqueFrom = 20, 15
	seq := map[int64]int32{}
	for round := range rounds {
		for _, pid := range []int64{-1, 11, 12, 13} {
			keys := make([][]byte, 3)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "%d-%d", pid, i)
				if round >= uniqueFrom || round%3 == 0 && i == 0 {
					keys[i] = fmt.Appendf(keys[i], "-%d", round)
				}
			}
			mustAppend(t, p, keyedBatch(t, pid, seq[pid], keys, pid >= 12))
			seq[pid] += int32(len(keys))
		}
		mustMarker(t, p, 12, true)
		mustMarker(t, p, 13, round >= uniqueFrom || round%2 == 0)
	}
	st, err := p.log.Compact(p.LastStableOffset(), storage.CompactOptions{DeleteRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned || st.BatchesRemoved == 0 || st.BatchesRewritten == 0 || st.AbortedRemoved == 0 {
		t.Fatalf("the compaction pass left no gap, thinned batch or aborted records out: %+v", st)
	}
}

// keyedBatch builds a batch with a record per key of producer pid at
// sequence seq, or of no producer for pid -1.
func keyedBatch(t *testing.T, pid int64, seq int32, keys [][]byte, transactional bool) []byte {
	t.Helper()
	recs := make([]batch.Record, len(keys))
	for i, k := range keys {
		recs[i] = batch.Record{Key: k, Value: fmt.Appendf(nil, "%s@%d", k, seq)}
	}
	b, err := batch.Build(batch.BuildOptions{Idempotent: pid >= 0, ProducerID: pid, BaseSequence: seq, Transactional: transactional}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restoreUncovered writes back, at every batch a segment held before damage
// (the active segment's file, active), the two header fields its CRC does
// not cover: the base offset (a broker rewrites it without recomputing the
// CRC) and the partition leader epoch. A byte changed there leaves a valid
// batch that no check can tell from one written so (Kafka's format; a
// forward gap in offsets is legal after compaction), so it is outside what
// recovery can be asked to find.
func restoreUncovered(f vfs.File, size int64, active []byte) error {
	for pos := 0; pos+batch.LengthPrefix <= len(active) && int64(pos) < size; {
		n, err := batch.FrameSize(active[pos:])
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(active[pos:pos+8], int64(pos)); err != nil {
			return err
		}
		if _, err := f.WriteAt(active[pos+12:pos+16], int64(pos+12)); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// Damage operations a fuzz input applies to one file.
const (
	damageTruncate = iota
	damageOverwrite
	damageAppend
	damageOps
)

// FuzzReopenDamagedPartition damages one file, or two, of a partition's
// directory (cuts it, overwrites some of its bytes, or appends garbage) as a
// crash or a failing disk could, and reopens the partition after an unclean
// stop. mode picks the directory (mode % damageDirs: a transactional
// leader's, a follower's of the same batches, a compacted one's) and whether
// file2 is damaged too (mode / damageDirs odd). Whatever the files (the
// active segment, an index, a time index, an aborted-transaction index, a
// producer-state snapshot, a checkpoint), the partition must open, keep a
// prefix of the batches it had, rebuild the producer and transaction state,
// the leader-epoch cache and the aborted transactions of exactly that
// prefix, and take appends (a follower's from its leader); a compacted log
// must keep its clean section or forget it, and compact again. Earlier
// segments' data is left alone: below the recovery point nothing is scanned
// again, as in Kafka.
func FuzzReopenDamagedPartition(f *testing.F) {
	none := []byte(nil)
	f.Add(uint8(leaderDir), uint8(0), uint8(damageTruncate), uint32(10), none, uint8(0), uint8(0), uint32(0), none)
	f.Add(uint8(leaderDir), uint8(1), uint8(damageOverwrite), uint32(3), []byte{0xff, 0x00, 0x13}, uint8(0), uint8(0), uint32(0), none)
	f.Add(uint8(leaderDir), uint8(2), uint8(damageAppend), uint32(0), bytes.Repeat([]byte{0}, 64), uint8(0), uint8(0), uint32(0), none)
	f.Add(uint8(leaderDir), uint8(5), uint8(damageOverwrite), uint32(40), []byte("garbage"), uint8(0), uint8(0), uint32(0), none)
	f.Add(uint8(leaderDir), uint8(7), uint8(damageTruncate), uint32(0), none, uint8(0), uint8(0), uint32(0), none)
	for dir := range uint8(damageDirs) {
		f.Add(dir, uint8(1), uint8(damageTruncate), uint32(300), none, uint8(0), uint8(0), uint32(0), none)
		f.Add(dir, uint8(3), uint8(damageOverwrite), uint32(20), []byte("garbage"), uint8(0), uint8(0), uint32(0), none)
		f.Add(dir+damageDirs, uint8(1), uint8(damageTruncate), uint32(300), none, uint8(0), uint8(damageTruncate), uint32(5), none)
		f.Add(dir+damageDirs, uint8(200), uint8(damageOverwrite), uint32(9), []byte{1}, uint8(201), uint8(damageAppend), uint32(0), []byte{0})
	}
	f.Fuzz(func(t *testing.T, mode, file, op uint8, pos uint32, data []byte, file2, op2 uint8, pos2 uint32, data2 []byte) {
		reopenDamaged(t, mode, damage{file, op, pos, data}, damage{file2, op2, pos2, data2})
	})
}

// damage is what a fuzz input does to one file: op (mod damageOps) at pos
// (mod the file's size + 1) with data, to the file damageTarget picks.
type damage struct {
	file, op uint8
	pos      uint32
	data     []byte
}

// reopenDamaged is FuzzReopenDamagedPartition's check of one input.
func reopenDamaged(t *testing.T, mode uint8, first, second damage) {
	t.Helper()
	base := damageBaseFor(t, int(mode%damageDirs))
	fsys := base.fsys.CrashClone()
	if err := fsys.Remove(path.Join(damagedDir, "clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(damagedDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	damaged := []string{damageTarget(names, int(first.file))}
	if mode/damageDirs%2 == 1 {
		for i := int(second.file); ; i++ {
			if name := damageTarget(names, i); name != damaged[0] {
				damaged = append(damaged, name)
				break
			}
		}
	}
	damageFile(t, fsys, damaged[0], first, base.active)
	if len(damaged) > 1 {
		damageFile(t, fsys, damaged[1], second, base.active)
	}
	t.Logf("damaged %v of directory %d", damaged, mode%damageDirs)

	p := base.reopen(t, fsys)
	defer p.close()
	leo := p.log.LogEndOffset()
	if got := logBytes(t, p.log, leo); !bytes.HasPrefix(base.bytes, got) {
		t.Fatalf("the reopened log (%d bytes to offset %d) is not a prefix of the log written", len(got), leo)
	}
	requireState(t, p, base.want)
	base.requireIndexes(t, p.log)
	if err := base.takeAppend(t, p); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
	if base.firstDirty > 0 {
		if _, err := p.log.Compact(p.LastStableOffset(), storage.CompactOptions{DeleteRetention: time.Hour}); err != nil {
			t.Fatalf("compacting after reopening: %v", err)
		}
	}
}

// reopen opens the damaged copy fsys of b's directory in b's role; a
// follower takes its leader's high-water mark, past its log end.
func (b *damageBase) reopen(t *testing.T, fsys vfs.FS) *Partition {
	t.Helper()
	if b.followEpoch < 0 {
		return openSnapshotPartition(t, fsys, damagedDir)
	}
	p := openFollowerPartition(t, fsys, b.followEpoch)
	p.followHighWatermark(math.MaxInt64)
	return p
}

// takeAppend appends a batch to reopened p: as its leader would (a follower's
// comes from its leader, at its log end).
func (b *damageBase) takeAppend(t *testing.T, p *Partition) error {
	t.Helper()
	if b.followEpoch < 0 {
		_, err := p.log.AppendValidated(txnBatch(t, 99, 0, 1, false), 1, storage.AppendHints{})
		return err
	}
	leo := p.log.LogEndOffset()
	if err := p.appendFromLeader(b.followEpoch, p.LogEndOffset(), stampedBatch(t, 99, 0, false, leo, b.followEpoch), leo+1); err != nil {
		return err
	}
	if got := p.log.LogEndOffset(); got != leo+1 {
		return fmt.Errorf("log end %d after the leader's batch at %d", got, leo)
	}
	return nil
}

// requireIndexes checks the leader-epoch cache and the aborted-transaction
// index of reopened log l against b's, cut at l's end, and its clean
// section: b's, or none (a damaged cleaner checkpoint).
func (b *damageBase) requireIndexes(t *testing.T, l *storage.Log) {
	t.Helper()
	leo := l.LogEndOffset()
	epochs := slices.DeleteFunc(slices.Clone(b.epochs), func(e storage.EpochEntry) bool { return e.StartOffset >= leo })
	if got := l.Epochs(); !slices.Equal(got, epochs) {
		t.Fatalf("leader epochs %v, want %v", got, epochs)
	}
	got, err := l.AbortedTxns(l.LogStartOffset(), math.MaxInt64)
	if err != nil {
		t.Fatalf("aborted transactions: %v", err)
	}
	want := slices.DeleteFunc(slices.Clone(b.aborted), func(a AbortedTxn) bool { return a.LastOffset >= leo })
	clean := func(a AbortedTxn) bool { return a.FirstOffset < b.firstDirty }
	for _, a := range got {
		if clean(a) && !slices.Contains(want, a) {
			t.Fatalf("aborted transaction %+v in the clean section, not in the log's index %v", a, want)
		}
	}
	got, want = slices.DeleteFunc(got, clean), slices.DeleteFunc(want, clean)
	if !slices.Equal(got, want) {
		t.Fatalf("aborted transactions %v, want %v", got, want)
	}
	if d := l.FirstDirtyOffset(); d != b.firstDirty && d != 0 {
		t.Fatalf("first dirty offset %d, want %d or 0", d, b.firstDirty)
	}
}

// damageTarget is the file of the directory that pick names: names[pick %
// len(names)], where a segment's data stands for the active segment's.
func damageTarget(names []string, pick int) string {
	name := names[pick%len(names)]
	if strings.HasSuffix(name, ".log") {
		return activeSegment(names)
	}
	return name
}

// damageFile applies d to the file name of the partition directory: to the
// active segment, whose file was active before, what restoreUncovered leaves.
func damageFile(t *testing.T, fsys *vfs.MemFS, name string, d damage, active []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(path.Join(damagedDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	at := int64(d.pos) % (size + 1)
	switch d.op % damageOps {
	case damageTruncate:
		err = f.Truncate(at)
	case damageOverwrite:
		_, err = f.WriteAt(d.data, at)
		if err == nil && strings.HasSuffix(name, ".log") {
			err = restoreUncovered(f, size, active)
		}
	case damageAppend:
		_, err = f.WriteAt(d.data, size)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
