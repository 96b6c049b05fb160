package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// Files of a log directory (LogDir), beside its partition directories.
const (
	// dirRecoveryName holds every partition's recovery checkpoint.
	dirRecoveryName = "recovery-point-offset-checkpoint"
	// dirCleanShutdownName holds every cleanly closed partition's marker. It is
	// written by LogDir.Close and removed by OpenLogDir.
	dirCleanShutdownName = "clean-shutdown"
)

// errNoEntry: a LogDir holds no checkpoint or marker for a log.
var errNoEntry = fmt.Errorf("storage: no log dir entry: %w", fs.ErrNotExist)

func isCorrupt(err error) bool { return errors.Is(err, ErrCorruptSideFile) }

// DefaultCheckpointInterval is how often a LogDir writes its recovery checkpoint
// when something changed (Kafka's log.flush.offset.checkpoint.interval.ms).
const DefaultCheckpointInterval = time.Minute

// LogDir is a directory of partition logs, one subdirectory each (Kafka's log
// directory). It keeps the recovery checkpoints (recovery point and log start
// offset) of all its logs in one file, and their clean-shutdown markers in
// another, so that opening or rolling a log costs no fsync of its own:
//
//  1. OpenLogDir reads both files, then removes the marker file durably (the only
//     fsync of a start), and starts the checkpoint writer.
//  2. LogDir.Open opens each partition log by its subdirectory's name; a log
//     closed cleanly and unchanged since is trusted without reading a batch.
//  3. A roll moves the log's recovery point in memory; the writer puts it on disk
//     every interval. A stale recovery point only makes recovery read more. A
//     change that must not be lost (a truncation, a new log start offset) writes
//     the file before it returns.
//  4. The broker closes every log, then the LogDir, which writes the recovery
//     checkpoint and then the clean-shutdown markers.
//
// Remove forgets a deleted partition. A name with an entry but no directory
// (deleted, and the removal not yet checkpointed when the broker stopped) loses
// its entry durably before LogDir.Open creates the directory again.
//
// Upgrade: a log written by Open alone (the per-partition layout of earlier
// versions: recovery-point.checkpoint and clean-shutdown in the partition's
// directory) opens through LogDir.Open: its files are read when the LogDir has no
// entry for it, its marker is removed durably at once, and its recovery
// checkpoint is removed after the LogDir's file holds the entry.
type LogDir struct {
	fsys vfs.FS
	dir  string

	// writeMu serialises writes of the recovery checkpoint file; it is taken
	// before mu, and a log's appendMu before both.
	writeMu sync.Mutex
	mu      struct {
		sync.Mutex
		entries map[string]recoveryCheckpoint // by partition directory name
		clean   map[string]cleanShutdown      // markers read at open, consumed by Open
		closed  map[string]cleanShutdown      // markers of logs closed cleanly since
		// closing holds the recovery checkpoints of logs closed cleanly whose
		// files wait for Close's syncfs (syncsAtClose); the checkpoint takes
		// them only after it, so it never runs ahead of their data.
		closing map[string]recoveryCheckpoint
		legacy  map[string]bool // per-partition checkpoints to remove after the next write
		removed map[string]bool // names removed since the last write
		opened  map[string]bool // names opened since OpenLogDir
		dirty   bool
		err     error // the last failed background write, nil after a good one
		shut    bool  // Close ran
	}
	// synced: OpenLogDir made everything on the filesystem durable (syncfs)
	// after an unclean stop, so what a log's first Open recovers is on disk.
	synced bool
	// syncsAtClose: the filesystem can syncfs, so logs closing cleanly leave
	// their fsyncs to the one syncfs Close makes before it writes the markers.
	syncsAtClose bool
	// fsSync, when set, makes the logs' fsyncs of their active segments
	// syncfs calls shared across the logs (LogDirOptions.SyncFilesystem).
	fsSync *fsSync
	stop   chan struct{}
	done   chan struct{}
}

// LogDirOptions configure OpenLogDir.
type LogDirOptions struct {
	// CheckpointInterval is how often the checkpoint writer writes the
	// recovery checkpoint if it changed (DefaultCheckpointInterval when <= 0).
	CheckpointInterval time.Duration
	// SyncFilesystem makes every log's fsync of its active segment a syncfs
	// of the filesystem holding the directory, shared by the logs that sync
	// at the same time (fssync.go). For a directory on a filesystem of its
	// own: a syncfs also writes every other writer's dirty pages there. The
	// FS must implement vfs.FSSyncOpener.
	SyncFilesystem bool
}

// OpenLogDir opens (creating it if needed) the log directory dir and starts its
// checkpoint writer.
func OpenLogDir(fsys vfs.FS, dir string, opts LogDirOptions) (*LogDir, error) {
	interval := opts.CheckpointInterval
	if interval <= 0 {
		interval = DefaultCheckpointInterval
	}
	if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
		return nil, err
	}
	d := &LogDir{fsys: fsys, dir: dir, stop: make(chan struct{}), done: make(chan struct{})}
	_, d.syncsAtClose = fsys.(vfs.FSSyncer)
	d.mu.entries = map[string]recoveryCheckpoint{}
	d.mu.clean = map[string]cleanShutdown{}
	d.mu.closed = map[string]cleanShutdown{}
	d.mu.closing = map[string]recoveryCheckpoint{}
	d.mu.legacy = map[string]bool{}
	d.mu.removed = map[string]bool{}
	d.mu.opened = map[string]bool{}
	// A damaged file is as good as none: every log recovers by scanning.
	if b, err := readSideFile(fsys, dir, dirRecoveryName); err == nil {
		if entries, err := decodeDirEntries(b, 16); err == nil {
			for name, v := range entries {
				d.mu.entries[name] = recoveryCheckpoint{RecoveryPoint: v[0], LogStartOffset: v[1]}
			}
		}
	} else if !isNotExist(err) && !isCorrupt(err) {
		return nil, err
	}
	b, err := readSideFile(fsys, dir, dirCleanShutdownName)
	if err == nil {
		if entries, err := decodeDirEntries(b, 24); err == nil {
			for name, v := range entries {
				d.mu.clean[name] = cleanShutdown{LogEndOffset: v[0], ActiveBase: v[1], ActiveSize: v[2]}
			}
		}
	} else if !isNotExist(err) && !isCorrupt(err) {
		return nil, err
	}
	if isNotExist(err) {
		// An unclean stop: the page cache may hold writes no fsync covered.
		// One syncfs makes them durable for every log at once; without it each
		// recovered log's flusher fsyncs its active segment. A first start
		// (an empty directory) has nothing to make durable, and a syncfs
		// would wait for every other writer's dirty pages on the filesystem
		// (a quarter of a second of a node's start-up beside a busy writer).
		if s, ok := fsys.(vfs.FSSyncer); ok && !isEmptyDir(fsys, dir) {
			d.synced = s.SyncFS(dir) == nil
		}
	}
	// Before any log can change: a marker left behind would vouch for a log
	// that a later crash left torn.
	if err := removeDurably(fsys, dir, dirCleanShutdownName); err != nil {
		return nil, err
	}
	if opts.SyncFilesystem {
		o, ok := fsys.(vfs.FSSyncOpener)
		if !ok {
			return nil, fmt.Errorf("storage: log directory %s: syncing its filesystem: %w", dir, errors.ErrUnsupported)
		}
		h, err := o.OpenFSSync(dir)
		if err != nil {
			return nil, err
		}
		d.fsSync = newFSSync(h)
	}
	go d.run(interval)
	return d, nil
}

// isEmptyDir reports whether dir lists no entry (false if it cannot be listed).
func isEmptyDir(fsys vfs.FS, dir string) bool {
	names, err := fsys.List(dir)
	return err == nil && len(names) == 0
}

// Dir returns the directory's path.
func (d *LogDir) Dir() string { return d.dir }

// Open opens the partition log in the subdirectory name (see the package's Open).
func (d *LogDir) Open(name string, cfg Config) (*Log, error) {
	path := filepath.Join(d.dir, name)
	if _, err := d.fsys.Stat(path); isNotExist(err) {
		// A new log: the file on disk must not hold an old one's entry by the
		// same name before the directory is there to match it.
		if d.forgetStale(name) {
			if err := d.Checkpoint(); err != nil {
				return nil, fmt.Errorf("storage: open %s: %w", path, err)
			}
		}
	}
	return open(d.fsys, path, cfg, d, name)
}

// forgetStale forgets an entry or a removal recorded for name and reports
// whether there was one: the checkpoint must then be written before a new log
// by that name opens.
func (d *LogDir) forgetStale(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, stale := d.mu.entries[name]
	stale = stale || d.mu.removed[name]
	if stale {
		delete(d.mu.entries, name)
		d.mu.removed[name] = true
		d.mu.dirty = true
	}
	return stale
}

// Remove forgets the log in subdirectory name, which the caller closed and
// deleted. The change reaches the disk with the next checkpoint.
func (d *LogDir) Remove(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.entries, name)
	delete(d.mu.clean, name)
	delete(d.mu.closed, name)
	delete(d.mu.closing, name)
	delete(d.mu.legacy, name)
	d.mu.removed[name] = true
	d.mu.dirty = true
}

// Checkpoint writes the recovery checkpoint file now if anything changed since the
// last write.
func (d *LogDir) Checkpoint() error {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	return d.checkpointLocked()
}

// checkpointLocked writes the recovery checkpoint; writeMu is held.
func (d *LogDir) checkpointLocked() error {
	entries, legacy, removed, dirty := d.takeDirty()
	if !dirty {
		return nil
	}
	if err := writeSideFile(d.fsys, d.dir, dirRecoveryName, encodeDirEntries(entries)); err != nil {
		d.markDirty()
		return fmt.Errorf("storage: log dir checkpoint: %w", err)
	}
	// The entries are durable: the old per-partition files are only stale now
	// (the LogDir's entry wins), so their removal needs no fsync.
	for _, name := range legacy {
		if err := d.fsys.Remove(filepath.Join(d.dir, name, recoveryCheckpointName)); err != nil && !isNotExist(err) {
			return err
		}
	}
	d.forgetWritten(legacy, removed)
	return nil
}

// takeDirty returns, if anything changed since the last checkpoint write
// (dirty), the entries to write and the legacy files and removals they
// settle, and marks the checkpoint clean.
func (d *LogDir) takeDirty() (entries map[string][]int64, legacy, removed []string, dirty bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.dirty {
		return nil, nil, nil, false
	}
	entries = make(map[string][]int64, len(d.mu.entries))
	for name, rc := range d.mu.entries {
		entries[name] = []int64{rc.RecoveryPoint, rc.LogStartOffset}
	}
	legacy = slices.Collect(maps.Keys(d.mu.legacy))
	removed = slices.Collect(maps.Keys(d.mu.removed))
	d.mu.dirty = false
	return entries, legacy, removed, true
}

// markDirty makes the next checkpoint write the file again.
func (d *LogDir) markDirty() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.dirty = true
}

// forgetWritten forgets the legacy files and removals a written checkpoint
// settled.
func (d *LogDir) forgetWritten(legacy, removed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range legacy {
		delete(d.mu.legacy, name)
	}
	for _, name := range removed {
		delete(d.mu.removed, name)
	}
}

// Err returns the error of the last background checkpoint write if it failed
// (it is retried every interval), or nil.
func (d *LogDir) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.err
}

func (d *LogDir) run(interval time.Duration) {
	defer close(d.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.setErr(d.Checkpoint())
	}
}

// setErr records the result of the last background checkpoint write.
func (d *LogDir) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.err = err
}

// Close stops the checkpoint writer, writes the recovery checkpoint and then the
// clean-shutdown markers of the logs closed cleanly, after one syncfs made
// their files durable (syncsAtClose; if it fails, those logs get no marker
// and their checkpoints stay as they were: each recovers at the next open).
// Close every log first: a log still open gets no marker and recovers at the
// next start.
func (d *LogDir) Close() error {
	if d.markShut() {
		return ErrClosed
	}
	close(d.stop)
	<-d.done
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if d.anyClosing() {
		d.settleClosing(d.syncFS() == nil)
	}
	err := d.checkpointLocked()
	if err == nil {
		err = writeSideFile(d.fsys, d.dir, dirCleanShutdownName, encodeDirEntries(d.cleanMarkers()))
	}
	if d.fsSync != nil {
		err = errors.Join(err, d.fsSync.h.Close())
	}
	return err
}

// syncFS makes everything on the directory's filesystem durable, through the
// logs' shared syncfs when they use one (its error is theirs too).
func (d *LogDir) syncFS() error {
	if d.fsSync != nil {
		return d.fsSync.sync()
	}
	return d.fsys.(vfs.FSSyncer).SyncFS(d.dir)
}

// markShut marks the LogDir closing and reports whether it was already.
func (d *LogDir) markShut() (was bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was = d.mu.shut
	d.mu.shut = true
	return was
}

// anyClosing reports whether a log closed cleanly waits for Close's syncfs.
func (d *LogDir) anyClosing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.closing) > 0
}

// settleClosing records the recovery checkpoints of the logs waiting for
// Close's syncfs if it succeeded (synced), or drops their clean-shutdown
// markers if it did not: they recover at the next open.
func (d *LogDir) settleClosing(synced bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, rc := range d.mu.closing {
		if !synced {
			delete(d.mu.closed, name)
			continue
		}
		if old, ok := d.mu.entries[name]; !ok || old != rc {
			d.mu.entries[name] = rc
			d.mu.dirty = true
		}
	}
}

// cleanMarkers returns the clean-shutdown markers of the logs closed cleanly.
func (d *LogDir) cleanMarkers() map[string][]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	markers := make(map[string][]int64, len(d.mu.closed))
	for name, m := range d.mu.closed {
		markers[name] = []int64{m.LogEndOffset, m.ActiveBase, m.ActiveSize}
	}
	return markers
}

// lookup returns name's recovery checkpoint and clean-shutdown marker, each with
// nil or an error matching fs.ErrNotExist, and forgets the marker: it vouches for
// one open only. synced reports whether everything in the log's files is
// durable already: the first open after OpenLogDir's syncfs (later ones may
// find what this process wrote since).
func (d *LogDir) lookup(name string) (rc recoveryCheckpoint, rcErr error, m cleanShutdown, mErr error, synced bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	synced = d.synced && !d.mu.opened[name]
	d.mu.opened[name] = true
	rc, ok := d.mu.entries[name]
	if !ok {
		rcErr = errNoEntry
	}
	m, ok = d.mu.clean[name]
	if !ok {
		mErr = errNoEntry
	}
	delete(d.mu.clean, name)
	delete(d.mu.closed, name)
	delete(d.mu.closing, name)
	return rc, rcErr, m, mErr, synced
}

// setRecovery records name's recovery checkpoint; legacy marks a per-partition
// file to remove once the LogDir's file holds it. With durable, it returns once
// the checkpoint is on disk.
func (d *LogDir) setRecovery(name string, rc recoveryCheckpoint, legacy, durable bool) error {
	d.recordRecovery(name, rc, legacy)
	if !durable {
		return nil
	}
	return d.Checkpoint()
}

// recordRecovery records name's recovery checkpoint and, with legacy, that
// its per-partition file is to go once the LogDir's file holds it.
func (d *LogDir) recordRecovery(name string, rc recoveryCheckpoint, legacy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.mu.entries[name]; !ok || old != rc {
		d.mu.entries[name] = rc
		d.mu.dirty = true
	}
	if legacy {
		d.mu.legacy[name] = true
		d.mu.dirty = true
	}
}

// closedCleanly records name's clean-shutdown marker for LogDir.Close, and
// with rc (syncsAtClose) the recovery checkpoint that Close's syncfs makes
// true.
func (d *LogDir) closedCleanly(name string, m cleanShutdown, rc *recoveryCheckpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.closed[name] = m
	if rc != nil {
		d.mu.closing[name] = *rc
	}
}

// readLogDirEntry returns the recovery checkpoint the LogDir holding dir keeps
// for it, without opening that LogDir.
func readLogDirEntry(fsys vfs.FS, dir string) (recoveryCheckpoint, error) {
	b, err := readSideFile(fsys, filepath.Dir(dir), dirRecoveryName)
	if err != nil {
		return recoveryCheckpoint{}, err
	}
	entries, err := decodeDirEntries(b, 16)
	if err != nil {
		return recoveryCheckpoint{}, err
	}
	v, ok := entries[filepath.Base(dir)]
	if !ok {
		return recoveryCheckpoint{}, errNoEntry
	}
	return recoveryCheckpoint{RecoveryPoint: v[0], LogStartOffset: v[1]}, nil
}

// Payload of both LogDir files: count u32, then count x (name length u16 | name |
// width/8 x i64), sorted by name. The recovery checkpoint's values are recovery
// point | log start offset (width 16); the markers' are log end offset | active
// base offset | active .log size (width 24).
func encodeDirEntries(entries map[string][]int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(entries)))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		for _, v := range entries[name] {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

func decodeDirEntries(b []byte, width int) (map[string][]int64, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: log dir file of %d bytes", ErrCorruptSideFile, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	entries := make(map[string][]int64, min(n, 1<<16))
	for range n {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: log dir file cut short", ErrCorruptSideFile)
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l+width {
			return nil, fmt.Errorf("%w: log dir file cut short", ErrCorruptSideFile)
		}
		name := string(b[2 : 2+l])
		b = b[2+l:]
		vals := make([]int64, width/8)
		for i := range vals {
			vals[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
			if vals[i] < 0 {
				return nil, fmt.Errorf("%w: negative value for %s", ErrCorruptSideFile, name)
			}
		}
		b = b[width:]
		entries[name] = vals
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the entries", ErrCorruptSideFile, len(b))
	}
	return entries, nil
}
