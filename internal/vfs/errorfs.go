package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// ErrInjected is the error a Rule fails operations with unless told otherwise.
var ErrInjected = errors.New("vfs: injected error")

// OpKind is a set of operation kinds, one bit each, for matching operations.
type OpKind uint32

// The operation kinds an ErrorFS reports. OpenReadWrite counts as OpOpen, RemoveAll
// as OpRemove, ReadAt as OpRead and WriteAt as OpWrite.
const (
	OpCreate OpKind = 1 << iota
	OpOpen
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSize
	OpClose
	OpSyncFS
	OpLink

	// OpAll matches every kind.
	OpAll OpKind = 1<<iota - 1
)

var opKindNames = [...]string{
	"create", "open", "remove", "rename", "mkdir", "list", "stat", "syncdir",
	"read", "write", "sync", "truncate", "size", "close", "syncfs", "link",
}

func (k OpKind) String() string {
	var names []string
	for i, name := range opKindNames {
		if k&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Op describes one operation about to run through an ErrorFS.
type Op struct {
	Kind OpKind
	// Path is the name the operation is on (for a file operation, the name the file
	// was opened with; for Rename, the old name).
	Path string
	// To is the new name of a Rename, empty otherwise.
	To string
	// Len is the number of bytes a read or write asks for; 0 for other kinds.
	Len int
}

// Injector decides which operations fail. MaybeError is called before each
// operation, possibly from many goroutines at once: nil lets the operation run,
// an error fails it without reaching the inner FS (but see ShortWriteError).
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// Any returns an Injector that consults injs in order and returns the first error;
// later injectors do not see an operation an earlier one failed.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		for _, inj := range injs {
			if err := inj.MaybeError(op); err != nil {
				return err
			}
		}
		return nil
	})
}

// ShortWriteError, returned by an Injector for a write, makes the write store its
// first N bytes through the inner FS and then fail with the error, as a write
// that runs out of disk space does.
type ShortWriteError struct {
	N   int
	Err error
}

func (e *ShortWriteError) Error() string {
	return fmt.Sprintf("short write after %d bytes: %v", e.N, e.Err)
}

func (e *ShortWriteError) Unwrap() error { return e.Err }

// ErrorFS wraps an FS and fails the operations its Injector picks. Failed
// operations return an *fs.PathError whose Err is the injected error, so
// errors.Is(err, ErrInjected) or errors.Is(err, syscall.ENOSPC) work.
//
// Its files do not implement OSFile even when the inner files do, so that reads
// cannot bypass injection through sendfile.
type ErrorFS struct {
	inner FS
	inj   Injector
}

var _ FS = (*ErrorFS)(nil)

// NewErrorFS returns inner with errors injected by inj; a nil inj injects nothing.
func NewErrorFS(inner FS, inj Injector) *ErrorFS {
	return &ErrorFS{inner: inner, inj: inj}
}

func (e *ErrorFS) maybe(op Op) error {
	if e.inj == nil {
		return nil
	}
	if err := e.inj.MaybeError(op); err != nil {
		return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
	}
	return nil
}

func (e *ErrorFS) open(kind OpKind, name string, open func(string) (File, error)) (File, error) {
	if err := e.maybe(Op{Kind: kind, Path: name}); err != nil {
		return nil, err
	}
	f, err := open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{efs: e, inner: f}, nil
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) { return e.open(OpCreate, name, e.inner.Create) }

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) { return e.open(OpOpen, name, e.inner.Open) }

// OpenReadWrite implements FS.
func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	return e.open(OpOpen, name, e.inner.OpenReadWrite)
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.maybe(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

// RemoveAll implements FS.
func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.maybe(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.maybe(Op{Kind: OpRename, Path: oldname, To: newname}); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.maybe(Op{Kind: OpMkdir, Path: dir}); err != nil {
		return err
	}
	return e.inner.MkdirAll(dir, perm)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.maybe(Op{Kind: OpList, Path: dir}); err != nil {
		return nil, err
	}
	return e.inner.List(dir)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.maybe(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

// SyncFS implements FSSyncer when the inner FS does.
func (e *ErrorFS) SyncFS(dir string) error {
	s, ok := e.inner.(FSSyncer)
	if !ok {
		return fmt.Errorf("vfs: syncfs: %w", errors.ErrUnsupported)
	}
	if err := e.maybe(Op{Kind: OpSyncFS, Path: dir}); err != nil {
		return err
	}
	return s.SyncFS(dir)
}

// OpenFSSync implements FSSyncOpener when the inner FS does; each SyncFS of
// the handle is an OpSyncFS on dir, as SyncFS(dir) is.
func (e *ErrorFS) OpenFSSync(dir string) (FSSyncHandle, error) {
	o, ok := e.inner.(FSSyncOpener)
	if !ok {
		return nil, fmt.Errorf("vfs: syncfs: %w", errors.ErrUnsupported)
	}
	h, err := o.OpenFSSync(dir)
	if err != nil {
		return nil, err
	}
	return errorFSSync{e: e, dir: dir, h: h}, nil
}

type errorFSSync struct {
	e   *ErrorFS
	dir string
	h   FSSyncHandle
}

func (s errorFSSync) SyncFS() error {
	if err := s.e.maybe(Op{Kind: OpSyncFS, Path: s.dir}); err != nil {
		return err
	}
	return s.h.SyncFS()
}

func (s errorFSSync) Close() error { return s.h.Close() }

// Space implements SpaceReporter when the inner FS does (an OpStat on dir).
func (e *ErrorFS) Space(dir string) (total, usable int64, err error) {
	r, ok := e.inner.(SpaceReporter)
	if !ok {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: errors.ErrUnsupported}
	}
	if err := e.maybe(Op{Kind: OpStat, Path: dir}); err != nil {
		return 0, 0, err
	}
	return r.Space(dir)
}

// LinkFile implements Linker when the inner FS does; f may be one of this
// ErrorFS's files or the inner FS's. Op.Path is f's name, Op.To the new one.
func (e *ErrorFS) LinkFile(f File, newname string) error {
	l, ok := e.inner.(Linker)
	if !ok {
		return &os.LinkError{Op: "link", Old: f.Name(), New: newname, Err: errors.ErrUnsupported}
	}
	if ef, ok := f.(*errorFile); ok {
		f = ef.inner
	}
	if err := e.maybe(Op{Kind: OpLink, Path: f.Name(), To: newname}); err != nil {
		return err
	}
	return l.LinkFile(f, newname)
}

// Links implements Linker when the inner FS does (an OpStat).
func (e *ErrorFS) Links(name string) (int, error) {
	l, ok := e.inner.(Linker)
	if !ok {
		return 0, &os.PathError{Op: "stat", Path: name, Err: errors.ErrUnsupported}
	}
	if err := e.maybe(Op{Kind: OpStat, Path: name}); err != nil {
		return 0, err
	}
	return l.Links(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.maybe(Op{Kind: OpSyncDir, Path: dir}); err != nil {
		return err
	}
	return e.inner.SyncDir(dir)
}

// errorFile is a file opened through an ErrorFS.
type errorFile struct {
	efs   *ErrorFS
	inner File
}

func (f *errorFile) op(kind OpKind, n int) Op {
	return Op{Kind: kind, Path: f.inner.Name(), Len: n}
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.efs.maybe(f.op(OpRead, len(p))); err != nil {
		return 0, err
	}
	return f.inner.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.efs.maybe(f.op(OpRead, len(p))); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.efs.maybe(f.op(OpWrite, len(p))); err != nil {
		return shortWrite(p, err, f.inner.Write)
	}
	return f.inner.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.efs.maybe(f.op(OpWrite, len(p))); err != nil {
		return shortWrite(p, err, func(b []byte) (int, error) { return f.inner.WriteAt(b, off) })
	}
	return f.inner.WriteAt(p, off)
}

// shortWrite writes the part of p an injected ShortWriteError lets through, then
// reports the injected error.
func shortWrite(p []byte, injected error, write func([]byte) (int, error)) (int, error) {
	var sw *ShortWriteError
	if !errors.As(injected, &sw) || sw.N <= 0 {
		return 0, injected
	}
	n, err := write(p[:min(sw.N, len(p))])
	if err != nil {
		return n, err
	}
	return n, injected
}

func (f *errorFile) Sync() error {
	if err := f.efs.maybe(f.op(OpSync, 0)); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.efs.maybe(f.op(OpTruncate, 0)); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *errorFile) Size() (int64, error) {
	if err := f.efs.maybe(f.op(OpSize, 0)); err != nil {
		return 0, err
	}
	return f.inner.Size()
}

// Close always closes the inner file, so an injected close error leaks nothing.
func (f *errorFile) Close() error {
	injected := f.efs.maybe(f.op(OpClose, 0))
	if err := f.inner.Close(); err != nil {
		return err
	}
	return injected
}

func (f *errorFile) Name() string { return f.inner.Name() }

// Rule is an Injector that fails operations of some kinds, optionally only on
// paths matching a glob, only after letting some through, and only a number of
// times. Configure it with its chained methods before handing it to an ErrorFS;
// after that only Enable, Disable, Reset and Fired may be called, from any
// goroutine. For example, the third write to any .log file fails, once:
//
//	r := vfs.FailOn(vfs.OpWrite).Path("*.log").After(2).Times(1)
type Rule struct {
	kinds   OpKind
	glob    string
	globErr error
	after   int64
	times   int64
	err     error

	disabled atomic.Bool
	seen     atomic.Int64 // matching operations met while enabled
	fired    atomic.Int64 // operations failed
}

// FailOn returns an enabled Rule failing every operation of the given kinds with
// ErrInjected.
func FailOn(kinds OpKind) *Rule { return &Rule{kinds: kinds, err: ErrInjected} }

// Path limits the rule to operations whose path matches glob (path.Match syntax).
// A glob without a slash is matched against the last element only, so "*.log"
// matches every log file; one with a slash is matched against the whole
// slash-separated path as given. A Rename matches if either name does. A malformed
// glob makes every operation of the rule's kinds fail with path.ErrBadPattern.
func (r *Rule) Path(glob string) *Rule {
	r.glob = glob
	_, r.globErr = path.Match(glob, "")
	return r
}

// After lets the first n matching operations through.
func (r *Rule) After(n int) *Rule { r.after = int64(n); return r }

// Times stops failing after n failures; 0, the default, means no limit.
func (r *Rule) Times(n int) *Rule { r.times = int64(n); return r }

// WithError sets the error to fail with, such as syscall.EIO or syscall.ENOSPC.
func (r *Rule) WithError(err error) *Rule { r.err = err; return r }

// Enable switches the rule on; rules start enabled.
func (r *Rule) Enable() { r.disabled.Store(false) }

// Disable switches the rule off; operations met while off are not counted.
func (r *Rule) Disable() { r.disabled.Store(true) }

// Reset forgets the operations counted so far, so After and Times start over.
func (r *Rule) Reset() {
	r.seen.Store(0)
	r.fired.Store(0)
}

// Fired returns the number of operations the rule has failed since the last Reset.
func (r *Rule) Fired() int64 { return r.fired.Load() }

// MaybeError implements Injector.
func (r *Rule) MaybeError(op Op) error {
	if r.disabled.Load() || op.Kind&r.kinds == 0 {
		return nil
	}
	if r.globErr != nil {
		return fmt.Errorf("vfs: rule glob %q: %w", r.glob, r.globErr)
	}
	if !r.matchPath(op.Path) && (op.To == "" || !r.matchPath(op.To)) {
		return nil
	}
	n := r.seen.Add(1)
	if n <= r.after || (r.times > 0 && n > r.after+r.times) {
		return nil
	}
	r.fired.Add(1)
	return r.err
}

func (r *Rule) matchPath(name string) bool {
	if r.glob == "" {
		return true
	}
	name = filepath.ToSlash(name)
	if !strings.Contains(r.glob, "/") {
		name = path.Base(name)
	}
	ok, _ := path.Match(r.glob, name)
	return ok
}

// DiskFull is an Injector modelling a disk with a byte budget: writes succeed
// until the budget is spent; the write that would overrun it stores what fits and
// fails with syscall.ENOSPC, as does every write after it. Only writes consume
// the budget. Its methods are safe for concurrent use.
type DiskFull struct {
	disabled atomic.Bool
	free     atomic.Int64
}

// NewDiskFull returns an enabled DiskFull that lets free more bytes be written.
func NewDiskFull(free int64) *DiskFull {
	d := &DiskFull{}
	d.free.Store(free)
	return d
}

// SetFree sets the number of bytes that may still be written, as if space were
// freed or taken.
func (d *DiskFull) SetFree(n int64) { d.free.Store(n) }

// Free returns the number of bytes that may still be written.
func (d *DiskFull) Free() int64 { return d.free.Load() }

// Enable switches the budget on; it starts enabled.
func (d *DiskFull) Enable() { d.disabled.Store(false) }

// Disable switches the budget off: writes neither fail nor consume it.
func (d *DiskFull) Disable() { d.disabled.Store(true) }

// MaybeError implements Injector.
func (d *DiskFull) MaybeError(op Op) error {
	if op.Kind != OpWrite || d.disabled.Load() {
		return nil
	}
	want := int64(op.Len)
	for {
		free := d.free.Load()
		if want <= free {
			if d.free.CompareAndSwap(free, free-want) {
				return nil
			}
			continue
		}
		if d.free.CompareAndSwap(free, 0) {
			return &ShortWriteError{N: int(max(free, 0)), Err: syscall.ENOSPC}
		}
	}
}
