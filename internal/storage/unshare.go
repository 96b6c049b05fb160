package storage

import (
	"errors"
	"io"
	"slices"

	"github.com/strata-stream/strata/internal/vfs"
)

// A sealed segment's file may have a second name: a tier whose file:// store is
// on the log's filesystem links the segment into the store rather than copying
// it (Tier.putChunk). The two names are one file, so the log must never change
// such a file in place: the only in-place changes to a sealed segment are a
// truncation that cuts into it (Truncate, and recovery at a corrupt batch), and
// both first give the segment a private copy of its file.

// privateCopy returns a new file with s's bytes [0, s.size) under s's name, when
// s's file has another name; nil when it has none (or the filesystem cannot
// tell, having no links). The copy is written to <name>.tmp (which Open removes
// if a crash leaves it), fsynced and renamed over the name, and the directory is
// fsynced: after a crash the name holds the old file or the copy, the same bytes.
// The old file keeps its other name and s.log stays open on it.
func (l *Log) privateCopy(s *segment) (vfs.File, error) {
	linker, ok := l.fsys.(vfs.Linker)
	if !ok {
		return nil, nil
	}
	name := s.path(logSuffix)
	n, err := linker.Links(name)
	if errors.Is(err, errors.ErrUnsupported) || err == nil && n <= 1 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	tmp := name + tmpSuffix
	f, err := l.fsys.Create(tmp)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(f, io.NewSectionReader(s.log, 0, s.size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fsys.Rename(tmp, name)
	}
	if err != nil {
		_ = l.fsys.Remove(tmp)
		return nil, err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return nil, err
	}
	l.stats.segmentsUnshared.Add(1)
	return l.fsys.OpenReadWrite(name)
}

// unshareLocked gives segment s, about to be cut, a private copy of its file if
// it shares it (privateCopy) and returns the segment to cut: s itself, or a new
// segment on the copy that replaces s in the list. Readers holding Chunks of s
// keep reading the old file until they release it. appendMu is held.
func (l *Log) unshareLocked(s *segment) (*segment, error) {
	f, err := l.privateCopy(s)
	if err != nil || f == nil {
		return s, err
	}
	ns := newSegment(l.fsys, l.dir, s.base, f, l.conf())
	ns.size, ns.next, ns.rollJitter = s.size, s.next, s.rollJitter
	ns.mu.created, ns.mu.modified, ns.mu.aborts = s.creationTime(), s.lastModified(), s.abortState()
	l.replaceSegment(s, ns)
	s.release() // the log's reference; s is not deleted, its name is ns's now
	return ns, nil
}

// replaceSegment puts ns in s's place in the segment list.
func (l *Log) replaceSegment(s, ns *segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs := slices.Clone(l.mu.segments)
	segs[slices.Index(segs, s)] = ns
	l.mu.segments = segs
}
