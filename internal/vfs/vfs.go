// Package vfs is the one door through which Strata touches the disk.
//
// Every file the broker writes (segments, indexes, checkpoints, metadata) is opened
// through an FS, so tests can swap the operating system for an in-memory filesystem
// that forgets unsynced data on a simulated power cut, or for one that injects write,
// sync and disk-full errors.
//
// Durability contract, the same for every implementation:
//  1. File.Write / File.WriteAt put bytes in a volatile cache.
//  2. File.Sync makes the file's contents and size durable.
//  3. A created, removed or renamed name is durable only after SyncDir on its parent
//     directory. A file whose creation was never made durable by SyncDir vanishes on a
//     power cut even if the file itself was synced.
//
// Implementations:
//   - Default: the operating system.
//   - NewMem: an in-memory FS that tracks volatile and durable state separately and
//     can be crashed (CrashClone, PowerCut), optionally tearing unsynced writes.
//   - NewErrorFS: wraps any FS and fails the operations an Injector picks (Rule for
//     the Nth write, a sync, reads on a path glob; DiskFull for ENOSPC).
//
// Optional capabilities, found by type assertion: FSSyncer (syncfs), FSSyncOpener
// (syncfs through a handle held open) and Linker (hard links; each of them the
// operating system's on Linux, MemFS's, and an ErrorFS's over either);
// on files, OSFile and CacheDropper (the operating system's, on Linux).
//
// OwnFilesystem reads the operating system's mount table (Linux) to tell whether
// a directory is on a filesystem mounted for it alone, so that a syncfs there
// writes nobody else's data.
//
// Errors follow the os package: a missing name satisfies errors.Is(err,
// fs.ErrNotExist), ReadAt past the end returns io.EOF, and an operation on a closed
// file satisfies errors.Is(err, fs.ErrClosed).
//
// Concurrency: FS methods are safe for concurrent use by any implementation.
package vfs

import (
	"fmt"
	"io"
	"os"
)

// File is an open file. Implementations are safe for concurrent ReadAt calls;
// writes to one file are serialised by its single owner.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's data and size durable.
	Sync() error
	// Truncate changes the file size; like a write it is volatile until Sync.
	Truncate(size int64) error
	// Size returns the current (possibly unsynced) size.
	Size() (int64, error)
	// Name returns the path the file was opened with.
	Name() string
}

// OSFile is implemented by files backed by a real operating-system file, so the
// network layer can send their bytes with sendfile(2).
type OSFile interface {
	OSFile() *os.File
}

// CacheDropper is implemented by files whose cached pages can be dropped from the
// operating system's page cache (Linux: posix_fadvise POSIX_FADV_DONTNEED). It is
// a hint about memory, not a change to the file: reads still return the bytes
// (from the disk). Only pages already written back are dropped: the caller drops
// ranges a Sync covered, or the kernel starts writing dirty pages back.
type CacheDropper interface {
	// DropCache drops the cached pages wholly inside [off, off+n).
	DropCache(off, n int64) error
}

// WriteBacker is implemented by files whose dirty pages in a range can be
// written to the disk ahead of a Sync (Linux: sync_file_range(2)). It makes
// nothing durable (no metadata, no flush of the disk's cache): it keeps dirty
// pages from piling up for the next Sync of the file, which would write them
// all while its caller waits.
type WriteBacker interface {
	// WriteBack writes the dirty pages of [off, off+n) and waits for them.
	WriteBack(off, n int64) error
}

// FSSyncer is implemented by an FS that can make everything written to the
// filesystem holding dir durable in one call (Linux syncfs(2)): every file's
// data and every directory's entries, whoever wrote them. A wrapper whose inner
// FS cannot returns an error matching errors.ErrUnsupported.
type FSSyncer interface {
	SyncFS(dir string) error
}

// FSSyncOpener is implemented by an FSSyncer that can hold the filesystem
// holding dir open for repeated syncs. On Linux a handle reports every
// write-back error on the filesystem from its opening on (the kernel's
// per-descriptor error sequence), where a SyncFS call opens afresh and misses
// an error another descriptor saw first.
type FSSyncOpener interface {
	OpenFSSync(dir string) (FSSyncHandle, error)
}

// FSSyncHandle is an open filesystem (FSSyncOpener).
type FSSyncHandle interface {
	// SyncFS makes everything written to the filesystem durable, as
	// FSSyncer's SyncFS does.
	SyncFS() error
	Close() error
}

// SpaceReporter is implemented by an FS that can tell the size of the volume
// holding dir and how many of its bytes an unprivileged writer may still use
// (Linux: statfs(2)'s f_blocks and f_bavail, in fragments), as Kafka's
// DescribeLogDirs reports them.
type SpaceReporter interface {
	Space(dir string) (total, usable int64, err error)
}

// Linker is implemented by an FS that can give a file a second name on the same
// filesystem (a hard link): both names then refer to one file, so a write or
// truncation through either changes what both read. A caller that links a file
// must keep it from being changed in place afterwards (the storage package copies
// a linked segment before it truncates it: Links tells it so).
type Linker interface {
	// LinkFile gives the open file f, opened through this FS, the name newname,
	// which must not exist. Like a created name, it is durable only after SyncDir
	// of its directory. It fails when f is not this FS's (a wrapper's file is
	// unwrapped first), when newname is on another filesystem, or when f has no
	// name left (it was removed); the caller then copies.
	LinkFile(f File, newname string) error
	// Links returns how many names the file at name has.
	Links(name string) (int, error)
}

// FS is a filesystem.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file, or creates it, for reading and writing
	// without truncating it. Writes through Write append at the current position,
	// which starts at 0; use WriteAt or Seek-free appends via Size.
	OpenReadWrite(name string) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes a path and everything below it.
	RemoveAll(name string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes a path.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, removals and renames in dir durable.
	SyncDir(dir string) error
}

// ReadFile reads the whole of the file at name, as os.ReadFile does.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}
