package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// cleanedSuffix marks a cleaned segment's log before the swap installs it.
const cleanedSuffix = ".cleaned"

// errCompactionRaced (internal): a truncation ran during the pass; nothing was
// swapped.
var errCompactionRaced = errors.New("storage: log truncated during compaction")

// cleanedSegment is one group's cleaned segment, written as <base>.log.cleaned and
// fsynced, waiting for the swap. seg holds its in-memory indexes and extent; its
// file is opened when the swap installs it.
type cleanedSegment struct {
	old      []*segment // the group's segments it replaces
	seg      *segment
	end      int64 // the group's offsets end here
	readSize int64 // bytes of the group's segments
	// aborts is its aborted-transaction index: the old segments' entries
	// whose marker the pass kept; stale if one of theirs was (a log no
	// partition rebuilt the indexes of since Open).
	aborts      []AbortEntry
	abortsStale bool
}

func (cs *cleanedSegment) path() string { return cs.seg.path(logSuffix + cleanedSuffix) }

// discard removes the cleaned file of a segment that will not be swapped in. Best
// effort: Open removes leftovers.
func (cs *cleanedSegment) discard(l *Log) { _ = l.fsys.Remove(cs.path()) }

// groupWriter writes one group's cleaned segment. While every batch of the group's
// first segment comes through unchanged, it writes nothing: a segment that would
// not change is left in place. At the first difference it creates the file and
// copies the unchanged prefix from the source.
type groupWriter struct {
	l     *Log
	seg   *segment
	src   segmentView // the group's first segment
	f     vfs.File
	open  bool
	lazy  int64  // bytes of src's prefix written "in place" so far (while !open)
	buf   []byte // batches not yet written
	pos   int64  // file position of buf
	total int64  // bytes written or buffered
}

// add appends a batch of the cleaned segment; copied reports that it is the
// source batch unchanged.
func (w *groupWriter) add(b []byte, copied, inFirst bool) error {
	h, _ := batch.ParseHeader(b)
	w.seg.indexBatch(&h, w.total, len(b), w.l.conf().IndexIntervalBytes)
	w.total += int64(len(b))
	if !w.open && copied && inFirst {
		w.lazy += int64(len(b))
		return nil
	}
	if err := w.materialize(); err != nil {
		return err
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= scanWindow {
		return w.flush()
	}
	return nil
}

// materialize creates the cleaned file and copies the unchanged prefix into it.
func (w *groupWriter) materialize() error {
	if w.open {
		return nil
	}
	f, err := w.l.fsys.Create(w.seg.path(logSuffix + cleanedSuffix))
	if err != nil {
		return err
	}
	w.f, w.open = f, true
	for w.pos < w.lazy {
		n := min(w.lazy-w.pos, scanWindow)
		if int64(cap(w.buf)) < n {
			w.buf = make([]byte, n)
		}
		chunk := w.buf[:n]
		if got, err := w.src.s.log.ReadAt(chunk, w.pos); int64(got) != n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if _, err := f.WriteAt(chunk, w.pos); err != nil {
			return err
		}
		w.pos += n
	}
	w.buf = w.buf[:0]
	return nil
}

func (w *groupWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.pos); err != nil {
		return err
	}
	w.pos += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// finish flushes and fsyncs the file; false when the segment would not change.
func (w *groupWriter) finish() (bool, error) {
	if !w.open {
		return false, nil
	}
	err := w.flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.open = false
	return true, err
}

// writeCleaned filters a group's batches into its cleaned segment, named after
// the group's first base offset. It returns nil when the group is one segment that
// would not change.
func (l *Log) writeCleaned(p *compactPlan, g segmentGroup, c *cleaner) (_ *cleanedSegment, err error) {
	first := p.all[g.first]
	cs := &cleanedSegment{end: p.upper(g.last)}
	cs.seg = newSegment(l.fsys, l.dir, first.s.base, nil, l.conf())
	cs.seg.mu.loaded = true
	w := &groupWriter{l: l, seg: cs.seg, src: first}
	defer func() {
		if w.open {
			w.f.Close()
		}
		if err != nil && w.f != nil {
			cs.discard(l)
		}
	}()
	for i := g.first; i <= g.last; i++ {
		v := p.all[i]
		cs.old = append(cs.old, v.s)
		cs.readSize += v.size
		aborts, err := v.s.abortEntries(v.size)
		switch {
		case errors.Is(err, ErrAbortIndexStale):
			cs.abortsStale = true
		case err != nil:
			return nil, err
		}
		cs.aborts = append(cs.aborts, aborts...)
		if created := v.s.creationTime(); created.After(cs.seg.mu.created) {
			cs.seg.mu.created = created
		}
		if modified := v.s.lastModified(); modified.After(cs.seg.mu.modified) {
			cs.seg.mu.modified = modified
		}
		sc := fullScanner(v.s.log, 0, v.size, scanWindow)
		for sc.next() {
			h := sc.h
			out, copied, err := c.filter(sc.b, &h)
			if err != nil {
				sc.done()
				return nil, recordsFailure(v.s.log.Name(), sc.bpos, err)
			}
			if out == nil {
				if err := w.materialize(); err != nil {
					sc.done()
					return nil, err
				}
				continue
			}
			if err := w.add(out, copied, i == g.first); err != nil {
				sc.done()
				return nil, err
			}
		}
		sc.done()
		if sc.err != nil {
			return nil, corrupt(v.s.log.Name(), sc.pos, sc.err)
		}
	}
	if g.last > g.first {
		if err := w.materialize(); err != nil {
			return nil, err
		}
	}
	written, err := w.finish()
	if err != nil || !written {
		return nil, err
	}
	cs.aborts = slices.DeleteFunc(cs.aborts, func(e AbortEntry) bool { return c.markersRemoved[e.LastOffset] })
	cs.seg.size, cs.seg.next = w.total, cs.end
	c.stats.SegmentsRead += len(cs.old)
	c.stats.BytesRead += cs.readSize
	c.stats.SegmentsWritten++
	c.stats.BytesWritten += w.total
	return cs, nil
}

// swapCleaned installs the cleaned segments and the new cleaner state: steps 4a-4d
// of the package doc's Compaction section, under appendMu. Groups whose segments
// retention or DeleteRecords removed during the pass are dropped; a truncation
// during the pass abandons it (errCompactionRaced). A failure from 4a on makes the
// log fail-stop and leaves the cleaned files for the reopen to install. Readers see
// the old segments until 4c publishes the new ones and keep any Chunk of the old
// ones until they release it. swapCleaned owns out: what it does not install it
// discards.
func (l *Log) swapCleaned(p *compactPlan, out []*cleanedSegment, next cleanerState) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	err := l.writable()
	if err == nil && l.mu.truncGen != p.truncGen {
		err = errCompactionRaced
	}
	if err != nil {
		for _, cs := range out {
			cs.discard(l)
		}
		return err
	}
	live := out[:0]
	for _, cs := range out {
		if slices.ContainsFunc(cs.old, func(s *segment) bool { return !slices.Contains(l.mu.segments, s) }) {
			cs.discard(l)
			continue
		}
		live = append(live, cs)
	}
	if len(live) == 0 {
		if err := l.writeCleanerCheckpoint(&next); err != nil {
			return l.fail(err)
		}
		l.cleaner = next
		return nil
	}
	m := swapManifest{state: next}
	var old []*segment
	for _, cs := range live {
		m.groups = append(m.groups, swapGroup{base: cs.seg.base, end: cs.end})
		old = append(old, cs.old...)
	}
	if err := l.installCleaned(live, old, m); err != nil {
		return l.fail(err)
	}
	l.cleaner = next
	l.releaseDeleted(old)
	return nil
}

// installCleaned does steps 4a-4d; appendMu is held.
func (l *Log) installCleaned(live []*cleanedSegment, old []*segment, m swapManifest) error {
	if err := writeSideFileVersion(l.fsys, l.dir, swapManifestName, m.encode(), m.state.version()); err != nil {
		return err
	}
	if err := l.renameDeleted(old); err != nil {
		return err
	}
	for _, cs := range live {
		if err := l.fsys.Rename(cs.path(), cs.seg.path(logSuffix)); err != nil {
			return err
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return err
	}
	for i, cs := range live {
		f, err := l.fsys.OpenReadWrite(cs.seg.path(logSuffix))
		if err != nil {
			for _, opened := range live[:i] {
				opened.seg.log.Close()
			}
			return err
		}
		cs.seg.log = f
		// Held until its file is written below: the old files are gone.
		if cs.abortsStale {
			cs.seg.mu.aborts = abortIndex{stale: true}
		} else {
			cs.seg.holdAborts(cs.aborts)
		}
	}

	l.publishCleaned(live, old)

	for _, cs := range live {
		if err := cs.seg.writeIndexes(true); err != nil {
			return err
		}
		if err := cs.seg.sealAbortIndex(cs.seg.size, true, true); err != nil {
			return err
		}
	}
	if err := l.writeCleanerCheckpoint(&m.state); err != nil {
		return err
	}
	return removeDurably(l.fsys, l.dir, swapManifestName)
}

// finishSwap completes or rolls back a swap a crash interrupted, before Open reads
// the directory. Without a manifest the swap never committed: cleaned files are
// removed and the old segments stay. With one, each group's cleaned file, if still
// there, replaces every segment whose base lies in the group's range; if it is
// gone it was already installed, and only leftovers of old segments (base inside
// the range, above the group's base) are removed. The group's index files are
// removed either way (they may be the old segment's) and rebuilt on first use.
// Then the manifest's cleaner state is checkpointed and the manifest removed.
// names is the directory's listing; changed reports that finishSwap changed the
// directory (list it again).
func (l *Log) finishSwap(names []string) (changed bool, err error) {
	if !slices.Contains(names, swapManifestName) {
		return l.removeCleanedFrom(names)
	}
	return true, l.finishCommittedSwap()
}

func (l *Log) finishCommittedSwap() error {
	b, version, err := readSideFileVersion(l.fsys, l.dir, swapManifestName)
	var m swapManifest
	switch {
	case err == nil:
		if m, err = decodeSwapManifest(b, version); err != nil {
			return err
		}
	case isNotExist(err):
		_, err := l.removeCleaned()
		return err
	default:
		// A damaged manifest cannot say whether the swap committed.
		return err
	}
	names, err := l.fsys.List(l.dir)
	if err != nil {
		return err
	}
	for _, g := range m.groups {
		cleaned := segmentName(g.base, logSuffix+cleanedSuffix)
		pending := slices.Contains(names, cleaned)
		for _, name := range names {
			base, ok := parseSegmentName(name)
			if !ok || base < g.base || base >= g.end || (base == g.base && !pending) {
				continue
			}
			if err := l.removeSegmentFiles(base); err != nil {
				return err
			}
		}
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, abortIndexSuffix} {
			if err := l.fsys.Remove(filepath.Join(l.dir, segmentName(g.base, suffix))); err != nil && !isNotExist(err) {
				return err
			}
		}
		if pending {
			if err := l.fsys.Rename(filepath.Join(l.dir, cleaned), filepath.Join(l.dir, segmentName(g.base, logSuffix))); err != nil {
				return err
			}
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return err
	}
	if _, err := l.removeCleaned(); err != nil {
		return err
	}
	if err := l.writeCleanerCheckpoint(&m.state); err != nil {
		return err
	}
	return removeDurably(l.fsys, l.dir, swapManifestName)
}

// removeSegmentFiles removes a segment's log and index files.
func (l *Log) removeSegmentFiles(base int64) error {
	for _, suffix := range segmentFileSuffixes {
		if err := l.fsys.Remove(filepath.Join(l.dir, segmentName(base, suffix))); err != nil && !isNotExist(err) {
			return err
		}
	}
	return nil
}

// removeCleaned removes cleaned files no swap will install: every one left once
// the manifest, if any, is done. It reports whether it removed any.
func (l *Log) removeCleaned() (bool, error) {
	names, err := l.fsys.List(l.dir)
	if err != nil {
		return false, err
	}
	return l.removeCleanedFrom(names)
}

// removeCleanedFrom is removeCleaned with the directory listed already.
func (l *Log) removeCleanedFrom(names []string) (bool, error) {
	removed := false
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
				return removed, err
			}
			removed = true
		}
	}
	return removed, nil
}

// loadCleaner reads the cleaner checkpoint once the log's extent is known. A
// missing or damaged checkpoint leaves everything dirty, which only delays
// tombstone removal by a pass. A checkpoint beyond the log end (a truncation whose
// checkpoint write a crash lost) is cut back to it, durably, before appends can
// reuse those offsets.
func (l *Log) loadCleaner() error {
	if b, version, err := readSideFileVersion(l.fsys, l.dir, cleanerCheckpointName); err == nil {
		if st, rest, err := decodeCleanerState(b, version); err == nil && len(rest) == 0 {
			l.cleaner = st
		}
	}
	return l.clampCleanerLocked(l.mu.leo.Load())
}

// writeCleanerCheckpoint makes st the cleaner checkpoint, durably.
func (l *Log) writeCleanerCheckpoint(st *cleanerState) error {
	return writeSideFileVersion(l.fsys, l.dir, cleanerCheckpointName, st.encode(), st.version())
}

// clampCleanerLocked forgets that offsets at or above offset are clean and
// checkpoints that if it changed anything; appendMu is held (or the log is
// loading).
func (l *Log) clampCleanerLocked(offset int64) error {
	if !l.cleaner.clamp(offset) {
		return nil
	}
	if err := l.writeCleanerCheckpoint(&l.cleaner); err != nil {
		return fmt.Errorf("cleaner checkpoint: %w", err)
	}
	return nil
}

// publishCleaned replaces in the segment list each cleaned segment's first
// source segment by it and drops the other sources, old. appendMu is held.
func (l *Log) publishCleaned(live []*cleanedSegment, old []*segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs := make([]*segment, 0, len(l.mu.segments))
	for _, s := range l.mu.segments {
		if i := slices.IndexFunc(live, func(cs *cleanedSegment) bool { return cs.old[0] == s }); i >= 0 {
			segs = append(segs, live[i].seg)
		} else if !slices.Contains(old, s) {
			segs = append(segs, s)
		}
	}
	l.mu.segments = segs
}
