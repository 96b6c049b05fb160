// Package raftstore keeps the controller's Raft state on a vfs.FS, so that the
// in-memory filesystem's power cut reaches it like every other file Strata
// writes: the log and stable store (WAL, file raft.wal) and the snapshot store
// (Snapshots, directory snapshots/).
//
// bbolt, the controller's earlier store (package boltstore), cannot go through
// vfs: it opens its file itself, needs an *os.File and maps it into memory. A
// data directory that still holds raft.db is migrated once, at open (Migrate).
//
// # The WAL
//
// raft.wal is a sequence of records, each fsynced before the call that wrote it
// returns:
//
//	+-----------+--------------+----+-----------------------------------------+
//	| len u32   | crc32c u32   | op | body                                    |
//	| (op+body) | (op+body)    | u8 |                                         |
//	+-----------+--------------+----+-----------------------------------------+
//
//	op 1 entry:   index u64, then boltstore.EncodeLog of the raft.Log
//	op 2 delete:  lo u64, hi u64 (the entries lo..hi inclusive go)
//	op 3 set:     key length uvarint, key, value
//
// Integers are big-endian. The stable key strata.wal.format holds the format's
// version (u16, 1: the layout above); Open writes it into a file that lacks it
// (one written before the key existed, which has this layout) and refuses a
// file of a newer version (ErrUnsupportedFormat) rather than misread it. The
// key is an ordinary stable value, so a build that predates it opens the file
// and ignores it. Open replays every record into memory (the
// controller's log is bounded by its snapshot threshold and trailing logs). A
// record that is short or fails its checksum ends the log: only the last write
// can be torn, since every earlier one was synced, and the file is cut there.
// When the file has grown to twice its live contents (and past compactBytes)
// it is rewritten with only those: to raft.wal.tmp, fsynced, renamed over
// raft.wal, and the directory fsynced.
//
// Every method is safe for concurrent use; writes are serialised.
package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/controller/boltstore"
	"github.com/strata-stream/strata/internal/vfs"
)

var (
	// ErrCorrupt: a WAL record decodes to something impossible (its checksum
	// matched). The node must not continue on this log.
	ErrCorrupt = errors.New("raftstore: corrupt record")
	// ErrUnsupportedFormat: raft.wal was written in a newer format than this
	// build reads (a downgrade past a format change). The node must not start
	// on it.
	ErrUnsupportedFormat = errors.New("raftstore: unsupported raft.wal format")
)

const (
	walName     = "raft.wal"
	frameHeader = 8 // len, crc
	opEntry     = 1
	opDelete    = 2
	opSet       = 3
	// compactBytes: the WAL is not rewritten below this size.
	compactBytes = 4 << 20
	// formatKey is the stable key holding the file's format version, and
	// walFormat the version this build writes and reads.
	formatKey = "strata.wal.format"
	walFormat = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WAL is a raft.LogStore and raft.StableStore in one file on a vfs.FS.
type WAL struct {
	fsys vfs.FS
	dir  string

	mu       sync.Mutex
	f        vfs.File
	size     int64             // bytes in the file
	live     int64             // bytes the live contents take as records
	entries  map[uint64][]byte // index -> encoded log (boltstore.EncodeLog)
	first    uint64            // 0: no entries
	last     uint64
	stable   map[string][]byte
	writeErr error // a failed write or sync: the WAL takes no more writes
}

var (
	_ raft.LogStore    = (*WAL)(nil)
	_ raft.StableStore = (*WAL)(nil)
)

// OpenWAL opens or creates dir/raft.wal on fsys.
func OpenWAL(fsys vfs.FS, dir string) (*WAL, error) {
	if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	w := &WAL{fsys: fsys, dir: dir, entries: map[uint64][]byte{}, stable: map[string][]byte{}}
	path := filepath.Join(dir, walName)
	_, statErr := fsys.Stat(path)
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	w.f = f
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := fsys.SyncDir(dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("raftstore: %w", err)
		}
	}
	if err := w.replay(); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.checkFormat(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// holdsRaftStateLocked reports whether the WAL holds entries or stable values
// besides its format version.
func (w *WAL) holdsRaftStateLocked() bool {
	_, format := w.stable[formatKey]
	return w.first != 0 || len(w.stable) > 1 || len(w.stable) == 1 && !format
}

// checkFormat refuses a file of another format version and records the
// version in a file that has none.
func (w *WAL) checkFormat() error {
	v, ok := w.stable[formatKey]
	if !ok {
		return w.Set([]byte(formatKey), binary.BigEndian.AppendUint16(nil, walFormat))
	}
	if len(v) != 2 {
		return fmt.Errorf("%w: format value of %d bytes", ErrCorrupt, len(v))
	}
	if got := binary.BigEndian.Uint16(v); got != walFormat {
		return fmt.Errorf("%w: %s is format %d, this build reads format %d (written by a newer Strata?)",
			ErrUnsupportedFormat, filepath.Join(w.dir, walName), got, walFormat)
	}
	return nil
}

// replay reads every record into memory and cuts a torn tail.
func (w *WAL) replay() error {
	size, err := w.f.Size()
	if err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	data := make([]byte, size)
	if _, err := w.f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("raftstore: %w", err)
	}
	off := int64(0)
	for off+frameHeader <= size {
		n := int64(binary.BigEndian.Uint32(data[off:]))
		if n == 0 || off+frameHeader+n > size {
			break
		}
		rec := data[off+frameHeader : off+frameHeader+n]
		if crc32.Checksum(rec, castagnoli) != binary.BigEndian.Uint32(data[off+4:]) {
			break
		}
		if err := w.applyRecord(rec); err != nil {
			return err
		}
		off += frameHeader + n
	}
	if off < size {
		// A torn last write: it was never acknowledged.
		if err := w.f.Truncate(off); err != nil {
			return fmt.Errorf("raftstore: %w", err)
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("raftstore: %w", err)
		}
	}
	w.size = off
	return nil
}

// applyRecord applies one record (op and body) to the in-memory state.
func (w *WAL) applyRecord(rec []byte) error {
	op, body := rec[0], rec[1:]
	switch op {
	case opEntry:
		if len(body) < 8 {
			return fmt.Errorf("%w: short entry", ErrCorrupt)
		}
		w.putEntry(binary.BigEndian.Uint64(body), bytes.Clone(body[8:]))
	case opDelete:
		if len(body) != 16 {
			return fmt.Errorf("%w: delete of %d bytes", ErrCorrupt, len(body))
		}
		w.deleteRange(binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:]))
	case opSet:
		n, k := binary.Uvarint(body)
		if k <= 0 || uint64(len(body)-k) < n {
			return fmt.Errorf("%w: set key length", ErrCorrupt)
		}
		key, val := body[k:k+int(n)], body[k+int(n):]
		w.setStable(string(key), bytes.Clone(val))
	default:
		return fmt.Errorf("%w: op %d", ErrCorrupt, op)
	}
	return nil
}

func (w *WAL) putEntry(index uint64, enc []byte) {
	if old, ok := w.entries[index]; ok {
		w.live -= entryRecordSize(old)
	}
	w.entries[index] = enc
	w.live += entryRecordSize(enc)
	if w.first == 0 || index < w.first {
		w.first = index
	}
	w.last = max(w.last, index)
}

func (w *WAL) deleteRange(lo, hi uint64) {
	if w.first == 0 {
		return
	}
	for i := max(lo, w.first); i <= min(hi, w.last); i++ {
		if enc, ok := w.entries[i]; ok {
			w.live -= entryRecordSize(enc)
			delete(w.entries, i)
		}
	}
	switch {
	case len(w.entries) == 0:
		w.first, w.last = 0, 0
	case lo <= w.first:
		for w.entries[w.first] == nil {
			w.first++
		}
	default:
		for w.entries[w.last] == nil {
			w.last--
		}
	}
}

func (w *WAL) setStable(key string, val []byte) {
	if old, ok := w.stable[key]; ok {
		w.live -= setRecordSize(key, old)
	}
	w.stable[key] = val
	w.live += setRecordSize(key, val)
}

func entryRecordSize(enc []byte) int64 { return frameHeader + 1 + 8 + int64(len(enc)) }

func setRecordSize(key string, val []byte) int64 {
	return frameHeader + 1 + int64(binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(key)))) + int64(len(key)+len(val))
}

// appendRecord frames op and body onto buf.
func appendRecord(buf []byte, op byte, body ...[]byte) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, op)
	for _, b := range body {
		buf = append(buf, b...)
	}
	rec := buf[start+frameHeader:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(rec)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(rec, castagnoli))
	return buf
}

// writeLocked appends records to the file and syncs it. A failure makes the
// WAL refuse every later write: what reached the disk is unknown.
func (w *WAL) writeLocked(buf []byte) error {
	if w.writeErr != nil {
		return w.writeErr
	}
	if _, err := w.f.WriteAt(buf, w.size); err != nil {
		w.writeErr = fmt.Errorf("raftstore: write: %w", err)
		return w.writeErr
	}
	if err := w.f.Sync(); err != nil {
		w.writeErr = fmt.Errorf("raftstore: sync: %w", err)
		return w.writeErr
	}
	w.size += int64(len(buf))
	return nil
}

// Close closes the file.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}

// FirstIndex returns the first stored index, 0 if the log is empty.
func (w *WAL) FirstIndex() (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first, nil
}

// LastIndex returns the last stored index, 0 if the log is empty.
func (w *WAL) LastIndex() (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, nil
}

// GetLog reads the entry at index into l (raft.ErrLogNotFound if absent).
func (w *WAL) GetLog(index uint64, l *raft.Log) error {
	w.mu.Lock()
	enc, ok := w.entries[index]
	w.mu.Unlock()
	if !ok {
		return raft.ErrLogNotFound
	}
	if err := boltstore.DecodeLog(enc, l); err != nil {
		return fmt.Errorf("raftstore: entry %d: %w", index, err)
	}
	l.Index = index
	return nil
}

// StoreLog stores one entry.
func (w *WAL) StoreLog(l *raft.Log) error { return w.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries with one write and one fsync.
func (w *WAL) StoreLogs(logs []*raft.Log) error {
	var buf []byte
	encs := make([][]byte, len(logs))
	for i, l := range logs {
		encs[i] = boltstore.EncodeLog(l)
		buf = appendRecord(buf, opEntry, binary.BigEndian.AppendUint64(nil, l.Index), encs[i])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeLocked(buf); err != nil {
		return err
	}
	for i, l := range logs {
		w.putEntry(l.Index, encs[i])
	}
	return w.maybeCompactLocked()
}

// DeleteRange removes the entries lo..hi, inclusive.
func (w *WAL) DeleteRange(lo, hi uint64) error {
	body := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, lo), hi)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeLocked(appendRecord(nil, opDelete, body)); err != nil {
		return err
	}
	w.deleteRange(lo, hi)
	return w.maybeCompactLocked()
}

// Set stores a stable value.
func (w *WAL) Set(key, val []byte) error {
	rec := appendRecord(nil, opSet, binary.AppendUvarint(nil, uint64(len(key))), key, val)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeLocked(rec); err != nil {
		return err
	}
	w.setStable(string(key), bytes.Clone(val))
	return w.maybeCompactLocked()
}

// Get returns a stable value; a missing key gives an empty value and no error.
func (w *WAL) Get(key []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.stable[string(key)]), nil
}

// SetUint64 stores a stable integer.
func (w *WAL) SetUint64(key []byte, val uint64) error {
	return w.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable integer; a missing key gives 0 and no error.
func (w *WAL) GetUint64(key []byte) (uint64, error) {
	v, _ := w.Get(key)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrCorrupt, key, len(v))
}

// maybeCompactLocked rewrites the file with only the live contents once it
// has grown to twice their size and past compactBytes. A rewrite that fails
// before its rename leaves the WAL as it was: the next write tries again.
func (w *WAL) maybeCompactLocked() error {
	if w.size < compactBytes || w.size < 2*w.live {
		return nil
	}
	if renamed, err := w.rewriteLocked(); renamed {
		return err
	}
	return nil
}

// rewriteLocked writes the live contents to a new file and renames it over
// the WAL (tmp, fsync, rename, directory fsync). renamed reports whether the
// new file replaced the old one; a failure after that makes the WAL refuse
// writes (whether the rename survives a power cut is unknown).
func (w *WAL) rewriteLocked() (renamed bool, err error) {
	buf := make([]byte, 0, w.live)
	for key, val := range w.stable {
		buf = appendRecord(buf, opSet, binary.AppendUvarint(nil, uint64(len(key))), []byte(key), val)
	}
	if w.first != 0 {
		for i := w.first; i <= w.last; i++ {
			if enc, ok := w.entries[i]; ok {
				buf = appendRecord(buf, opEntry, binary.BigEndian.AppendUint64(nil, i), enc)
			}
		}
	}
	path := filepath.Join(w.dir, walName)
	tmp := path + ".tmp"
	f, err := w.fsys.Create(tmp)
	if err != nil {
		return false, fmt.Errorf("raftstore: rewrite: %w", err)
	}
	if _, err = f.WriteAt(buf, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = w.fsys.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		w.fsys.Remove(tmp)
		return false, fmt.Errorf("raftstore: rewrite: %w", err)
	}
	if err := w.fsys.SyncDir(w.dir); err != nil {
		w.writeErr = fmt.Errorf("raftstore: rewrite: %w", err)
	}
	w.f.Close()
	w.f, w.size, w.live = f, int64(len(buf)), int64(len(buf))
	return true, w.writeErr
}
