package raftstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/vfs"
)

// Snapshots is a raft.SnapshotStore on a vfs.FS, in the layout of raft's
// FileSnapshotStore (so a data directory it wrote opens unchanged):
//
//	<dir>/snapshots/<term>-<index>-<unix ms>/meta.json   raft.SnapshotMeta and
//	                                                     CRC (crc64 ECMA of state.bin)
//	<dir>/snapshots/<term>-<index>-<unix ms>/state.bin   the FSM's snapshot
//
// A snapshot is written under <id>.tmp; Close syncs both files and the
// directory, renames it to <id> and syncs snapshots/, then removes all but the
// newest retain snapshots; a .tmp directory left by a crash goes at the next
// OpenSnapshots. Open verifies the CRC before returning the state.
type Snapshots struct {
	fsys   vfs.FS
	dir    string // <dir>/snapshots
	retain int

	mu sync.Mutex // serialises Close's rename and reaping
}

var _ raft.SnapshotStore = (*Snapshots)(nil)

const (
	metaName  = "meta.json"
	stateName = "state.bin"
	tmpSuffix = ".tmp"
)

var crcTable = crc64.MakeTable(crc64.ECMA)

// snapshotMeta is meta.json.
type snapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// OpenSnapshots opens or creates the snapshot store under dir, keeping the
// newest retain snapshots.
func OpenSnapshots(fsys vfs.FS, dir string, retain int) (*Snapshots, error) {
	if retain < 1 {
		return nil, fmt.Errorf("raftstore: retain %d snapshots: must be at least 1", retain)
	}
	s := &Snapshots{fsys: fsys, dir: filepath.Join(dir, "snapshots"), retain: retain}
	if err := vfs.MkdirAllDurable(fsys, s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	// Snapshots a crash interrupted are never completed: drop them.
	names, err := fsys.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			if err := fsys.RemoveAll(filepath.Join(s.dir, name)); err != nil {
				return nil, fmt.Errorf("raftstore: %w", err)
			}
		}
	}
	if err := fsys.SyncDir(s.dir); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	return s, nil
}

// Create starts a snapshot; the FSM writes it to the sink and closes it.
func (s *Snapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("raftstore: snapshot version %d unsupported", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	tmp := filepath.Join(s.dir, id+tmpSuffix)
	if err := s.fsys.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	f, err := s.fsys.Create(filepath.Join(tmp, stateName))
	if err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	sink := &snapshotSink{s: s, tmp: tmp, f: f, crc: crc64.New(crcTable), meta: snapshotMeta{SnapshotMeta: raft.SnapshotMeta{
		Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex,
	}}}
	sink.w = bufio.NewWriter(io.MultiWriter(f, sink.crc))
	return sink, nil
}

// List returns the snapshots, newest (highest term, then index) first.
func (s *Snapshots) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.list()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, min(len(metas), s.retain))
	for _, m := range metas[:min(len(metas), s.retain)] {
		out = append(out, &m.SnapshotMeta)
	}
	return out, nil
}

// list reads every complete snapshot's meta, newest first; an unreadable one
// is skipped.
func (s *Snapshots) list() ([]*snapshotMeta, error) {
	names, err := s.fsys.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	var metas []*snapshotMeta
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			continue
		}
		m, err := s.readMeta(name)
		if err != nil {
			continue
		}
		metas = append(metas, m)
	}
	slices.SortFunc(metas, func(a, b *snapshotMeta) int {
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return metas, nil
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

func (s *Snapshots) readMeta(id string) (*snapshotMeta, error) {
	b, err := readFile(s.fsys, filepath.Join(s.dir, id, metaName))
	if err != nil {
		return nil, err
	}
	var m snapshotMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("raftstore: snapshot %s: %w", id, err)
	}
	return &m, nil
}

// Open returns a snapshot's meta and its state, checked against its CRC.
func (s *Snapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, err
	}
	state, err := readFile(s.fsys, filepath.Join(s.dir, id, stateName))
	if err != nil {
		return nil, nil, fmt.Errorf("raftstore: snapshot %s: %w", id, err)
	}
	h := crc64.New(crcTable)
	h.Write(state)
	if !bytes.Equal(m.CRC, h.Sum(nil)) {
		return nil, nil, fmt.Errorf("raftstore: snapshot %s: CRC mismatch", id)
	}
	return &m.SnapshotMeta, io.NopCloser(bytes.NewReader(state)), nil
}

// reap removes all but the newest retain complete snapshots. Snapshots being
// written are left alone (OpenSnapshots drops those a crash abandoned).
func (s *Snapshots) reap() error {
	metas, err := s.list()
	if err != nil {
		return err
	}
	var errs []error
	old := metas[min(len(metas), s.retain):]
	for _, m := range old {
		errs = append(errs, s.fsys.RemoveAll(filepath.Join(s.dir, m.ID)))
	}
	if len(old) > 0 {
		errs = append(errs, s.fsys.SyncDir(s.dir))
	}
	return errors.Join(errs...)
}

// snapshotSink writes one snapshot.
type snapshotSink struct {
	s    *Snapshots
	tmp  string
	f    vfs.File
	w    *bufio.Writer
	crc  hash.Hash64
	meta snapshotMeta
	done bool
}

func (k *snapshotSink) ID() string { return k.meta.ID }

func (k *snapshotSink) Write(p []byte) (int, error) { return k.w.Write(p) }

// Close makes the snapshot durable and visible, then reaps older ones.
func (k *snapshotSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	err := k.finish()
	if err != nil {
		k.s.fsys.RemoveAll(k.tmp)
		return err
	}
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	final := filepath.Join(k.s.dir, k.meta.ID)
	if err := k.s.fsys.Rename(k.tmp, final); err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	if err := k.s.fsys.SyncDir(k.s.dir); err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	return k.s.reap()
}

// finish flushes and syncs state.bin, writes and syncs meta.json, and syncs
// the snapshot's directory.
func (k *snapshotSink) finish() error {
	err := k.w.Flush()
	if err == nil {
		err = k.f.Sync()
	}
	if cerr := k.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	size, err := k.s.fsys.Stat(filepath.Join(k.tmp, stateName))
	if err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	k.meta.Size = size.Size()
	k.meta.CRC = k.crc.Sum(nil)
	b, err := json.Marshal(&k.meta)
	if err != nil {
		return err
	}
	mf, err := k.s.fsys.Create(filepath.Join(k.tmp, metaName))
	if err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	_, err = mf.Write(b)
	if err == nil {
		err = mf.Sync()
	}
	if cerr := mf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = k.s.fsys.SyncDir(k.tmp)
	}
	if err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	return nil
}

// Cancel abandons the snapshot.
func (k *snapshotSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.f.Close()
	return k.s.fsys.RemoveAll(k.tmp)
}

// readFile reads a whole file.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}
