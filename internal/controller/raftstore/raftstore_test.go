package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/controller/boltstore"
	"github.com/strata-stream/strata/internal/vfs"
)

func entry(i uint64, size int) *raft.Log {
	return &raft.Log{Index: i, Term: i / 3, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)}
}

func storeRange(t *testing.T, w *WAL, lo, hi uint64, size int) {
	t.Helper()
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, entry(i, size))
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

// checkWAL requires entries lo..hi (each as entry(i, size)) and nothing else.
func checkWAL(t *testing.T, w *WAL, lo, hi uint64, size int) {
	t.Helper()
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	if first != lo || last != hi {
		t.Fatalf("indexes [%d, %d], want [%d, %d]", first, last, lo, hi)
	}
	for i := lo; i <= hi && lo != 0; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := entry(i, size)
		if l.Index != i || l.Term != want.Term || !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("entry %d = %+v", i, l)
		}
	}
	var l raft.Log
	if err := w.GetLog(hi+1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end: %v", err)
	}
}

func openWAL(t *testing.T, fsys vfs.FS) *WAL {
	t.Helper()
	w, err := OpenWAL(fsys, "/ctrl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestWALRoundTrip: entries, prefix and suffix deletions and stable values
// come back after a reopen.
func TestWALRoundTrip(t *testing.T) {
	mem := vfs.NewMem()
	w := openWAL(t, mem)
	checkWAL(t, w, 0, 0, 0)
	storeRange(t, w, 1, 10, 10)
	if err := w.DeleteRange(1, 3); err != nil { // compaction after a snapshot
		t.Fatal(err)
	}
	if err := w.DeleteRange(9, 10); err != nil { // a conflicting suffix
		t.Fatal(err)
	}
	storeRange(t, w, 9, 9, 10)
	if err := w.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("LastVoteCand"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w = openWAL(t, mem)
	checkWAL(t, w, 4, 9, 10)
	if v, err := w.GetUint64([]byte("CurrentTerm")); v != 7 || err != nil {
		t.Fatalf("CurrentTerm = %d, %v", v, err)
	}
	if v, _ := w.Get([]byte("LastVoteCand")); string(v) != "2" {
		t.Fatalf("LastVoteCand = %q", v)
	}
	if v, err := w.GetUint64([]byte("missing")); v != 0 || err != nil {
		t.Fatalf("missing key = %d, %v", v, err)
	}
	if err := w.DeleteRange(4, 9); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 0, 0, 0)
}

// TestWALPowerCut: everything a call stored survives a power cut at any
// moment after it returned, with unsynced bytes torn; the torn tail of a
// write in flight is cut and the WAL takes writes again.
func TestWALPowerCut(t *testing.T) {
	mem := vfs.NewMem()
	w := openWAL(t, mem)
	storeRange(t, w, 1, 20, 100)
	for seed := range uint64(5) {
		img := mem.CrashClone(vfs.WithTornWrites(seed))
		w2 := openWAL(t, img)
		checkWAL(t, w2, 1, 20, 100)
		storeRange(t, w2, 21, 21, 100)
		checkWAL(t, w2, 1, 21, 100)
	}
	// A torn record at the end (a write the power cut interrupted).
	f, err := mem.OpenReadWrite("/ctrl/raft.wal")
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	torn := appendRecord(nil, opEntry, make([]byte, 8), boltstore.EncodeLog(entry(21, 100)))
	if _, err := f.WriteAt(torn[:len(torn)/2], size); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	w.Close()
	w = openWAL(t, mem)
	checkWAL(t, w, 1, 20, 100)
	storeRange(t, w, 21, 22, 100)
	w.Close()
	checkWAL(t, openWAL(t, mem), 1, 22, 100)
}

// TestWALCompaction: once the file is twice its live contents (and past
// compactBytes) it is rewritten with only them, durably.
func TestWALCompaction(t *testing.T) {
	mem := vfs.NewMem()
	w := openWAL(t, mem)
	const size = 64 << 10
	for i := uint64(1); i <= 100; i += 10 {
		storeRange(t, w, i, i+9, size)
		if i > 30 {
			if err := w.DeleteRange(i-30, i-21); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := mem.Stat("/ctrl/raft.wal")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 2*compactBytes {
		t.Fatalf("WAL of %d bytes for %d live: never compacted", st.Size(), w.live)
	}
	checkWAL(t, w, 71, 100, size)
	checkWAL(t, openWAL(t, mem.CrashClone()), 71, 100, size)
}

// TestWALFailedSyncSticks: after a failed fsync the WAL refuses every write
// (what reached the disk is unknown), and the failed write is not visible.
func TestWALFailedSyncSticks(t *testing.T) {
	rule := vfs.FailOn(vfs.OpSync)
	rule.Disable()
	w := openWAL(t, vfs.NewErrorFS(vfs.NewMem(), rule))
	storeRange(t, w, 1, 2, 10)
	rule.Enable()
	if err := w.StoreLog(entry(3, 10)); err == nil {
		t.Fatal("StoreLog succeeded with fsync failing")
	}
	rule.Disable()
	if err := w.Set([]byte("k"), []byte("v")); err == nil {
		t.Fatal("a write after a failed fsync succeeded")
	}
	checkWAL(t, w, 1, 2, 10)
}

func writeSnapshot(t *testing.T, s *Snapshots, index uint64, state []byte) string {
	t.Helper()
	sink, err := s.Create(1, index, 1, raft.Configuration{Servers: []raft.Server{{ID: "1", Address: "a"}}}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(state); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readSnapshot(t *testing.T, s *Snapshots, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	meta, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, b
}

// TestSnapshots: create, list newest first, keep the newest two, survive a
// power cut once closed, vanish when cancelled, and refuse a corrupt state.
func TestSnapshots(t *testing.T) {
	mem := vfs.NewMem()
	s, err := OpenSnapshots(mem, "/ctrl", 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, index := range []uint64{10, 20, 30} {
		writeSnapshot(t, s, index, bytes.Repeat([]byte{byte(i)}, 1000))
	}
	sink, err := s.Create(1, 40, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("abandoned"))
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	// One a crash interrupts: gone at the next open.
	sink, err = s.Create(1, 50, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("interrupted"))
	img := mem.CrashClone(vfs.WithTornWrites(1))
	s2, err := OpenSnapshots(img, "/ctrl", 2)
	if err != nil {
		t.Fatal(err)
	}
	if names, _ := img.List("/ctrl/snapshots"); len(names) != 2 {
		t.Fatalf("after a crash and reopen: %v, want the newest two complete snapshots", names)
	}
	sink.Cancel()
	for _, store := range []*Snapshots{s, s2} {
		metas, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		var indexes []uint64
		for _, m := range metas {
			indexes = append(indexes, m.Index)
		}
		if !slices.Equal(indexes, []uint64{30, 20}) {
			t.Fatalf("snapshots %v, want [30 20]", indexes)
		}
		meta, state := readSnapshot(t, store, metas[0].ID)
		if meta.Size != 1000 || !bytes.Equal(state, bytes.Repeat([]byte{2}, 1000)) || len(meta.Configuration.Servers) != 1 {
			t.Fatalf("snapshot read back: %+v, %d bytes", meta, len(state))
		}
	}
	names, _ := mem.List("/ctrl/snapshots")
	if len(names) != 2 {
		t.Fatalf("snapshot directories %v, want the newest two", names)
	}
	metas, _ := s.List()
	f, _ := mem.OpenReadWrite(filepath.Join("/ctrl/snapshots", metas[0].ID, stateName))
	f.WriteAt([]byte{0xff}, 10)
	f.Close()
	if _, _, err := s.Open(metas[0].ID); err == nil {
		t.Fatal("a corrupt snapshot opened")
	}
}

// TestSnapshotsReadFileSnapshotStore: a data dir whose snapshots raft's
// FileSnapshotStore wrote (earlier versions) opens unchanged.
func TestSnapshotsReadFileSnapshotStore(t *testing.T) {
	dir := t.TempDir()
	old, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("a")
	defer trans.Close()
	sink, err := old.Create(1, 42, 3, raft.Configuration{Servers: []raft.Server{{ID: "1", Address: "a"}}}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("state of the metadata"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSnapshots(vfs.Default, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := s.List()
	if err != nil || len(metas) != 1 || metas[0].Index != 42 || metas[0].Term != 3 {
		t.Fatalf("List = %+v, %v", metas, err)
	}
	if _, state := readSnapshot(t, s, metas[0].ID); string(state) != "state of the metadata" {
		t.Fatalf("state %q", state)
	}
}

// TestMigrateBolt: a data dir with the bbolt store of earlier versions moves
// into the WAL once, and raft.db is kept aside.
func TestMigrateBolt(t *testing.T) {
	dir := t.TempDir()
	old, err := boltstore.Open(filepath.Join(dir, boltName))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(5); i <= 12; i++ {
		logs = append(logs, entry(i, 50))
	}
	if err := old.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	old.SetUint64([]byte("CurrentTerm"), 4)
	old.Close()

	w, err := OpenWAL(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := MigrateBolt(vfs.Default, dir, w); !ok || err != nil {
		t.Fatalf("MigrateBolt = %v, %v", ok, err)
	}
	checkWAL(t, w, 5, 12, 50)
	if v, _ := w.GetUint64([]byte("CurrentTerm")); v != 4 {
		t.Fatalf("CurrentTerm %d", v)
	}
	w.Close()
	if _, err := os.Stat(filepath.Join(dir, boltName+".migrated")); err != nil {
		t.Fatal(err)
	}
	w, err = OpenWAL(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ok, err := MigrateBolt(vfs.Default, dir, w); ok || err != nil {
		t.Fatalf("second MigrateBolt = %v, %v", ok, err)
	}
	checkWAL(t, w, 5, 12, 50)
}

// TestWALFormatVersion: a file without the format key (as every build before
// it wrote) opens and gains it, keeping its contents; a file of a newer format
// is refused, not read.
func TestWALFormatVersion(t *testing.T) {
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "/ctrl", 0o755); err != nil {
		t.Fatal(err)
	}
	var legacy []byte
	for i := uint64(1); i <= 3; i++ {
		legacy = appendRecord(legacy, opEntry, binary.BigEndian.AppendUint64(nil, i), boltstore.EncodeLog(entry(i, 8)))
	}
	legacy = appendRecord(legacy, opSet, binary.AppendUvarint(nil, uint64(len("CurrentTerm"))), []byte("CurrentTerm"), binary.BigEndian.AppendUint64(nil, 7))
	writeWALFile(t, mem, legacy)

	w := openWAL(t, mem)
	checkWAL(t, w, 1, 3, 8)
	if term, err := w.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm of the file without a format key: %d, %v", term, err)
	}
	w.Close()
	reopened := openWAL(t, mem.CrashClone())
	if v, _ := reopened.Get([]byte(formatKey)); !bytes.Equal(v, []byte{0, walFormat}) {
		t.Fatalf("format key after the first open: %x, want format %d", v, walFormat)
	}
	checkWAL(t, reopened, 1, 3, 8)
	reopened.Close()

	newer := appendRecord(slices.Clone(legacy), opSet, binary.AppendUvarint(nil, uint64(len(formatKey))), []byte(formatKey), []byte{0, walFormat + 1})
	writeWALFile(t, mem, newer)
	if w, err := OpenWAL(mem, "/ctrl"); !errors.Is(err, ErrUnsupportedFormat) {
		if err == nil {
			w.Close()
		}
		t.Fatalf("opening a WAL of format %d: %v, want ErrUnsupportedFormat", walFormat+1, err)
	}
}

// writeWALFile replaces /ctrl/raft.wal with b, durably.
func writeWALFile(t *testing.T, fsys vfs.FS, b []byte) {
	t.Helper()
	f, err := fsys.Create("/ctrl/raft.wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/ctrl"); err != nil {
		t.Fatal(err)
	}
}
