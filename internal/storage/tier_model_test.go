package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestTierMatchesModel drives a tiered log (a Log, its Tier and an object
// store: a file store that copies segments, one on the log's filesystem that
// links them, or one that reads every body itself as S3 does) with random
// sequences of appends (each waited for), transactions, uploads, leader and
// follower retention passes, DeleteRecords, clean restarts, power cuts of the
// local disk (torn writes included) and of the store's filesystem, leader
// changes, a deposed leader's uploads, a store that is down, slower than its
// callers' deadlines or goes down in the middle of an operation, broken
// objects, reads at random offsets and timestamp lookups. The model is the
// list of batches appended (a batch never leaves it: a read either serves its
// exact bytes or is refused), the partition's log start offset and the
// aborted transactions. After every step it checks what tier.go,
// tier_read.go, retention.go and docs/storage.md promise:
//
//   - every offset from the log start to the log end reads back the model's
//     bytes, routed as a partition routes a fetch (the store below the local
//     log start, the local log from it), whole batches within the size
//     limit; below the log start and past the log end a read is refused, and
//     the tier alone serves nothing outside its manifest's range;
//   - a timestamp lookup (remote part first, then the local log) finds the
//     first record at or after the log start whose timestamp is at least the
//     one asked for;
//   - the stored manifest and the tier's copy decode, end at no offset past
//     every high-water mark given to Upload, and name only objects that hold
//     the model's bytes for their range with a block index that checks and
//     the epochs that wrote them; with the local log they hold every offset
//     from the log start (nothing leaves the disk before it is uploaded);
//   - an upload that succeeds uploads every closed segment below the
//     high-water mark; retention deletes only what its rules allow, all of it
//     in one pass, and leaves no orphan after a sweep; DeleteRecords moves the
//     log start to its offset at once;
//   - a restart or power cut loses no append and brings back no deleted
//     record;
//   - a store failure makes operations fail with ErrRemoteUnavailable, and a
//     broken object makes reads of it fail with ErrRemoteUnavailable or
//     ErrRemoteCorrupt, never serve other bytes;
//   - the manifest lists every aborted transaction with a batch or marker in
//     an uploaded segment, with its first batch's offset, and a fetch served
//     from the store is told of each one it touches;
//   - a deposed leader's upload is fenced once the new leader wrote the
//     manifest; LastUploaded is the last segment's end and epoch.
func TestTierMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newTierModel(rt)
		defer m.close()
		m.run(rt)
	})
}

// run draws a sequence of steps, appends the most often, and checks the
// invariants after each. (rapid's Repeat weighs its actions alike and runs 30
// of them on average: too few appends to fill and upload many segments.)
func (m *tierModel) run(rt *rapid.T) {
	actions := []struct {
		name   string
		weight int
		run    func(*rapid.T)
	}{
		{"append", 10, m.append},
		{"txnAppend", 2, m.txnAppend},
		{"txnEnd", 3, m.txnEnd},
		{"tick", 3, m.tick},
		{"upload", 6, m.upload},
		{"retention", 5, m.retention},
		{"localRetention", 1, m.localRetention},
		{"setRetention", 1, m.setRetention},
		{"deleteRecords", 2, m.deleteRecords},
		{"restart", 1, m.restart},
		{"powerCut", 2, m.powerCut},
		{"storePowerCut", 1, m.storePowerCut},
		{"leaderChange", 1, m.leaderChange},
		{"deposedUpload", 2, m.deposedUpload},
		{"storeFault", 2, m.storeFault},
		{"damage", 1, m.damage},
		{"read", 6, m.read},
		{"timestamp", 3, m.timestamp},
	}
	var names []string
	byName := map[string]func(*rapid.T){}
	for _, a := range actions {
		for range a.weight {
			names = append(names, a.name)
		}
		byName[a.name] = a.run
	}
	m.check(rt)
	for range rapid.IntRange(10, 120).Draw(rt, "steps") {
		a := rapid.SampledFrom(names).Draw(rt, "action")
		byName[a](rt)
		m.check(rt)
	}
}

// tierModel is the state of one TestTierMatchesModel sequence.
type tierModel struct {
	clk     *clock
	kind    string     // the store: "file" (copies), "linked" (on the log's filesystem) or "reading" (reads bodies: S3's path)
	disk    *vfs.MemFS // the log's filesystem
	objFS   *vfs.MemFS // the store's (disk itself when linked)
	store   *modelStore
	logCfg  Config
	tierCfg TierConfig
	l       *Log
	tier    *Tier
	epoch   int32
	// deposed is the tier of the leader before the last leader change, still
	// on deposedEpoch; nil when there is none (or after a restart).
	deposed      *Tier
	deposedEpoch int32
	// skewed: some batch's timestamps are older than an earlier batch's, so
	// a retention pass by age need not leave nothing for the next.
	skewed bool
	// endLimit is the largest high-water mark given to an upload and offset
	// given to DeleteRecords: no manifest ends past it.
	endLimit int64
	cancels  []context.CancelFunc

	batches []modelBatch // every batch appended, in offset order
	start   int64        // the partition's log start offset
	// damaged holds the bases of the remote segments whose objects the test
	// broke: reads there may fail, never serve other bytes.
	damaged map[int64]bool
	open    map[int64]int64 // open transactions: producer id -> first offset
	seqs    map[int64]int32 // next sequence by producer id
	aborts  []AbortEntry    // every aborted transaction, by marker
}

type modelBatch struct {
	base, next int64
	data       []byte
	pid        int64 // transactional producer, or -1
	epoch      int32
}

const modelObjects = "/objects"

func newTierModel(rt *rapid.T) *tierModel {
	m := &tierModel{
		clk:     newClock(),
		kind:    rapid.SampledFrom([]string{"file", "linked", "reading"}).Draw(rt, "store"),
		disk:    vfs.NewMem(),
		damaged: map[int64]bool{},
		open:    map[int64]int64{},
		seqs:    map[int64]int32{},
	}
	m.objFS = vfs.NewMem()
	if m.kind == "linked" {
		m.objFS = m.disk
	}
	m.store = newModelStore(rt, m.objFS)
	m.logCfg = Config{
		SegmentBytes:       rapid.SampledFrom([]int64{2048, 4096}).Draw(rt, "segmentBytes"),
		IndexIntervalBytes: rapid.SampledFrom([]int{1, 200, 4096}).Draw(rt, "indexInterval"),
		IndexMaxBytes:      testIndexBytes,
		SegmentAge:         rapid.SampledFrom([]time.Duration{0, 30 * time.Minute}).Draw(rt, "segmentAge"),
		LogAppendTime:      rapid.Bool().Draw(rt, "logAppendTime"),
		RetentionAge:       -1,
		RetentionBytes:     -1,
		Now:                m.clk.Now,
	}
	var cache *BlockCache
	if c := rapid.SampledFrom([]int64{0, 4096, 1 << 20}).Draw(rt, "cacheBytes"); c > 0 {
		cache = NewBlockCache(c)
	}
	m.tierCfg = TierConfig{
		Prefix:     tierPrefix,
		Cache:      cache,
		BlockBytes: rapid.SampledFrom([]int{100, 1024, 4096}).Draw(rt, "blockBytes"),
		Retention:  drawTierRetention(rt),
		Now:        m.clk.Now,
	}
	var err error
	if m.l, err = Open(m.disk, testDir, m.logCfg); err != nil {
		rt.Fatal(err)
	}
	m.newTier(rt)
	return m
}

func drawTierRetention(rt *rapid.T) TierRetention {
	return TierRetention{
		Age:        rapid.SampledFrom([]time.Duration{-1, 30 * time.Minute, 2 * time.Hour}).Draw(rt, "retentionAge"),
		Bytes:      rapid.SampledFrom([]int64{-1, 8 << 10, 32 << 10}).Draw(rt, "retentionBytes"),
		LocalAge:   rapid.SampledFrom([]time.Duration{-1, 0, 30 * time.Minute}).Draw(rt, "localRetentionAge"),
		LocalBytes: rapid.SampledFrom([]int64{4096, 0, -1, 16 << 10}).Draw(rt, "localRetentionBytes"),
	}
}

func (m *tierModel) close() {
	m.store.setSlow(false) // read-aheads waiting on the store finish
	for _, cancel := range m.cancels {
		cancel()
	}
	_ = m.l.Close()
}

// ctx is the context of one call into the tier: a store slower than the
// caller's deadline is simulated with a short one (the store waits for it).
func (m *tierModel) ctx() context.Context {
	d := 10 * time.Second
	if m.store.isSlow() {
		d = time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	m.cancels = append(m.cancels, cancel)
	return ctx
}

func (m *tierModel) healthy() bool { return !m.store.down.Load() && !m.store.isSlow() }

// newTier gives the log a new tier (a restart, a new leader) and loads it; a
// load the store fails leaves it unloaded, as RunTiering would retry.
func (m *tierModel) newTier(rt *rapid.T) {
	cfg := m.tierCfg
	cfg.Store = m.store.forTier(m.kind)
	m.tier = NewTier(m.l, cfg)
	if err := m.tier.Load(m.ctx()); err != nil {
		m.expectStoreFault(rt, "Load", err)
	}
}

// expectStoreFault fails unless err is the tier's answer to a store the test
// made unavailable.
func (m *tierModel) expectStoreFault(rt *rapid.T, op string, err error) {
	rt.Helper()
	if m.healthy() || !errors.Is(err, ErrRemoteUnavailable) {
		rt.Fatalf("%s: %v (store down %v, slow %v)", op, err, m.store.down.Load(), m.store.isSlow())
	}
}

func (m *tierModel) leo() int64 {
	if len(m.batches) == 0 {
		return 0
	}
	return m.batches[len(m.batches)-1].next
}

// lso is the last stable offset: the first offset of the oldest open
// transaction, or the log end.
func (m *tierModel) lso() int64 {
	lso := m.leo()
	for _, first := range m.open {
		lso = min(lso, first)
	}
	return lso
}

// batchAt returns the index of the model batch holding offset, or -1.
func (m *tierModel) batchAt(offset int64) int {
	i, _ := slices.BinarySearchFunc(m.batches, offset, func(b modelBatch, o int64) int {
		switch {
		case b.next <= o:
			return -1
		case b.base > o:
			return 1
		}
		return 0
	})
	if i == len(m.batches) || m.batches[i].base > offset {
		return -1
	}
	return i
}

// rangeBytes returns the model's bytes of [base, next), which must be whole
// batches.
func (m *tierModel) rangeBytes(base, next int64) ([]byte, bool) {
	i := m.batchAt(base)
	if i < 0 || m.batches[i].base != base {
		return nil, false
	}
	var out []byte
	for ; i < len(m.batches) && m.batches[i].next <= next; i++ {
		out = append(out, m.batches[i].data...)
		if m.batches[i].next == next {
			return out, true
		}
	}
	return nil, false
}

// appendBatch appends b as leader, waits until it is durable and records it.
func (m *tierModel) appendBatch(rt *rapid.T, b []byte, pid int64) modelBatch {
	info, err := m.l.Append(b, m.epoch)
	if err != nil {
		rt.Fatalf("Append: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.l.WaitDurable(ctx, info.LastOffset); err != nil {
		rt.Fatalf("WaitDurable: %v", err)
	}
	mb := modelBatch{base: info.FirstOffset, next: info.LastOffset + 1, data: b, pid: pid, epoch: m.epoch}
	if mb.base != m.leo() {
		rt.Fatalf("append at %d, model log end %d", mb.base, m.leo())
	}
	m.batches = append(m.batches, mb)
	return mb
}

func (m *tierModel) append(rt *rapid.T) {
	for range rapid.IntRange(1, 4).Draw(rt, "batches") {
		n := rapid.IntRange(1, 5).Draw(rt, "records")
		ts := m.clk.Now().UnixMilli()
		if late := rapid.IntRange(0, 60).Draw(rt, "lateMinutes"); late > 0 && late%4 == 0 {
			// A producer's timestamp older than the log's newest.
			ts -= int64(late) * time.Minute.Milliseconds()
			m.skewed = true
		}
		b := batchtest.Build(batchtest.Options{FirstTimestamp: ts, Records: batchtest.Values(n, rapid.IntRange(1, 300).Draw(rt, "size")),
			Codec: rapid.SampledFrom([]int8{0, 1, 4}).Draw(rt, "codec")})
		m.appendBatch(rt, b, -1)
	}
}

func (m *tierModel) txnAppend(rt *rapid.T) {
	pid := rapid.Int64Range(1, 2).Draw(rt, "producer")
	n := rapid.IntRange(1, 4).Draw(rt, "records")
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{TimestampDelta: int64(i), Value: bytes.Repeat([]byte{'t'}, rapid.IntRange(1, 200).Draw(rt, "size"))}
	}
	b, err := batch.Build(batch.BuildOptions{FirstTimestamp: m.clk.Now().UnixMilli(), Idempotent: true, ProducerID: pid,
		BaseSequence: m.seqs[pid], Transactional: true}, recs)
	if err != nil {
		rt.Fatal(err)
	}
	mb := m.appendBatch(rt, b, pid)
	m.seqs[pid] += int32(n)
	if _, ok := m.open[pid]; !ok {
		m.open[pid] = mb.base
	}
}

func (m *tierModel) txnEnd(rt *rapid.T) {
	var pids []int64
	for pid := range m.open {
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		return
	}
	slices.Sort(pids)
	pid := rapid.SampledFrom(pids).Draw(rt, "producer")
	commit := rapid.Bool().Draw(rt, "commit")
	mb := m.appendBatch(rt, batch.BuildControl(batch.Marker{ProducerID: pid, Commit: commit, Timestamp: m.clk.Now().UnixMilli()}), pid)
	first := m.open[pid]
	delete(m.open, pid)
	if commit {
		return
	}
	// What a partition records for the abort.
	e := AbortEntry{AbortedTxn: AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: mb.base}, LastStableOffset: m.lso()}
	if err := m.l.AddAbortedTxn(e); err != nil {
		rt.Fatalf("AddAbortedTxn: %v", err)
	}
	m.aborts = append(m.aborts, e)
}

func (m *tierModel) tick(rt *rapid.T) {
	m.clk.Advance(time.Duration(rapid.IntRange(1, 60).Draw(rt, "minutes")) * time.Minute)
}

// drawOffset returns an offset in [lo, hi], often one of the ends.
func drawOffset(rt *rapid.T, label string, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	switch rapid.IntRange(0, 3).Draw(rt, label+"Kind") {
	case 1:
		return rapid.Int64Range(lo, hi).Draw(rt, label)
	case 2:
		return lo
	}
	return hi
}

func (m *tierModel) upload(rt *rapid.T) {
	if _, loaded := m.tier.manifestCopy(); !loaded {
		// RunTiering loads the manifest of a new leadership first.
		if err := m.tier.Load(m.ctx()); err != nil {
			m.expectStoreFault(rt, "Load", err)
			return
		}
	}
	hwm := drawOffset(rt, "highWatermark", 0, m.lso())
	before, _ := m.tier.manifestCopy()
	limit := m.l.closedEndAtOrBelow(hwm)
	m.endLimit = max(m.endLimit, hwm)
	stale := m.staleManifest(rt)
	n, err := m.tier.Upload(m.ctx(), hwm, m.epoch)
	after, _ := m.tier.manifestCopy()
	if err != nil {
		if stale && !m.staleManifest(rt) && errors.Is(err, ErrRemoteUnavailable) {
			return // it reloaded the manifest a deposed leader wrote
		}
		m.expectStoreFault(rt, "Upload", err)
	}
	if after.End > max(before.End, hwm) {
		rt.Fatalf("Upload(%d) moved the uploaded end from %d to %d: past the high-water mark", hwm, before.End, after.End)
	}
	if err != nil {
		return
	}
	if after.End < before.End {
		rt.Fatalf("Upload(%d) moved the uploaded end back from %d to %d", hwm, before.End, after.End)
	}
	if got := len(after.Segments) - len(before.Segments); got != n {
		rt.Fatalf("Upload(%d) says it committed %d segments, the manifest grew by %d", hwm, n, got)
	}
	if max(after.End, m.l.LogStartOffset()) < limit {
		rt.Fatalf("Upload(%d) succeeded with the uploaded end at %d, the local log start at %d and closed segments up to %d",
			hwm, after.End, m.l.LogStartOffset(), limit)
	}
}

// staleManifest reports whether the leader's tier holds another manifest than
// the store (a deposed leader wrote since it loaded), which its next commit
// finds and reloads.
func (m *tierModel) staleManifest(rt *rapid.T) bool {
	mf, loaded := m.tier.manifestCopy()
	stored, ok := m.storedManifest(rt)
	if !loaded || !ok {
		return false
	}
	return stored.End != mf.End || stored.Start != mf.Start || len(stored.Segments) != len(mf.Segments)
}

func (m *tierModel) setRetention(rt *rapid.T) {
	m.tier.SetRetention(drawTierRetention(rt))
}

// remoteOnlyBytes is what EnforceRetention counts as the remote part: the
// segments of mf wholly below the local log start.
func remoteOnlyBytes(mf manifest, localStart int64) int64 {
	var n int64
	for _, s := range mf.Segments {
		if s.Next <= localStart {
			n += s.Size
		}
	}
	return n
}

func (m *tierModel) retention(rt *rapid.T) {
	hwm := drawOffset(rt, "highWatermark", 0, m.leo())
	before, loaded := m.tier.manifestCopy()
	// A deposed leader committed since the tier read its copy: the pass
	// reloads the stored manifest and works from it, unless the store failed
	// it before.
	stored, ok := m.storedManifest(rt)
	changed := func(mf manifest) bool {
		return mf.Start != before.Start || mf.End != before.End || len(mf.Segments) != len(before.Segments)
	}
	reloadable := ok && loaded && stored.LeaderEpoch <= m.epoch && changed(stored)
	localBefore := m.l.LogStartOffset()
	sweep := m.tier.sweep
	r := *m.tier.retention.Load()
	local, removed, err := m.tier.EnforceRetention(m.ctx(), hwm, m.epoch)
	after, _ := m.tier.manifestCopy()
	if reloadable && changed(after) {
		before = stored
	}
	localAfter := m.l.LogStartOffset()
	if err != nil && loaded {
		m.expectStoreFault(rt, "EnforceRetention", err)
	} else if err != nil && !errors.Is(err, ErrRemoteUnavailable) {
		rt.Fatalf("EnforceRetention before Load: %v", err)
	}

	// Local retention: only segments wholly uploaded and below the
	// high-water mark.
	if localAfter < localBefore {
		rt.Fatalf("local log start moved back from %d to %d", localBefore, localAfter)
	}
	if localAfter > localBefore && localAfter > min(hwm, before.End) {
		rt.Fatalf("local retention moved the local start from %d to %d; high-water mark %d, uploaded end %d",
			localBefore, localAfter, hwm, before.End)
	}
	if local == 0 && localAfter != localBefore {
		rt.Fatalf("EnforceRetention deleted %d local segments; local start %d -> %d", local, localBefore, localAfter)
	}

	// Remote retention: a prefix of the remote-only segments, each allowed by
	// a rule.
	k := len(before.Segments) - len(after.Segments)
	if k != removed || k < 0 || !slices.EqualFunc(before.Segments[k:], after.Segments, sameRemoteSegment) {
		rt.Fatalf("EnforceRetention says it removed %d remote segments: %d before, %d after", removed, len(before.Segments), len(after.Segments))
	}
	limit := m.clk.Now().Add(-r.Age).UnixMilli()
	total := remoteOnlyBytes(after, localAfter) + m.l.Size()
	for _, s := range before.Segments[:k] {
		if s.Next > localAfter {
			rt.Fatalf("remote retention removed segment [%d, %d), local log starts at %d", s.Base, s.Next, localAfter)
		}
		if s.Next <= before.Start || r.Age >= 0 && s.MaxTimestamp < limit {
			continue
		}
		if r.Bytes < 0 || total < r.Bytes {
			rt.Fatalf("remote retention removed segment [%d, %d) (max timestamp %d, limit %d): %d bytes left, retention.bytes %d",
				s.Base, s.Next, s.MaxTimestamp, limit, total, r.Bytes)
		}
	}

	start := m.tier.LogStartOffset()
	if _, loaded := m.tier.manifestCopy(); loaded {
		if start < m.start {
			rt.Fatalf("retention moved the log start back from %d to %d", m.start, start)
		}
		m.start = start
	}
	if err != nil {
		return
	}
	if sweep {
		m.checkNoOrphans(rt)
	}
	// One pass does all there is to do.
	if m.skewed {
		return
	}
	if local, removed, err := m.tier.EnforceRetention(m.ctx(), hwm, m.epoch); err != nil || local != 0 || removed != 0 {
		rt.Fatalf("a second retention pass deleted %d local and %d remote segments, %v", local, removed, err)
	}
}

// localRetention runs the pass a follower runs: local limits only, gated by
// the uploaded end like the leader's.
func (m *tierModel) localRetention(rt *rapid.T) {
	hwm := drawOffset(rt, "highWatermark", 0, m.leo())
	mf, loaded := m.tier.manifestCopy()
	localBefore := m.l.LogStartOffset()
	n, err := m.tier.EnforceLocalRetention(hwm)
	if err != nil && (loaded || !errors.Is(err, ErrRemoteUnavailable)) {
		rt.Fatalf("EnforceLocalRetention(%d): %v", hwm, err)
	}
	localAfter := m.l.LogStartOffset()
	if after, _ := m.tier.manifestCopy(); after.Start != mf.Start || after.End != mf.End || len(after.Segments) != len(mf.Segments) {
		rt.Fatalf("EnforceLocalRetention changed the manifest")
	}
	if localAfter != localBefore && localAfter > min(hwm, mf.End) || n == 0 && localAfter != localBefore {
		rt.Fatalf("EnforceLocalRetention(%d) deleted %d segments, local start %d -> %d, uploaded end %d", hwm, n, localBefore, localAfter, mf.End)
	}
}

func sameRemoteSegment(a, b remoteSegment) bool {
	return a.Base == b.Base && a.Next == b.Next && a.Size == b.Size
}

// checkNoOrphans checks that the store holds no segment object below the
// stored manifest's end that it does not name: the sweep's promise.
func (m *tierModel) checkNoOrphans(rt *rapid.T) {
	mf, ok := m.storedManifest(rt)
	if !ok {
		return
	}
	keys, err := m.store.file().List(context.Background(), tierPrefix+"/")
	if err != nil {
		rt.Fatal(err)
	}
	named := map[string]bool{}
	for _, s := range mf.Segments {
		for _, k := range s.objectKeys(tierPrefix) {
			named[k] = true
		}
	}
	for _, k := range keys {
		if _, next, ok := parseRemoteName(path.Base(k)); ok && next <= mf.End && !named[k] {
			rt.Fatalf("after an orphan sweep the store holds %s, below the end %d, which the manifest does not name", k, mf.End)
		}
	}
}

// deleteRecords does what a partition does: the remote start first, then the
// local one; or the remote start alone and then a power cut (the next Load
// moves the local start up).
func (m *tierModel) deleteRecords(rt *rapid.T) {
	off := drawOffset(rt, "offset", 0, m.leo())
	if rapid.Bool().Draw(rt, "edge") {
		mf, _ := m.tier.manifestCopy()
		off = rapid.SampledFrom([]int64{m.l.LogStartOffset(), mf.End}).Draw(rt, "at") + rapid.Int64Range(-1, 1).Draw(rt, "delta")
		off = min(max(off, 0), m.leo())
	}
	if err := m.tier.EnsureLoaded(m.ctx()); err != nil {
		m.expectStoreFault(rt, "EnsureLoaded", err)
		return
	}
	m.endLimit = max(m.endLimit, off)
	if err := m.tier.DeleteRecords(m.ctx(), off, m.epoch); err != nil {
		m.expectStoreFault(rt, "DeleteRecords", err)
		return
	}
	if rapid.Bool().Draw(rt, "crashBeforeLocal") {
		m.start = max(m.start, off)
		m.powerCut(rt)
		return
	}
	if off > m.l.LogStartOffset() {
		if err := m.l.DeleteRecords(off); err != nil {
			rt.Fatalf("local DeleteRecords(%d): %v", off, err)
		}
	}
	m.start = max(m.start, off)
	if got := m.tier.LogStartOffset(); got != m.start {
		rt.Fatalf("DeleteRecords(%d): log start %d, want %d", off, got, m.start)
	}
}

// reopen opens the log on m.disk and rebuilds its aborted-transaction index
// as a partition does, then gives it a new tier.
func (m *tierModel) reopen(rt *rapid.T, localStart int64) {
	var err error
	if m.l, err = Open(m.disk, testDir, m.logCfg); err != nil {
		rt.Fatalf("Open: %v", err)
	}
	if m.l.LogEndOffset() != m.leo() || m.l.LogStartOffset() != localStart {
		rt.Fatalf("reopened log is [%d, %d), was [%d, %d)", m.l.LogStartOffset(), m.l.LogEndOffset(), localStart, m.leo())
	}
	if from, stale := m.l.StaleAbortIndex(); stale {
		var entries []AbortEntry
		for _, e := range m.aborts {
			if e.LastOffset >= from {
				entries = append(entries, e)
			}
		}
		if err := m.l.RebuildAbortIndex(from, entries); err != nil {
			rt.Fatalf("RebuildAbortIndex: %v", err)
		}
	}
	m.deposed = nil
	m.newTier(rt)
}

func (m *tierModel) restart(rt *rapid.T) {
	localStart := m.l.LogStartOffset()
	if err := m.l.Close(); err != nil {
		rt.Fatal(err)
	}
	m.reopen(rt, localStart)
}

// powerCut cuts the power of the local disk (and of the store, when it is on
// that disk).
func (m *tierModel) powerCut(rt *rapid.T) {
	var opts []vfs.CrashOption
	if rapid.Bool().Draw(rt, "torn") {
		opts = append(opts, vfs.WithTornWrites(rapid.Uint64().Draw(rt, "seed")))
	}
	localStart := m.l.LogStartOffset()
	crashed := m.disk.CrashClone(opts...)
	_ = m.l.Close()
	m.disk = crashed
	if m.kind == "linked" {
		m.objFS = crashed
		m.store.setFS(rt, crashed)
	}
	m.reopen(rt, localStart)
}

// storePowerCut cuts the power of the store's filesystem when it is not the
// log's: objects put without a sync since may be lost, never those a
// manifest names.
func (m *tierModel) storePowerCut(rt *rapid.T) {
	if m.kind == "linked" {
		return // the store is on the log's disk
	}
	m.objFS = m.objFS.CrashClone(vfs.WithTornWrites(rapid.Uint64().Draw(rt, "seed")))
	m.store.setFS(rt, m.objFS)
}

func (m *tierModel) leaderChange(rt *rapid.T) {
	m.epoch++
	if err := m.l.AssignEpoch(m.epoch, m.l.LogEndOffset()); err != nil {
		rt.Fatal(err)
	}
	m.deposed, m.deposedEpoch = m.tier, m.epoch-1
	m.newTier(rt)
}

// deposedUpload runs an upload pass of the deposed leader, which has not yet
// learned of its successor.
func (m *tierModel) deposedUpload(rt *rapid.T) {
	if m.deposed == nil {
		return
	}
	stored, ok := m.storedManifest(rt)
	hwm := drawOffset(rt, "highWatermark", 0, m.lso())
	before, _ := m.deposed.manifestCopy()
	m.endLimit = max(m.endLimit, hwm)
	n, err := m.deposed.Upload(m.ctx(), hwm, m.deposedEpoch)
	switch {
	case errors.Is(err, ErrFencedLeaderEpoch):
		if !ok || stored.LeaderEpoch <= m.deposedEpoch {
			rt.Fatalf("deposed leader (epoch %d) fenced by a manifest of epoch %d", m.deposedEpoch, stored.LeaderEpoch)
		}
	case err != nil:
		if !m.healthy() || errors.Is(err, ErrRemoteUnavailable) {
			return // the store, or a manifest it had not loaded
		}
		rt.Fatalf("deposed Upload: %v", err)
	case n > 0:
		if ok && stored.LeaderEpoch > m.deposedEpoch {
			rt.Fatalf("deposed leader (epoch %d) committed %d segments over a manifest of epoch %d", m.deposedEpoch, n, stored.LeaderEpoch)
		}
		after, _ := m.deposed.manifestCopy()
		if after.End > max(before.End, hwm) {
			rt.Fatalf("deposed Upload(%d) moved the uploaded end to %d", hwm, after.End)
		}
	}
}

func (m *tierModel) storeFault(rt *rapid.T) {
	switch rapid.SampledFrom([]string{"ok", "ok", "down", "slow", "failing"}).Draw(rt, "storeState") {
	case "ok":
		m.store.down.Store(false)
		m.store.setSlow(false)
		m.store.failAfter.Store(0)
	case "down":
		m.store.down.Store(true)
	case "slow":
		m.store.setSlow(true)
	case "failing": // down in the middle of what comes next
		m.store.failAfter.Store(rapid.Int64Range(1, 8).Draw(rt, "failAfter"))
	}
}

// damage breaks an object of a segment the tier names, as the existing tests
// do: a flipped byte in its batches or its block index, or the object gone.
func (m *tierModel) damage(rt *rapid.T) {
	mf, _ := m.tier.manifestCopy()
	var segs []remoteSegment
	for _, s := range mf.Segments {
		if !m.damaged[s.Base] {
			segs = append(segs, s)
		}
	}
	if len(segs) == 0 {
		return
	}
	s := segs[rapid.IntRange(0, len(segs)-1).Draw(rt, "segment")]
	ctx := context.Background()
	key, lo, hi := s.dataKey(tierPrefix), int64(0), s.Size
	how := rapid.SampledFrom([]string{"batches", "index", "missing"}).Draw(rt, "damage")
	if how == "index" {
		if s.IndexSize > 0 {
			lo, hi = s.Size, s.Size+s.IndexSize
		} else {
			key = s.key(tierPrefix, indexSuffix)
			hi = -1
		}
	}
	if how == "missing" {
		if err := m.store.file().Delete(ctx, key); err != nil {
			rt.Fatal(err)
		}
	} else {
		data, err := m.store.file().Get(ctx, key, 0, -1)
		if err != nil {
			rt.Fatal(err)
		}
		if hi < 0 {
			hi = int64(len(data))
		}
		data[rapid.Int64Range(lo, hi-1).Draw(rt, "byte")] ^= 0x5a
		if err := m.store.file().Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			rt.Fatal(err)
		}
	}
	m.damaged[s.Base] = true
}

// maybeDamaged reports whether the remote segment holding offset (in the
// tier's manifest) was broken by the test.
func (m *tierModel) maybeDamaged(offset int64) bool {
	mf, _ := m.tier.manifestCopy()
	i := mf.segmentFor(offset)
	return i < len(mf.Segments) && mf.Segments[i].Base <= offset && m.damaged[mf.Segments[i].Base]
}

// anyDamaged reports whether a segment the tier names was broken.
func (m *tierModel) anyDamaged() bool {
	mf, _ := m.tier.manifestCopy()
	for _, s := range mf.Segments {
		if m.damaged[s.Base] {
			return true
		}
	}
	return false
}

// readAt reads at offset as a partition routes a fetch: from the store below
// the local log start, from the local log at and above it (the high-water
// mark is the log end). remote says which it was.
func (m *tierModel) readAt(rt *rapid.T, offset int64, maxBytes int) (b []byte, next int64, remote bool, err error) {
	if offset < m.l.LogStartOffset() {
		b, next, err = m.tier.Read(m.ctx(), offset, maxBytes)
		return b, next, true, err
	}
	c, err := m.l.Read(offset, maxBytes, m.l.LogEndOffset())
	if err != nil {
		return nil, offset, false, err
	}
	defer c.Release()
	if b, err = c.Bytes(); err != nil {
		rt.Fatalf("Chunk.Bytes: %v", err)
	}
	return b, c.NextOffset, false, nil
}

// checkServed checks bytes served for a read at offset of at most maxBytes:
// whole model batches, the first holding offset, none wholly below the log
// start, next just past the last, within maxBytes unless a single batch.
func (m *tierModel) checkServed(rt *rapid.T, where string, offset int64, maxBytes int, b []byte, next int64) {
	rt.Helper()
	i := m.batchAt(offset)
	if i < 0 {
		rt.Fatalf("%s read at %d served %d bytes; the model holds no such offset (log end %d)", where, offset, len(b), m.leo())
	}
	if len(b) == 0 {
		rt.Fatalf("%s read at %d (log [%d, %d)) served nothing, next %d", where, offset, m.start, m.leo(), next)
	}
	it := batch.NewStoredIter(b)
	count := 0
	for ; it.Next(); i, count = i+1, count+1 {
		if i >= len(m.batches) || !bytes.Equal(it.Batch(), m.batches[i].data) {
			h, _ := batch.ParseHeader(it.Batch())
			rt.Fatalf("%s read at %d: batch %d served ([%d, %d)) differs from the model's", where, offset, count, h.BaseOffset, h.NextOffset())
		}
		if m.batches[i].next <= m.start {
			rt.Fatalf("%s read at %d served batch [%d, %d), below the log start %d", where, offset, m.batches[i].base, m.batches[i].next, m.start)
		}
	}
	if it.Err() != nil {
		rt.Fatalf("%s read at %d: %v", where, offset, it.Err())
	}
	if last := m.batches[i-1].next; next != last {
		rt.Fatalf("%s read at %d: next %d, the last batch served ends at %d", where, offset, next, last)
	}
	if len(b) > maxBytes && count > 1 {
		rt.Fatalf("%s read at %d of at most %d bytes served %d bytes in %d batches", where, offset, maxBytes, len(b), count)
	}
}

// readOne reads at offset and checks the answer against the model.
func (m *tierModel) readOne(rt *rapid.T, offset int64, maxBytes int) {
	rt.Helper()
	b, next, remote, err := m.readAt(rt, offset, maxBytes)
	where := "local"
	if remote {
		where = "remote"
	}
	switch {
	case offset < m.start || offset > m.leo():
		if !errors.Is(err, ErrOffsetOutOfRange) {
			rt.Fatalf("%s read at %d, outside the log [%d, %d]: %d bytes, %v; want ErrOffsetOutOfRange", where, offset, m.start, m.leo(), len(b), err)
		}
	case offset == m.leo():
		if err != nil || len(b) != 0 {
			rt.Fatalf("read at the log end %d: %d bytes, %v", offset, len(b), err)
		}
	case err != nil:
		if !remote {
			rt.Fatalf("local read at %d (local log [%d, %d)): %v", offset, m.l.LogStartOffset(), m.leo(), err)
		}
		if m.healthy() && !m.maybeDamaged(offset) || !errors.Is(err, ErrRemoteUnavailable) && !errors.Is(err, ErrRemoteCorrupt) {
			rt.Fatalf("remote read at %d (log [%d, %d), local from %d): %v", offset, m.start, m.leo(), m.l.LogStartOffset(), err)
		}
	default:
		m.checkServed(rt, where, offset, maxBytes, b, next)
		if remote {
			m.checkAbortedIn(rt, offset, next)
		}
	}
}

// checkAbortedIn checks what a read_committed fetch served from the store
// is told: the aborted transactions of the replica's log and of the manifest
// that touch [from, to), once each, hold every aborted transaction with a
// batch served, and from no later than its first batch served.
func (m *tierModel) checkAbortedIn(rt *rapid.T, from, to int64) {
	rt.Helper()
	local, err := m.l.AbortedTxns(from, to)
	if err != nil {
		rt.Fatalf("AbortedTxns(%d, %d): %v", from, to, err)
	}
	got := MergeAbortedTxns(local, m.tier.AbortedIn(from, to))
	for _, e := range m.aborts {
		if e.LastOffset < from || e.FirstOffset >= to {
			continue
		}
		i := slices.IndexFunc(got, func(a AbortedTxn) bool { return a.ProducerID == e.ProducerID && a.LastOffset == e.LastOffset })
		if i < 0 || got[i].FirstOffset > max(e.FirstOffset, from) {
			rt.Fatalf("a fetch of [%d, %d) from the store is told of aborted transactions %v; the model aborted %+v", from, to, got, e.AbortedTxn)
		}
	}
}

// read reads at an offset drawn among the edges (the log start, the local
// log start, the uploaded end, the log end, one either side) and anywhere,
// through the partition's routing and from the tier directly.
func (m *tierModel) read(rt *rapid.T) {
	if err := m.tier.EnsureLoaded(m.ctx()); err != nil {
		m.expectStoreFault(rt, "EnsureLoaded", err)
		return
	}
	mf, _ := m.tier.manifestCopy()
	edges := []int64{m.start, m.l.LogStartOffset(), mf.Start, mf.End, m.leo()}
	var offset int64
	switch rapid.IntRange(0, 2).Draw(rt, "where") {
	case 0:
		offset = rapid.SampledFrom(edges).Draw(rt, "at") + rapid.Int64Range(-1, 1).Draw(rt, "delta")
	case 1:
		offset = rapid.Int64Range(0, m.leo()+1).Draw(rt, "offset")
	default: // in the remote part, if any
		offset = rapid.Int64Range(m.start, max(m.start, m.l.LogStartOffset()-1)).Draw(rt, "offset")
	}
	offset = max(offset, 0)
	maxBytes := rapid.SampledFrom([]int{1, 100, 1000, 1 << 20}).Draw(rt, "maxBytes")
	m.readOne(rt, offset, maxBytes)

	// The tier on its own: [Start, End) of its manifest, nothing below the
	// log start.
	b, next, err := m.tier.Read(m.ctx(), offset, maxBytes)
	switch {
	case err == nil:
		if offset >= mf.End {
			rt.Fatalf("tier read at %d past the uploaded end %d served %d bytes", offset, mf.End, len(b))
		}
		if offset < m.start {
			rt.Fatalf("tier read at %d below the log start %d served %d bytes", offset, m.start, len(b))
		}
		m.checkServed(rt, "tier", offset, maxBytes, b, next)
	case errors.Is(err, ErrOffsetOutOfRange):
		if offset >= m.start && offset < m.l.LogStartOffset() {
			rt.Fatalf("tier read at %d, in the remote part [%d, %d): %v", offset, m.start, m.l.LogStartOffset(), err)
		}
	default:
		if m.healthy() && !m.maybeDamaged(offset) || !errors.Is(err, ErrRemoteUnavailable) && !errors.Is(err, ErrRemoteCorrupt) {
			rt.Fatalf("tier read at %d: %v", offset, err)
		}
	}
}

// timestamp looks a timestamp up as a partition does (the remote part, then
// the local log) and compares with the model's answer.
func (m *tierModel) timestamp(rt *rapid.T) {
	now := m.clk.Now().UnixMilli()
	ts := rapid.Int64Range(newClock().Now().UnixMilli()-1, now+6).Draw(rt, "timestamp")
	if err := m.tier.EnsureLoaded(m.ctx()); err != nil {
		m.expectStoreFault(rt, "EnsureLoaded", err)
		return
	}
	off, got, ok, err := m.tier.OffsetForTimestamp(m.ctx(), ts, anyRecord)
	if err != nil {
		if m.healthy() && !m.anyDamaged() || !errors.Is(err, ErrRemoteUnavailable) && !errors.Is(err, ErrRemoteCorrupt) {
			rt.Fatalf("remote OffsetForTimestamp(%d): %v", ts, err)
		}
		return
	}
	if !ok {
		if off, got, ok, err = m.l.OffsetForTimestamp(ts, anyRecord); err != nil {
			rt.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
		}
	}
	wantOff, wantTS, wantOK := m.offsetForTimestamp(rt, ts)
	if ok != wantOK || ok && (off != wantOff || got != wantTS) {
		rt.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; the model's first record at or after the log start %d: %d, %d, %v",
			ts, off, got, ok, m.start, wantOff, wantTS, wantOK)
	}
}

// offsetForTimestamp is the model's answer: the first record at or after the
// log start whose timestamp is at least ts.
func (m *tierModel) offsetForTimestamp(rt *rapid.T, ts int64) (int64, int64, bool) {
	q := newTimestampLookup(ts, m.start, anyRecord)
	defer q.release()
	for _, b := range m.batches {
		if b.next <= m.start {
			continue
		}
		h, err := batch.ParseHeader(b.data)
		if err != nil {
			rt.Fatal(err)
		}
		if h.MaxTimestamp < ts {
			continue
		}
		off, got, ok, err := q.in(b.data, &h)
		if err != nil {
			rt.Fatal(err)
		}
		if ok {
			return off, got, true
		}
	}
	return 0, 0, false
}

// storedManifest returns the manifest the store holds, read past the
// injected failures; ok is false when there is none.
func (m *tierModel) storedManifest(rt *rapid.T) (manifest, bool) {
	rt.Helper()
	b, err := m.store.file().Get(context.Background(), tierPrefix+"/"+manifestKey, 0, -1)
	if errors.Is(err, remote.ErrNotFound) {
		return manifest{}, false
	}
	if err != nil {
		rt.Fatal(err)
	}
	mf, err := decodeManifest(b)
	if err != nil {
		rt.Fatalf("the stored manifest does not decode: %v", err)
	}
	return mf, true
}

// checkManifest checks a manifest (what holds is which) against the model and
// the store: ordered segments inside [.., End), each holding the model's bytes
// with a sound block index, the epochs that wrote them and the aborted
// transactions they touch; and, with the local log, every offset from the log
// start.
func (m *tierModel) checkManifest(rt *rapid.T, what string, mf manifest) {
	rt.Helper()
	ctx := context.Background()
	localStart := m.l.LogStartOffset()
	if mf.End > m.endLimit {
		rt.Fatalf("%s manifest ends at %d, past every high-water mark given to Upload and offset to DeleteRecords (%d)", what, mf.End, m.endLimit)
	}
	prev := int64(-1)
	for _, s := range mf.Segments {
		if s.Base < prev || s.Next <= s.Base || s.Next > mf.End {
			rt.Fatalf("%s manifest [%d, %d): segment [%d, %d) out of order", what, mf.Start, mf.End, s.Base, s.Next)
		}
		prev = s.Next
		want, ok := m.rangeBytes(s.Base, s.Next)
		if !ok {
			rt.Fatalf("%s manifest: segment [%d, %d) is not whole model batches", what, s.Base, s.Next)
		}
		if int64(len(want)) != s.Size {
			rt.Fatalf("%s manifest: segment [%d, %d) of %d bytes, the model's are %d", what, s.Base, s.Next, s.Size, len(want))
		}
		m.checkEpochs(rt, what, s)
		if m.damaged[s.Base] {
			continue
		}
		got, err := m.store.file().Get(ctx, s.dataKey(tierPrefix), 0, s.Size)
		if err != nil || !bytes.Equal(got, want) {
			rt.Fatalf("%s manifest names segment [%d, %d): the store's object (%v) differs from the model", what, s.Base, s.Next, err)
		}
		key, off, n := s.key(tierPrefix, indexSuffix), int64(0), int64(-1)
		if s.IndexSize > 0 {
			key, off, n = s.dataKey(tierPrefix), s.Size, s.IndexSize
		}
		idx, err := m.store.file().Get(ctx, key, off, n)
		if err != nil {
			rt.Fatalf("%s manifest: segment [%d, %d)'s block index: %v", what, s.Base, s.Next, err)
		}
		blocks, err := decodeBlocks(idx, s)
		if err != nil {
			rt.Fatalf("%s manifest: segment [%d, %d)'s block index: %v", what, s.Base, s.Next, err)
		}
		for _, k := range blocks {
			if blockCRC(want[k.Pos:k.Pos+int64(k.Size)]) != k.CRC {
				rt.Fatalf("%s manifest: segment [%d, %d)'s block at %d fails its checksum", what, s.Base, s.Next, k.Pos)
			}
		}
	}
	// The remote part and the local log hold every offset from the log start.
	if m.start < localStart {
		if mf.Start > m.start {
			rt.Fatalf("%s manifest starts at %d, the log at %d (local from %d)", what, mf.Start, m.start, localStart)
		}
		at := m.start
		for _, s := range mf.Segments {
			if s.Next <= at {
				continue
			}
			if s.Base > at {
				break
			}
			at = s.Next
		}
		if at < localStart {
			rt.Fatalf("%s manifest (start %d, end %d, %d segments) holds the log from %d only up to %d; the local log starts at %d",
				what, mf.Start, mf.End, len(mf.Segments), m.start, at, localStart)
		}
	}
	m.checkAborted(rt, what, mf)
}

// checkEpochs checks a remote segment's leader epochs against the model's
// batches: ascending starts within the segment (the first at its base, or
// later when the log's epoch cache starts later: a log start inside the
// segment's first batch), and each batch from the first start on has the
// epoch in force at its offset.
func (m *tierModel) checkEpochs(rt *rapid.T, what string, s remoteSegment) {
	rt.Helper()
	for i, e := range s.Epochs {
		if e.StartOffset < s.Base || e.StartOffset >= s.Next || i > 0 && e.StartOffset <= s.Epochs[i-1].StartOffset {
			rt.Fatalf("%s manifest: segment [%d, %d) has epochs %v", what, s.Base, s.Next, s.Epochs)
		}
	}
	if len(s.Epochs) == 0 {
		rt.Fatalf("%s manifest: segment [%d, %d) has no epochs", what, s.Base, s.Next)
	}
	for i := m.batchAt(s.Epochs[0].StartOffset); i < len(m.batches) && m.batches[i].next <= s.Next; i++ {
		b := m.batches[i]
		e := int32(-1)
		for _, x := range s.Epochs {
			if x.StartOffset <= b.base {
				e = x.Epoch
			}
		}
		if e != b.epoch && b.base >= s.Epochs[0].StartOffset {
			rt.Fatalf("%s manifest: segment [%d, %d) has epochs %v; batch %d was written in epoch %d", what, s.Base, s.Next, s.Epochs, b.base, b.epoch)
		}
	}
}

// checkAborted checks the manifest's aborted transactions: each is one the
// model aborted, with its first batch's offset, and every aborted transaction
// with a batch or its marker in a segment named and its marker at or after the
// start is there.
func (m *tierModel) checkAborted(rt *rapid.T, what string, mf manifest) {
	rt.Helper()
	for _, a := range mf.Aborted {
		i := slices.IndexFunc(m.aborts, func(e AbortEntry) bool {
			return e.ProducerID == a.ProducerID && e.LastOffset == a.LastOffset
		})
		if i < 0 || m.aborts[i].FirstOffset != a.FirstOffset {
			rt.Fatalf("%s manifest lists aborted transaction %+v; the model's aborts are %v", what, a, m.aborts)
		}
	}
	named := func(offset int64) bool {
		i := mf.segmentFor(offset)
		return i < len(mf.Segments) && mf.Segments[i].Base <= offset
	}
	for _, e := range m.aborts {
		if e.LastOffset < mf.Start || slices.ContainsFunc(mf.Aborted, func(a AbortedTxn) bool { return a == e.AbortedTxn }) {
			continue
		}
		touched := named(e.LastOffset)
		for _, b := range m.batches {
			if b.pid == e.ProducerID && b.base >= e.FirstOffset && b.base < e.LastOffset && named(b.base) {
				touched = true
			}
		}
		if touched {
			rt.Fatalf("%s manifest (segments up to %d) does not list aborted transaction %+v", what, mf.End, e.AbortedTxn)
		}
	}
}

// check runs after every step.
func (m *tierModel) check(rt *rapid.T) {
	if m.l.LogEndOffset() != m.leo() {
		rt.Fatalf("log end %d, model %d", m.l.LogEndOffset(), m.leo())
	}
	if stored, ok := m.storedManifest(rt); ok {
		m.checkManifest(rt, "stored", stored)
	}
	mf, loaded := m.tier.manifestCopy()
	if loaded {
		m.checkManifest(rt, "tier's", mf)
	}
	if !m.healthy() {
		return
	}
	if err := m.tier.EnsureLoaded(m.ctx()); err != nil {
		rt.Fatalf("EnsureLoaded: %v", err)
	}
	mf, _ = m.tier.manifestCopy()
	if off, epoch := m.tier.LastUploaded(); len(mf.Segments) == 0 && (off != -1 || epoch != -1) ||
		len(mf.Segments) > 0 && (off != mf.Segments[len(mf.Segments)-1].Next-1 || epoch != m.batches[m.batchAt(off)].epoch) {
		rt.Fatalf("LastUploaded = %d, %d; manifest segments %d, up to %d", off, epoch, len(mf.Segments), mf.End)
	}
	if start := m.tier.LogStartOffset(); start != m.start {
		rt.Fatalf("log start %d, model %d (local log [%d, %d))", start, m.start, m.l.LogStartOffset(), m.l.LogEndOffset())
	}
	// Every batch from the log start reads back, remote then local.
	maxBytes := rapid.SampledFrom([]int{1 << 20, 1000, 1}).Draw(rt, "readBytes")
	for off := m.start; off < m.leo(); {
		b, next, remote, err := m.readAt(rt, off, maxBytes)
		if err != nil {
			if remote && m.maybeDamaged(off) && (errors.Is(err, ErrRemoteCorrupt) || errors.Is(err, ErrRemoteUnavailable)) {
				mf, _ := m.tier.manifestCopy()
				off = mf.Segments[mf.segmentFor(off)].Next
				continue
			}
			rt.Fatalf("read at %d (log [%d, %d), local from %d, remote %v): %v", off, m.start, m.leo(), m.l.LogStartOffset(), remote, err)
		}
		where := "local"
		if remote {
			where = "remote"
		}
		m.checkServed(rt, where, off, maxBytes, b, next)
		off = next
	}
}

// modelStore is the test's object store: a remote.File in which operations
// fail with remote.ErrUnavailable while it is down, and while it is slow wait
// for their context to end (a store slower than its caller's deadline), then
// fail the same way. A power cut of its filesystem swaps the File for one on
// the crash image.
type modelStore struct {
	inner atomic.Pointer[remote.File]
	down  atomic.Bool
	// failAfter, when positive, counts down the operations that change the
	// store (not reads: read-aheads run in the background) until the one
	// that takes it down.
	failAfter atomic.Int64
	mu        sync.Mutex
	slow      chan struct{} // while slow: closed when it ends
}

func newModelStore(rt *rapid.T, fsys vfs.FS) *modelStore {
	s := &modelStore{}
	s.setFS(rt, fsys)
	return s
}

// setFS makes the store the directory in fsys.
func (s *modelStore) setFS(rt *rapid.T, fsys vfs.FS) {
	inner, err := remote.NewFile(fsys, modelObjects)
	if err != nil {
		rt.Fatal(err)
	}
	s.inner.Store(inner)
}

// file is the store without the injected failures.
func (s *modelStore) file() *remote.File { return s.inner.Load() }

// forTier returns the store as the tier of kind sees it: the file store with
// its options (it copies segments, or links them when on the log's
// filesystem), or a store that reads every body itself, as S3 does.
func (s *modelStore) forTier(kind string) remote.Store {
	if kind == "reading" {
		return s
	}
	return modelFileStore{s}
}

func (s *modelStore) setSlow(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.slow == nil:
		s.slow = make(chan struct{})
	case !on && s.slow != nil:
		close(s.slow)
		s.slow = nil
	}
}

func (s *modelStore) isSlow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slow != nil
}

func (s *modelStore) fault(ctx context.Context) error {
	if s.down.Load() {
		return errFlaky
	}
	return s.wait(ctx)
}

// writeFault is fault for an operation that changes the store: the one that
// uses up failAfter takes the store down.
func (s *modelStore) writeFault(ctx context.Context) error {
	if s.failAfter.Load() > 0 && s.failAfter.Add(-1) == 0 {
		s.down.Store(true)
	}
	return s.fault(ctx)
}

// wait waits, while the store is slow, for ctx to end.
func (s *modelStore) wait(ctx context.Context) error {
	s.mu.Lock()
	slow := s.slow
	s.mu.Unlock()
	if slow != nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: slow store: %v", remote.ErrUnavailable, ctx.Err())
		case <-slow: // caught up
		}
	}
	return nil
}

func (s *modelStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.writeFault(ctx); err != nil {
		return err
	}
	return s.file().Put(ctx, key, r, size)
}

func (s *modelStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.fault(ctx); err != nil {
		return nil, err
	}
	return s.file().Get(ctx, key, off, n)
}

func (s *modelStore) Delete(ctx context.Context, key string) error {
	if err := s.writeFault(ctx); err != nil {
		return err
	}
	return s.file().Delete(ctx, key)
}

func (s *modelStore) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.fault(ctx); err != nil {
		return nil, err
	}
	return s.file().List(ctx, prefix)
}

// modelFileStore is a modelStore with the file store's options.
type modelFileStore struct{ *modelStore }

var (
	_ remote.NameSyncer = modelFileStore{}
	_ remote.FileLinker = modelFileStore{}
)

func (s modelFileStore) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.writeFault(ctx); err != nil {
		return err
	}
	return s.file().PutUnsynced(ctx, key, r, size)
}

func (s modelFileStore) SyncNames(ctx context.Context, keys ...string) error {
	if err := s.writeFault(ctx); err != nil {
		return err
	}
	return s.file().SyncNames(ctx, keys...)
}

func (s modelFileStore) LinkUnsynced(ctx context.Context, key string, f vfs.File) (bool, error) {
	if err := s.writeFault(ctx); err != nil {
		return false, err
	}
	return s.file().LinkUnsynced(ctx, key, f)
}
