package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// Segment file suffixes.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	baseDigits      = 20
)

func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, suffix)
}

// segmentFileSuffixes are the suffixes of a segment's files, its log first.
var segmentFileSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, abortIndexSuffix}

// swapSuffix ends a segment file Kafka's cleaner wrote but had not renamed into
// place; Kafka's recovery installs it. No Strata version writes one.
const swapSuffix = ".swap"

// segmentFileSuffix returns the one of segmentFileSuffixes name ends with, or "".
func segmentFileSuffix(name string) string {
	for _, suffix := range segmentFileSuffixes {
		if strings.HasSuffix(name, suffix) {
			return suffix
		}
	}
	return ""
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name string) (int64, bool) { return parseOffsetName(name, logSuffix) }

// parseOffsetName returns the offset of a "<20 digits><suffix>" name: exactly
// the name segmentName gives that offset (no sign, no other digit count).
func parseOffsetName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || base < 0 || segmentName(base, suffix) != name {
		return 0, false
	}
	return base, true
}

// segment is one .log file with its indexes.
//
// Locking: size and next are the published extent, written only with both the
// Log's appendMu and mu held, so either lock suffices to read them. Everything
// under mu below is the segment's own state; the appender updates it before
// publishing a new extent, so a reader that saw an extent finds its index entries.
type segment struct {
	fsys vfs.FS
	dir  string
	base int64
	log  vfs.File

	// refs counts the Log's own reference plus one per outstanding Chunk or sync.
	// The file is closed (and, if deleted, removed) when it reaches zero.
	refs    atomic.Int64
	deleted atomic.Bool

	// indexInterval is the log's IndexIntervalBytes when the segment was
	// opened, for a rebuild a damaged index entry starts (entry).
	indexInterval int
	// rollJitter brings the segment's time-based roll forward (shouldRoll):
	// drawn once, when the segment is created or opened (Config.SegmentJitter).
	rollJitter time.Duration

	size int64 // bytes of whole batches
	next int64 // offset just past the last batch; base when empty
	// cacheDropped is where the flusher's page-cache drops of the file have
	// reached (cache.go); the flusher's alone.
	cacheDropped int64

	// writes counts the changes made to the log file (writes, truncations),
	// each counted once it is made; synced is the count the last successful
	// fsync covered. Equal, the file on disk is the file as it is, so a clean
	// shutdown need not fsync it again (see wrote, markSynced).
	writes, synced atomic.Uint64

	// checkMu serializes the first-use work on a segment opened from disk:
	// loading its indexes (ensureIndexes), checking its max timestamp
	// (checkMaxTimestamp) and the index entries read from its file (entry)
	// against the log, rebuilding the indexes when a check fails. Their reads
	// run holding checkMu alone, so that only other first users wait for
	// them; mu is taken briefly to publish what they found. Taken before mu,
	// never while holding it.
	checkMu sync.Mutex

	mu struct {
		sync.RWMutex
		loaded bool // indexes are in memory
		segmentIndexes
		// written: the appender or a truncation changed the segment since it
		// was opened, so its extent can move under a rebuild (rebuildAside).
		// end is then the extent the indexes cover: the appender indexes a
		// batch before it publishes the segment's new size, so size can lag.
		written bool
		end     int64
		aborts  abortIndex
		created time.Time
		// modified is the segment's last change: its last append or cut,
		// or, once reopened, its file's modification time.
		modified time.Time
	}
}

// segmentIndexes is what a segment knows of its batches in memory.
type segmentIndexes struct {
	index           offsetIndex
	tindex          timeIndex
	bytesSinceIndex int
	maxTS           int64 // largest batch max timestamp; -1 if none
	maxTSOff        int64 // base offset of the batch holding maxTS
	// maxTSFromFile: maxTS and maxTSOff were read from the .timeindex file
	// and not yet checked against the log (checkMaxTimestamp).
	maxTSFromFile bool
	firstTS       int64 // max timestamp of the first batch; -1 if none
}

// empty returns indexes of x's capacities without entries or timestamps.
func (x *segmentIndexes) empty() segmentIndexes {
	return segmentIndexes{
		index:  offsetIndex{max: x.index.max},
		tindex: timeIndex{max: x.tindex.max},
		maxTS:  -1, maxTSOff: -1, firstTS: -1,
	}
}

// wrote counts a change made to the log file.
func (s *segment) wrote() { s.writes.Add(1) }

// markSynced records that an fsync which began after writes changes
// succeeded.
func (s *segment) markSynced(writes uint64) {
	for {
		cur := s.synced.Load()
		if writes <= cur || s.synced.CompareAndSwap(cur, writes) {
			return
		}
	}
}

// dirty reports whether the log file has changes no fsync covered.
func (s *segment) dirty() bool { return s.synced.Load() != s.writes.Load() }

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}

func newSegment(fsys vfs.FS, dir string, base int64, log vfs.File, cfg *Config) *segment {
	s := &segment{fsys: fsys, dir: dir, base: base, log: log, next: base,
		indexInterval: cfg.IndexIntervalBytes, rollJitter: cfg.rollJitter()}
	s.refs.Store(1)
	capacities := segmentIndexes{
		index:  offsetIndex{max: cfg.IndexMaxBytes / indexEntrySize},
		tindex: timeIndex{max: cfg.IndexMaxBytes / timeEntrySize},
	}
	s.mu.segmentIndexes = capacities.empty()
	return s
}

// createSegment creates an empty segment: the .log file and both index files
// preallocated to their maximum size (trimmed when the segment is sealed), then
// fsyncs the directory so the new names survive a power cut.
func createSegment(fsys vfs.FS, dir string, base int64, cfg *Config, now time.Time) (*segment, error) {
	log, err := fsys.Create(filepath.Join(dir, segmentName(base, logSuffix)))
	if err != nil {
		return nil, err
	}
	s := newSegment(fsys, dir, base, log, cfg)
	s.mu.loaded = true
	s.mu.aborts.held = true
	s.mu.created, s.mu.modified = now, now
	for _, x := range []struct {
		suffix string
		size   int64
	}{
		{indexSuffix, int64(s.mu.index.max) * indexEntrySize},
		{timeIndexSuffix, int64(s.mu.tindex.max) * timeEntrySize},
	} {
		f, err := fsys.Create(s.path(x.suffix))
		if err == nil {
			err = f.Truncate(x.size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			log.Close()
			return nil, err
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		log.Close()
		return nil, err
	}
	return s, nil
}

// openSegment opens an existing segment's log file; indexes load later.
func openSegment(fsys vfs.FS, dir string, base int64, cfg *Config) (*segment, error) {
	log, err := fsys.OpenReadWrite(filepath.Join(dir, segmentName(base, logSuffix)))
	if err != nil {
		return nil, err
	}
	size, err := log.Size()
	if err != nil {
		log.Close()
		return nil, err
	}
	s := newSegment(fsys, dir, base, log, cfg)
	s.size = size
	s.mu.created = time.Now()
	if fi, err := fsys.Stat(s.path(logSuffix)); err == nil {
		s.mu.created = fi.ModTime()
	}
	s.mu.modified = s.mu.created
	return s, nil
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the file and removes it if the
// segment was deleted meanwhile.
func (s *segment) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.log.Close()
	if s.deleted.Load() {
		// Best effort: a leftover .deleted file is removed by the next Open.
		_ = s.fsys.Remove(s.path(logSuffix + deletedSuffix))
	}
}

// indexBatches indexes the validated batches b the appender just wrote at pos,
// at now.
func (s *segment) indexBatches(b []byte, pos int64, interval int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.written, s.mu.end, s.mu.modified = true, pos+int64(len(b)), now
	for p := 0; p < len(b); {
		h, _ := batch.ParseHeader(b[p:])
		s.mu.addBatch(s.base, &h, pos+int64(p), h.Size(), interval)
		p += h.Size()
	}
}

// indexBatch indexes one batch of size bytes at pos (addBatch).
func (s *segment) indexBatch(h *batch.Header, pos int64, size, interval int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.addBatch(s.base, h, pos, size, interval)
}

// creationTime returns when the segment was created (its age for time-based
// rolls without timestamps).
func (s *segment) creationTime() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.created
}

// lastModified returns when the segment last changed (its age for time
// retention without timestamps, as Kafka's file last-modified time).
func (s *segment) lastModified() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.modified
}

// addBatch updates the indexes and timestamps of a segment based at base for
// a batch of size bytes at pos, following Kafka: an index entry whenever more
// than interval bytes (0 if negative: IndexEveryBatch) were appended since
// the last one.
func (x *segmentIndexes) addBatch(base int64, h *batch.Header, pos int64, size, interval int) {
	if h.MaxTimestamp > x.maxTS {
		x.maxTS, x.maxTSOff = h.MaxTimestamp, h.BaseOffset
	}
	if pos == 0 {
		x.firstTS = h.MaxTimestamp
	}
	if x.bytesSinceIndex > max(interval, 0) {
		rel, _ := relOffset(h.BaseOffset, base)
		x.index.add(rel, uint32(pos))
		if x.maxTS >= 0 {
			trel, _ := relOffset(x.maxTSOff, base)
			x.tindex.maybeAdd(x.maxTS, trel)
		}
		x.bytesSinceIndex = 0
	}
	x.bytesSinceIndex += size
}

// writeIndexes writes both index files exactly (trimmed), with a final time-index
// entry for the segment's max timestamp, and fsyncs them unless the caller
// makes them durable otherwise (a LogDir's syncfs at Close). Used when a
// segment is sealed (roll, Close) and after a rebuild.
func (s *segment) writeIndexes(sync bool) error {
	idx, tidx := s.encodeIndexes()
	for _, x := range []struct {
		suffix string
		b      []byte
	}{{indexSuffix, idx}, {timeIndexSuffix, tidx}} {
		f, err := s.fsys.Create(s.path(x.suffix))
		if err != nil {
			return err
		}
		_, err = f.Write(x.b)
		if err == nil && sync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// encodeIndexes adds the time-index entry for the segment's max timestamp and
// returns both indexes encoded.
func (s *segment) encodeIndexes() (idx, tidx []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.maxTS >= 0 {
		rel, _ := relOffset(s.mu.maxTSOff, s.base)
		s.mu.tindex.maybeAdd(s.mu.maxTS, rel)
	}
	return s.mu.index.encode(), s.mu.tindex.encode()
}

// loadMaxTimestamp reads the last time-index entry of a sealed segment, which
// writeIndexes made its max timestamp, to be checked against the log at first
// use (maxTimestamp). It reports false if the file is missing or damaged; an
// empty time index (no timestamps) is fine.
func (s *segment) loadMaxTimestamp() bool {
	f, err := s.fsys.Open(s.path(timeIndexSuffix))
	if err != nil {
		return false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size%timeEntrySize != 0 || size > maxIndexFileBytes {
		return false
	}
	last := timeEntry{ts: -1}
	if size > 0 {
		var b [timeEntrySize]byte
		if n, _ := f.ReadAt(b[:], size-timeEntrySize); n != timeEntrySize {
			return false
		}
		es, err := decodeTimeIndex(b[:], s.next-s.base)
		if err != nil {
			return false
		}
		last = es[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setMaxTimestampFromFileLocked(last)
	return true
}

// lastTimeEntryBelow returns the time index's last entry for an offset below
// base+rel.
func (s *segment) lastTimeEntryBelow(rel uint32) (timeEntry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.tindex.lastBelow(rel)
}

// setMaxTimestampFromFileLocked takes the last entry of the .timeindex file
// (ts -1 if it has none) as the segment's max timestamp, unchecked. s.mu must
// be held for writing.
func (s *segment) setMaxTimestampFromFileLocked(last timeEntry) {
	s.mu.maxTS, s.mu.maxTSOff, s.mu.maxTSFromFile = last.ts, -1, true
	if last.ts >= 0 {
		s.mu.maxTSOff = s.base + int64(last.rel)
	}
}

// maxTimestamp returns the segment's largest timestamp (-1 if none) and the
// base offset of the first batch holding it, checked against the log first if
// they were read from the time-index file (checkMaxTimestamp).
func (s *segment) maxTimestamp(stats *statCounters) (ts, offset int64, err error) {
	if ts, offset, ok := s.checkedMaxTimestamp(); ok {
		return ts, offset, nil
	}
	if err := s.checkMaxTimestamp(stats); err != nil {
		return -1, -1, err
	}
	ts, offset, _ = s.checkedMaxTimestamp()
	return ts, offset, nil
}

// checkedMaxTimestamp returns the segment's max timestamp and its offset, and
// whether they are loaded and checked.
func (s *segment) checkedMaxTimestamp() (ts, offset int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.maxTS, s.mu.maxTSOff, s.mu.loaded && !s.mu.maxTSFromFile
}

// checkMaxTimestamp checks a max timestamp read from the .timeindex file
// against the log, the first time it is used: the file has no checksum, and a
// damaged last entry that still decodes would otherwise decide retention by
// time, timestamp lookups and compaction lag. The batch the entry names must
// start at its offset with its timestamp as MaxTimestamp (found from the
// offset index, itself checked by checkEntry); a file without entries (no
// timestamps) needs a first batch without one. If the check fails, both
// indexes are rebuilt from the log (one scan, as for a missing index file).
// Indexes not in memory are loaded first. A failed read returns the error and
// leaves the value to be checked again. The reads run under checkMu alone.
func (s *segment) checkMaxTimestamp(stats *statCounters) error {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if _, _, ok := s.checkedMaxTimestamp(); ok {
		return nil
	}
	// The extent of an unchecked segment holds still: the active segment is
	// checked at open, and a truncation checks a segment before it cuts it.
	size := s.size
	if err := s.loadIndexes(size, s.next, s.indexInterval, stats); err != nil {
		return err
	}
	if ts, offset, fromFile := s.fileMaxTimestamp(); !fromFile || s.maxTimestampHolds(ts, offset, size) {
		s.setMaxTimestampChecked()
		return nil
	}
	stats.indexRebuilds.Add(1)
	return s.rebuildAside(size, s.indexInterval)
}

// fileMaxTimestamp returns the segment's max timestamp and its offset, and
// whether they were read from the time-index file and are not checked yet.
func (s *segment) fileMaxTimestamp() (ts, offset int64, fromFile bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.maxTS, s.mu.maxTSOff, s.mu.maxTSFromFile
}

// setMaxTimestampChecked records that the max timestamp holds. Only checkMu's
// holder, which checked it, loads one from the file.
func (s *segment) setMaxTimestampChecked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.maxTSFromFile = false
}

// maxTimestampHolds reports whether the log, of size bytes, agrees with the
// max timestamp ts at offset read from the time index (checkMaxTimestamp), or
// the indexes were meanwhile rebuilt from the log. checkMu must be held and
// the indexes loaded.
func (s *segment) maxTimestampHolds(ts, offset, size int64) bool {
	if ts < 0 {
		h, _, ok := s.headerAt(0)
		return size == 0 || ok && h.MaxTimestamp < 0
	}
	rel, ok := relOffset(offset, s.base)
	if !ok {
		return false
	}
	pos := int64(s.checkEntry(func(x *offsetIndex) int { return x.find(rel) }).pos)
	if _, _, fromFile := s.fileMaxTimestamp(); !fromFile {
		// checkEntry rebuilt the indexes; a failed rebuild is not a check.
		return s.indexesLoaded()
	}
	sc := headerScanner(s.log, pos, size)
	defer sc.done()
	return sc.seek(offset) && sc.h.BaseOffset == offset && sc.h.MaxTimestamp == ts
}

// ensureIndexes loads a sealed segment's indexes on first use (loadIndexes).
func (s *segment) ensureIndexes(size, next int64, interval int, stats *statCounters) error {
	if s.indexesLoaded() {
		return nil
	}
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.loadIndexes(size, next, interval, stats)
}

// loadIndexes loads a sealed segment's indexes unless they are loaded,
// rebuilding them from the log when the files are missing or inconsistent.
// size and next are the segment's extent. checkMu must be held; the files are
// read without mu.
func (s *segment) loadIndexes(size, next int64, interval int, stats *statCounters) error {
	if s.indexesLoaded() {
		return nil
	}
	ientries, tentries, err := s.readIndexes(size, next)
	if err == nil {
		s.setIndexesFromFiles(ientries, tentries, size)
		return nil
	}
	stats.indexRebuilds.Add(1)
	return s.rebuildAside(size, interval)
}

// readIndexes reads and checks both index files of the segment of the given
// extent.
func (s *segment) readIndexes(size, next int64) ([]indexEntry, []timeEntry, error) {
	idx, err := s.readIndexFile(indexSuffix)
	if err != nil {
		return nil, nil, err
	}
	tidx, err := s.readIndexFile(timeIndexSuffix)
	if err != nil {
		return nil, nil, err
	}
	ientries, err := decodeOffsetIndex(idx, size, next-s.base)
	if err != nil {
		return nil, nil, err
	}
	tentries, err := decodeTimeIndex(tidx, next-s.base)
	return ientries, tentries, err
}

// setIndexesFromFiles installs the entries read from the index files of the
// segment, size bytes then, and takes the time index's last entry as its max
// timestamp, to be checked.
func (s *segment) setIndexesFromFiles(ientries []indexEntry, tentries []timeEntry, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.index.load(ientries, size)
	s.mu.tindex.entries = tentries
	last, _ := s.mu.tindex.last()
	s.setMaxTimestampFromFileLocked(last)
	s.mu.loaded = true
}

// indexesLoaded reports whether the segment's indexes are in memory.
func (s *segment) indexesLoaded() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.loaded
}

func (s *segment) readIndexFile(suffix string) ([]byte, error) {
	f, err := s.fsys.Open(s.path(suffix))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > maxIndexFileBytes {
		return nil, fmt.Errorf("index %s has %d bytes", f.Name(), size)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return b, nil
}

// maxIndexFileBytes bounds what is read of an index file: a larger one is damaged.
const maxIndexFileBytes = 1 << 30

// scanResult is what a full scan of a segment found.
type scanResult struct {
	validSize int64 // bytes of whole valid batches
	next      int64 // offset after the last valid batch
	err       error // why the scan stopped early; nil if it reached the end
}

// rebuild is rebuildLocked taking s.mu, over the segment's first size bytes
// or, once it was written, over the extent its indexes cover (end); the
// indexes count as loaded if it succeeds.
func (s *segment) rebuild(size int64, interval int) (scanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.written {
		size = s.mu.end
	}
	res, err := s.rebuildLocked(size, interval)
	s.mu.loaded = err == nil
	return res, err
}

// rebuildLocked rebuilds the in-memory indexes and timestamps from the log
// (scanIndexes). s.mu must be held.
func (s *segment) rebuildLocked(limit int64, interval int) (scanResult, error) {
	x := s.mu.empty()
	res, err := s.scanIndexes(&x, limit, interval)
	s.mu.segmentIndexes = x
	return res, err
}

// rebuildAside rebuilds the indexes from the log up to limit with the log
// read under checkMu alone: they are built aside and installed under mu, and
// count as loaded if the rebuild succeeds. A segment the appender or a
// truncation changed (written) is rebuilt whole under mu instead, up to the
// extent they indexed (rebuild): the appender indexes under mu, and a rebuild
// aside would lose what it indexed meanwhile. checkMu must be held.
func (s *segment) rebuildAside(limit int64, interval int) error {
	x, written := s.emptyIndexes()
	if !written {
		_, err := s.scanIndexes(&x, limit, interval)
		if s.installIndexes(&x, err) {
			return err
		}
	}
	_, err := s.rebuild(limit, interval)
	return err
}

// emptyIndexes returns indexes of the segment's capacities without entries,
// and whether the segment was written (rebuildAside).
func (s *segment) emptyIndexes() (segmentIndexes, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.empty(), s.mu.written
}

// installIndexes installs indexes x rebuilt aside, loaded unless the rebuild
// failed with err, and reports whether it did: not if the segment was written
// meanwhile.
func (s *segment) installIndexes(x *segmentIndexes, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.written {
		return false
	}
	s.mu.segmentIndexes = *x
	s.mu.loaded = err == nil
	return true
}

// scanIndexes builds indexes x (empty) by reading every batch of the log up
// to limit, validating each, and stops at the first torn or invalid one or at
// one whose offsets overlap or go back from its predecessor's (a forward gap
// is legal: compaction removes whole batches).
func (s *segment) scanIndexes(x *segmentIndexes, limit int64, interval int) (scanResult, error) {
	sc := fullScanner(s.log, 0, limit, 1<<20)
	defer sc.done()
	res := scanResult{next: s.base}
	for sc.next() {
		h := &sc.h
		_, first := relOffset(h.BaseOffset, s.base)
		if _, last := relOffset(h.LastOffset(), s.base); !first || !last {
			// Not a torn write (a file is never reused) but a file whose name
			// does not fit its batches: refuse rather than cut the log there.
			res.err = fmt.Errorf("%w: %s: batch at %d holds offsets %d-%d, outside the range its name's base offset %d can index", ErrCorruptSegment, s.log.Name(), sc.bpos, h.BaseOffset, h.LastOffset(), s.base)
			break
		}
		if h.BaseOffset < res.next {
			res.err = fmt.Errorf("%w: batch at %d has base offset %d, want at least %d", errOffsetGap, sc.bpos, h.BaseOffset, res.next)
			break
		}
		x.addBatch(s.base, h, sc.bpos, len(sc.b), interval)
		res.next = h.NextOffset()
		res.validSize = sc.pos
	}
	if res.err == nil {
		res.err = sc.err
	}
	if res.err != nil && !isDataError(res.err) {
		// An I/O error, not bad data: nothing can be concluded.
		return res, res.err
	}
	return res, nil
}

// isDataError reports whether a scan stopped because of the bytes themselves
// (torn tail, bad batch) rather than a failing read.
func isDataError(err error) bool {
	return errors.Is(err, errTornTail) || errors.Is(err, errOffsetGap) ||
		errors.Is(err, batch.ErrCorrupt) || errors.Is(err, batch.ErrInvalid)
}
