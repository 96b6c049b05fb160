package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// tmpMarker is part of the name of an object being written; List skips such
// names (a crash mid-Put can leave one behind; it never counts as an object).
const tmpMarker = ".tmp-"

// File is a Store in a directory of a vfs.FS: one file per object, the key's
// slashes as subdirectories.
type File struct {
	fsys vfs.FS
	root string
	seq  atomic.Uint64
}

// NewFile returns a Store rooted at dir (created durably if missing).
func NewFile(fsys vfs.FS, dir string) (*File, error) {
	if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return &File{fsys: fsys, root: filepath.Clean(dir)}, nil
}

func (f *File) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if strings.Contains(key, tmpMarker) {
		return "", fmt.Errorf("%w: %q holds %q", ErrInvalidKey, key, tmpMarker)
	}
	return filepath.Join(f.root, filepath.FromSlash(key)), nil
}

// unavailable wraps an I/O error as ErrUnavailable.
func unavailable(op, key string, err error) error {
	return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, op, key, err)
}

// Put writes the object to a temporary name, fsyncs it, renames it over key and
// fsyncs the directory, so a crash leaves the old object or the new one.
func (f *File) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return f.put(ctx, key, r, size, true)
}

// PutUnsynced is Put without its fsyncs: the object is written to a temporary
// name and renamed over key, and SyncNames makes its bytes and name durable.
// A crash before that may lose the object or leave it torn under its name
// (the caller names it nowhere durable until SyncNames returned).
func (f *File) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return f.put(ctx, key, r, size, false)
}

// SyncNames makes the objects PutUnsynced and LinkUnsynced put under keys
// durable, bytes and names. Where the vfs can, that is one syncfs(2) of the
// store's filesystem, whatever the number of objects: an fsync per object
// cost a journal commit each, and the tier puts one or two objects per
// segment. It also flushes whatever else is dirty on that filesystem (on the
// data dir's: the logs' unsynced tails, which group commit fsyncs within
// milliseconds anyway). Elsewhere each object is fsynced, then each directory
// that holds one, once.
func (f *File) SyncNames(ctx context.Context, keys ...string) error {
	paths := make([]string, 0, len(keys))
	for _, key := range keys {
		p, err := f.path(key)
		if err != nil {
			return err
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: sync %s: %v", ErrUnavailable, keys[0], err)
	}
	if s, ok := f.fsys.(vfs.FSSyncer); ok {
		err := s.SyncFS(f.root)
		if err == nil {
			return nil
		} else if !errors.Is(err, errors.ErrUnsupported) {
			return unavailable("sync", keys[0], err)
		}
	}
	synced := make(map[string]bool)
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: sync %s: %v", ErrUnavailable, keys[i], err)
		}
		if err := f.syncFile(p); err != nil {
			return unavailable("sync", keys[i], err)
		}
		if dir := filepath.Dir(p); !synced[dir] {
			if err := f.fsys.SyncDir(dir); err != nil {
				return unavailable("sync", keys[i], err)
			}
			synced[dir] = true
		}
	}
	return nil
}

// syncFile fsyncs the file at p.
func (f *File) syncFile(p string) error {
	r, err := f.fsys.Open(p)
	if err != nil {
		return err
	}
	err = r.Sync()
	return errors.Join(err, r.Close())
}

func (f *File) put(ctx context.Context, key string, r io.Reader, size int64, syncName bool) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: put %s: %v", ErrUnavailable, key, err)
	}
	dir := filepath.Dir(p)
	if err := vfs.MkdirAllDurable(f.fsys, dir, 0o755); err != nil {
		return unavailable("put", key, err)
	}
	tmp := p + tmpMarker + strconv.FormatUint(f.seq.Add(1), 10)
	w, err := f.fsys.Create(tmp)
	if err != nil {
		return unavailable("put", key, err)
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
			f.fsys.Remove(tmp)
		}
	}()
	n, err := copyObject(ctx, w, r, size)
	if err != nil {
		return unavailable("put", key, err)
	}
	if n != size {
		return unavailable("put", key, fmt.Errorf("reader gave %d of %d bytes", n, size))
	}
	if syncName { // else SyncNames syncs the bytes too
		if err := w.Sync(); err != nil {
			return unavailable("put", key, err)
		}
	}
	if err := w.Close(); err != nil {
		return unavailable("put", key, err)
	}
	if err := f.fsys.Rename(tmp, p); err != nil {
		return unavailable("put", key, err)
	}
	ok = true
	if !syncName {
		return nil
	}
	if err := f.fsys.SyncDir(dir); err != nil {
		return unavailable("put", key, err)
	}
	return nil
}

var _ FileLinker = (*File)(nil)

// LinkUnsynced links f as key, or, when key exists, under a temporary name
// renamed over it, so a crash leaves the old object or the new one; the
// directory fsync is left to SyncNames, and f's bytes are durable already (the
// FileLinker contract). Any failure to link (vfs.Linker missing, another filesystem, f removed) reports
// linked false: the caller copies.
func (f *File) LinkUnsynced(ctx context.Context, key string, src vfs.File) (bool, error) {
	p, err := f.path(key)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%w: link %s: %v", ErrUnavailable, key, err)
	}
	l, ok := f.fsys.(vfs.Linker)
	if !ok {
		return false, nil
	}
	dir := filepath.Dir(p)
	if err := vfs.MkdirAllDurable(f.fsys, dir, 0o755); err != nil {
		return false, unavailable("link", key, err)
	}
	// A new name appears whole (the bytes are there already): link it in
	// place. An object of that name (an earlier, uncommitted upload) is
	// replaced through a temporary name.
	err = l.LinkFile(src, p)
	if err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	tmp := p + tmpMarker + strconv.FormatUint(f.seq.Add(1), 10)
	if err := l.LinkFile(src, tmp); err != nil {
		return false, nil
	}
	if err := f.fsys.Rename(tmp, p); err != nil {
		f.fsys.Remove(tmp)
		return false, unavailable("link", key, err)
	}
	return true, nil
}

// Get reads a byte range of the object's file.
func (f *File) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: get %s: %v", ErrUnavailable, key, err)
	}
	r, err := f.fsys.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	} else if err != nil {
		return nil, unavailable("get", key, err)
	}
	defer r.Close()
	size, err := r.Size()
	if err != nil {
		return nil, unavailable("get", key, err)
	}
	if off < 0 || off > size || (off == size && n != 0 && size > 0) {
		return nil, fmt.Errorf("%w: %s: offset %d, size %d", ErrRange, key, off, size)
	}
	if n < 0 || off+n > size {
		n = size - off
	}
	b := make([]byte, n)
	if got, err := r.ReadAt(b, off); int64(got) != n {
		return nil, unavailable("get", key, fmt.Errorf("read %d of %d bytes: %v", got, n, err))
	}
	return b, nil
}

// Delete removes the object's file.
func (f *File) Delete(ctx context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: delete %s: %v", ErrUnavailable, key, err)
	}
	if err := f.fsys.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return unavailable("delete", key, err)
	}
	if err := f.fsys.SyncDir(filepath.Dir(p)); err != nil {
		return unavailable("delete", key, err)
	}
	return nil
}

// List walks the directory tree below the prefix's directory.
func (f *File) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := f.walk(ctx, "list", prefix, func(key, name string, _ fs.FileInfo) error {
		if !strings.Contains(name, tmpMarker) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return keys, nil
}

var _ IncompleteRemover = (*File)(nil)

// RemoveIncomplete removes the temporary files of Puts (and of LinkUnsynced
// replacing an object) under prefix last modified before before. A Put in
// progress writes its file as it goes, so its modification time stays recent;
// a link's temporary name carries the segment's own, older time, but lives
// only between the link and the rename that follows it, and removing it fails
// that rename (the caller retries). Removals are not fsynced: one a crash
// undoes is done again by the next call.
func (f *File) RemoveIncomplete(ctx context.Context, prefix string, before time.Time) (int, error) {
	kept := 0
	err := f.walk(ctx, "remove incomplete", prefix, func(key, name string, fi fs.FileInfo) error {
		if !strings.Contains(name, tmpMarker) {
			return nil
		}
		if !before.IsZero() && !fi.ModTime().Before(before) {
			kept++
			return nil
		}
		if err := f.fsys.Remove(filepath.Join(f.root, filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return kept, err
}

// walk calls fn for every file whose name, relative to the root, starts with
// prefix, temporary files included, with its key (its relative name), its
// base name and what Stat says of it. Errors are ErrUnavailable (op names the
// operation) or ErrInvalidKey for a prefix that names no valid directory.
func (f *File) walk(ctx context.Context, op, prefix string, fn func(key, name string, fi fs.FileInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, op, prefix, err)
	}
	// Start from the deepest directory the prefix names completely.
	start := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = prefix[:i]
	}
	var walkDir func(rel string) error
	walkDir = func(rel string) error {
		names, err := f.fsys.List(filepath.Join(f.root, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		for _, name := range names {
			key := name
			if rel != "" {
				key = rel + "/" + name
			}
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key+"/") {
				continue
			}
			fi, err := f.fsys.Stat(filepath.Join(f.root, filepath.FromSlash(key)))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			if fi.IsDir() {
				if err := walkDir(key); err != nil {
					return err
				}
			} else if strings.HasPrefix(key, prefix) {
				if err := fn(key, name, fi); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if start != "" && CheckKey(start) != nil {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	if err := walkDir(start); err != nil {
		return unavailable(op, prefix, err)
	}
	return nil
}
