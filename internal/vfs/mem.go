package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrCrashed is returned by every operation on a MemFS file handle that was opened
// before a PowerCut: the process that owned it is, in the simulation, dead.
var ErrCrashed = errors.New("vfs: file handle opened before a power cut")

// maxMemFileSize bounds an in-memory file so that an absurd offset returns EFBIG
// instead of exhausting memory.
const maxMemFileSize = 1 << 32

// MemFS is an in-memory FS that models the durability contract of this package
// exactly. Next to what callers see, it keeps what a power cut would leave:
//
//	thing       volatile state (what reads see)   durable state (what survives)
//	---------   -------------------------------   ------------------------------------
//	file        current contents and size         contents as of the last File.Sync
//	directory   current entries                   entries as of the last SyncDir(dir)
//
// A file is an inode shared by every name and handle that refers to it: syncing a
// file makes its data durable wherever it is linked, but a name exists after a
// crash only if its directory was synced while the name was there. Directories
// made by MkdirAll are names like any other: sync their parent to keep them.
//
// Paths are slash-separated after filepath.ToSlash and cleaned; relative names are
// taken from the root, so "a/b" and "/a/b" are the same file. Opening a directory
// with Open fails with EISDIR (the operating system allows it; nothing here needs
// it).
//
// CrashClone and PowerCut produce the state a power cut would leave. With
// WithTornWrites they also keep a seeded random prefix of each file's unsynced
// writes, the way a disk may have written back part of the page cache.
//
// A file's changes since its last Sync are also kept as a log (to apply at Sync and
// to tear at a crash), so a file written for long without Sync holds its data twice.
//
// Concurrency: every method of MemFS and of its files is safe for concurrent use;
// one read-write lock guards the whole tree, so a crash is a consistent cut.
type MemFS struct {
	mu struct {
		sync.RWMutex
		root *memNode
		// gen is bumped by PowerCut; handles of an older generation fail.
		gen uint64
	}
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty in-memory filesystem holding only its root directory.
func NewMem() *MemFS {
	m := &MemFS{}
	m.mu.root = newMemDir()
	return m
}

// memNode is a file (inode) or a directory. All fields are guarded by MemFS.mu.
type memNode struct {
	dir     bool
	modTime time.Time

	// Directory entries: children is what List sees, durable what a crash keeps.
	children map[string]*memNode
	durable  map[string]*memNode

	// File contents. Applying pending in order to synced yields data.
	data    []byte
	synced  []byte
	pending []memOp
}

// memOp is one unsynced change to a file: a write of data at off, or, if
// truncate is set, a resize to off bytes.
type memOp struct {
	off      int64
	data     []byte
	truncate bool
}

func newMemDir() *memNode {
	return &memNode{dir: true, modTime: time.Now(), children: map[string]*memNode{}}
}

func newMemFile() *memNode { return &memNode{modTime: time.Now()} }

// apply returns b with the change made; b must be owned by the caller.
func (op memOp) apply(b []byte) []byte {
	if op.truncate {
		return resize(b, op.off)
	}
	return writeBytes(b, op.data, op.off)
}

// resize returns b with length n, zeroing any bytes it adds.
func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n]
	}
	old := len(b)
	b = slices.Grow(b, int(n)-old)[:n]
	clear(b[old:])
	return b
}

// writeBytes copies p into b at off, growing b (zero-filled) as needed; like
// pwrite(2), writing nothing never grows b.
func writeBytes(b, p []byte, off int64) []byte {
	if len(p) == 0 {
		return b
	}
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

func (n *memNode) writeAt(p []byte, off int64) error {
	if off < 0 {
		return syscall.EINVAL
	}
	if off+int64(len(p)) > maxMemFileSize {
		return syscall.EFBIG
	}
	if len(p) == 0 {
		return nil
	}
	n.data = writeBytes(n.data, p, off)
	n.modTime = time.Now()
	// Contiguous appends are merged: the torn-write prefixes they allow are the same.
	if k := len(n.pending); k > 0 {
		last := &n.pending[k-1]
		if !last.truncate && last.off+int64(len(last.data)) == off {
			last.data = append(last.data, p...)
			return nil
		}
	}
	n.pending = append(n.pending, memOp{off: off, data: bytes.Clone(p)})
	return nil
}

func (n *memNode) truncate(size int64) error {
	if size < 0 {
		return syscall.EINVAL
	}
	if size > maxMemFileSize {
		return syscall.EFBIG
	}
	n.data = resize(n.data, size)
	n.modTime = time.Now()
	n.pending = append(n.pending, memOp{off: size, truncate: true})
	return nil
}

func (n *memNode) sync() {
	for _, op := range n.pending {
		n.synced = op.apply(n.synced)
	}
	n.pending = nil
}

func (n *memNode) readAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	k := copy(p, n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// cleanPath returns name as an absolute, cleaned, slash-separated path.
func cleanPath(name string) string {
	return path.Clean("/" + filepath.ToSlash(name))
}

// splitPath returns the components of name below the root; none for the root.
func splitPath(name string) []string {
	p := cleanPath(name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func (m *MemFS) lookupLocked(op, name string) (*memNode, error) {
	if name == "" {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	n := m.mu.root
	for _, part := range splitPath(name) {
		if !n.dir {
			return nil, pathErr(op, name, syscall.ENOTDIR)
		}
		child, ok := n.children[part]
		if !ok {
			return nil, pathErr(op, name, syscall.ENOENT)
		}
		n = child
	}
	return n, nil
}

// parentLocked returns the directory holding name and name's last component.
func (m *MemFS) parentLocked(op, name string) (*memNode, string, error) {
	if name == "" {
		return nil, "", pathErr(op, name, syscall.ENOENT)
	}
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, syscall.EINVAL)
	}
	dir := m.mu.root
	for _, part := range parts[:len(parts)-1] {
		child, ok := dir.children[part]
		if !ok {
			return nil, "", pathErr(op, name, syscall.ENOENT)
		}
		if !child.dir {
			return nil, "", pathErr(op, name, syscall.ENOTDIR)
		}
		dir = child
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) openFile(name string, create, trunc, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n *memNode
	if create {
		dir, base, err := m.parentLocked("open", name)
		if err != nil {
			return nil, err
		}
		var ok bool
		if n, ok = dir.children[base]; !ok {
			n = newMemFile()
			dir.children[base] = n
		}
	} else {
		var err error
		if n, err = m.lookupLocked("open", name); err != nil {
			return nil, err
		}
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	if trunc {
		if err := n.truncate(0); err != nil {
			return nil, pathErr("open", name, err)
		}
	}
	return &memFile{mfs: m, node: n, name: name, gen: m.mu.gen, writable: writable}, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) { return m.openFile(name, true, true, true) }

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.openFile(name, false, false, false) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	return m.openFile(name, true, false, true)
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll implements FS. Like os.RemoveAll it succeeds if name does not exist.
func (m *MemFS) RemoveAll(name string) error {
	if name == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("RemoveAll", name)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	delete(dir.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	linkErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sdir, sbase, err := m.parentLocked("rename", oldname)
	if err != nil {
		return linkErr(errors.Unwrap(err))
	}
	n, ok := sdir.children[sbase]
	if !ok {
		return linkErr(syscall.ENOENT)
	}
	ddir, dbase, err := m.parentLocked("rename", newname)
	if err != nil {
		return linkErr(errors.Unwrap(err))
	}
	oldClean, newClean := cleanPath(oldname), cleanPath(newname)
	if oldClean == newClean {
		return nil
	}
	if n.dir && strings.HasPrefix(newClean, oldClean+"/") {
		return linkErr(syscall.EINVAL)
	}
	if target, ok := ddir.children[dbase]; ok {
		switch {
		case target == n:
			return nil
		case target.dir && !n.dir:
			return linkErr(syscall.EISDIR)
		case !target.dir && n.dir:
			return linkErr(syscall.ENOTDIR)
		case target.dir && len(target.children) > 0:
			return linkErr(syscall.ENOTEMPTY)
		}
	}
	delete(sdir.children, sbase)
	ddir.children[dbase] = n
	return nil
}

// MkdirAll implements FS; perm is ignored.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	if dir == "" {
		return pathErr("mkdir", dir, syscall.ENOENT)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.mu.root
	for _, part := range splitPath(dir) {
		child, ok := n.children[part]
		if !ok {
			child = newMemDir()
			n.children[part] = child
		} else if !child.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = child
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookupLocked("open", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(cleanPath(name)), size: int64(len(n.data)), dir: n.dir, modTime: n.modTime}, nil
}

// SyncDir implements FS: the directory's current entries become its durable ones.
// It does not make the directory itself durable; that takes a SyncDir of its parent.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("sync", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("sync", dir, syscall.ENOTDIR)
	}
	n.durable = maps.Clone(n.children)
	return nil
}

// SyncFS implements FSSyncer: every file's contents and every directory's
// entries become durable, as if each were synced.
func (m *MemFS) SyncFS(string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if !n.dir {
			n.sync()
			return
		}
		n.durable = maps.Clone(n.children)
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(m.mu.root)
	return nil
}

var _ FSSyncOpener = (*MemFS)(nil)

// OpenFSSync implements FSSyncOpener; dir must be a directory.
func (m *MemFS) OpenFSSync(dir string) (FSSyncHandle, error) {
	m.mu.Lock()
	n, err := m.lookupLocked("open", dir)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("open", dir, syscall.ENOTDIR)
	}
	return memFSSync{m}, nil
}

type memFSSync struct{ m *MemFS }

func (s memFSSync) SyncFS() error { return s.m.SyncFS("") }
func (memFSSync) Close() error    { return nil }

var _ Linker = (*MemFS)(nil)

// LinkFile implements Linker: newname becomes a second name of f's inode.
func (m *MemFS) LinkFile(f File, newname string) error {
	linkErr := func(err error) error {
		return &os.LinkError{Op: "link", Old: f.Name(), New: newname, Err: err}
	}
	mf, ok := f.(*memFile)
	if !ok || mf.mfs != m {
		return linkErr(syscall.EXDEV)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mf.gen != m.mu.gen {
		return linkErr(ErrCrashed)
	}
	if m.linksLocked(mf.node) == 0 {
		return linkErr(syscall.ENOENT) // as linkat of an unlinked file
	}
	dir, base, err := m.parentLocked("link", newname)
	if err != nil {
		return linkErr(errors.Unwrap(err))
	}
	if _, ok := dir.children[base]; ok {
		return linkErr(syscall.EEXIST)
	}
	dir.children[base] = mf.node
	return nil
}

// Links implements Linker by counting the names that refer to the inode.
func (m *MemFS) Links(name string) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookupLocked("stat", name)
	if err != nil {
		return 0, err
	}
	return m.linksLocked(n), nil
}

// linksLocked counts the directory entries that refer to n.
func (m *MemFS) linksLocked(n *memNode) int {
	count := 0
	var walk func(d *memNode)
	walk = func(d *memNode) {
		for _, c := range d.children {
			if c == n {
				count++
			}
			if c.dir {
				walk(c)
			}
		}
	}
	walk(m.mu.root)
	return count
}

// CrashOption changes what CrashClone and PowerCut keep.
type CrashOption func(*crashConfig)

type crashConfig struct {
	torn bool
	seed uint64
}

// WithTornWrites keeps, for each file, a random prefix of the writes and truncations
// made since its last Sync, the last one possibly cut short, chosen by a generator
// seeded with seed (the same seed and history give the same result). Without it
// only synced contents survive. Names still follow SyncDir strictly.
func WithTornWrites(seed uint64) CrashOption {
	return func(c *crashConfig) { c.torn, c.seed = true, seed }
}

// CrashClone returns a new MemFS holding only what a power cut at this instant would
// leave. The receiver is unchanged and stays usable.
func (m *MemFS) CrashClone(opts ...CrashOption) *MemFS {
	c := newCrasher(opts)
	m.mu.RLock()
	root := c.node(m.mu.root)
	m.mu.RUnlock()
	out := &MemFS{}
	out.mu.root = root
	return out
}

// PowerCut replaces the receiver's contents, in place, with what a power cut at this
// instant would leave. Files opened before it fail every later operation with
// ErrCrashed, except Close, which succeeds.
func (m *MemFS) PowerCut(opts ...CrashOption) {
	c := newCrasher(opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.root = c.node(m.mu.root)
	m.mu.gen++
}

// crasher builds the durable image of a tree.
type crasher struct {
	rng *rand.Rand // nil unless torn writes are on
	// done maps a node to its image, so a file linked twice stays one inode and a
	// directory reached twice (possible after unsynced cross-directory renames) is
	// kept only where it is met first.
	done map[*memNode]*memNode
}

func newCrasher(opts []CrashOption) *crasher {
	var cfg crashConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &crasher{done: map[*memNode]*memNode{}}
	if cfg.torn {
		c.rng = rand.New(rand.NewPCG(cfg.seed, 0))
	}
	return c
}

func (c *crasher) node(n *memNode) *memNode {
	if img, ok := c.done[n]; ok {
		return img
	}
	img := &memNode{dir: n.dir, modTime: n.modTime}
	c.done[n] = img
	if !n.dir {
		img.data = c.contents(n)
		img.synced = bytes.Clone(img.data)
		return img
	}
	img.children = make(map[string]*memNode, len(n.durable))
	// Sorted, so that a seed always tears the same files the same way.
	for _, name := range slices.Sorted(maps.Keys(n.durable)) {
		child := n.durable[name]
		if _, seen := c.done[child]; seen && child.dir {
			continue
		}
		img.children[name] = c.node(child)
	}
	img.durable = maps.Clone(img.children)
	return img
}

func (c *crasher) contents(n *memNode) []byte {
	b := bytes.Clone(n.synced)
	if c.rng == nil || len(n.pending) == 0 {
		return b
	}
	k := c.rng.IntN(len(n.pending) + 1)
	for _, op := range n.pending[:k] {
		b = op.apply(b)
	}
	if k < len(n.pending) && !n.pending[k].truncate {
		op := n.pending[k]
		op.data = op.data[:c.rng.IntN(len(op.data)+1)]
		b = op.apply(b)
	}
	return b
}

// memFile is an open MemFS file. Its mutable fields are guarded by mfs.mu.
type memFile struct {
	mfs      *MemFS
	node     *memNode
	name     string
	gen      uint64
	writable bool

	pos    int64
	closed bool
}

var _ File = (*memFile)(nil)

func (f *memFile) checkLocked(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.gen != f.mfs.mu.gen:
		return pathErr(op, f.name, ErrCrashed)
	case write && !f.writable:
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	n, err := f.node.readAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.mfs.mu.RLock()
	defer f.mfs.mu.RUnlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	n, err := f.node.readAt(p, off)
	if err != nil && err != io.EOF {
		return n, pathErr("readat", f.name, err)
	}
	return n, err
}

func (f *memFile) Write(p []byte) (int, error) {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if err := f.node.writeAt(p, f.pos); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if err := f.node.writeAt(p, off); err != nil {
		return 0, pathErr("writeat", f.name, err)
	}
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if err := f.node.truncate(size); err != nil {
		return pathErr("truncate", f.name, err)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if err := f.checkLocked("sync", false); err != nil {
		return err
	}
	f.node.sync()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.mfs.mu.RLock()
	defer f.mfs.mu.RUnlock()
	if err := f.checkLocked("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.mfs.mu.Lock()
	defer f.mfs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }

// memInfo is the os.FileInfo of a MemFS path.
type memInfo struct {
	name    string
	size    int64
	dir     bool
	modTime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
