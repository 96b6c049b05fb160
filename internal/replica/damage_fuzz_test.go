package replica

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

const damagedDir = "/data/t-0"

// damageBase is a cleanly closed transactional partition (snapshotWorkload
// on 4 KiB segments), built once per fuzzing process.
var damageBase struct {
	once   sync.Once
	fsys   *vfs.MemFS
	want   map[int64][]byte // the reference producer state, by log end offset
	bytes  []byte           // every batch of the log, in order
	active []byte           // the active segment's file
}

func buildDamageBase(t *testing.T) {
	defer func(v int64) { closeSnapshotMinBytes = v }(closeSnapshotMinBytes)
	closeSnapshotMinBytes = 0
	fsys := vfs.NewMem()
	p := openSnapshotPartition(t, fsys, damagedDir)
	damageBase.want = snapshotWorkload(t, p)
	damageBase.bytes = logBytes(t, p.log, p.log.LogEndOffset())
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(damagedDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	logs := slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".log") })
	if damageBase.active, err = vfs.ReadFile(fsys, path.Join(damagedDir, logs[len(logs)-1])); err != nil {
		t.Fatal(err)
	}
	damageBase.fsys = fsys
}

// restoreUncovered writes back, at every batch a segment held before damage,
// the two header fields its CRC does not cover: the base offset (a broker
// rewrites it without recomputing the CRC) and the partition leader epoch. A
// byte changed there leaves a valid batch that no check can tell from one
// written so (Kafka's format; a forward gap in offsets is legal after
// compaction), so it is outside what recovery can be asked to find.
func restoreUncovered(f vfs.File, size int64) error {
	orig := damageBase.active
	for pos := 0; pos+batch.LengthPrefix <= len(orig) && int64(pos) < size; {
		n, err := batch.FrameSize(orig[pos:])
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(orig[pos:pos+8], int64(pos)); err != nil {
			return err
		}
		if _, err := f.WriteAt(orig[pos+12:pos+16], int64(pos+12)); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// Damage operations a fuzz input applies to one file.
const (
	damageTruncate = iota
	damageOverwrite
	damageAppend
	damageOps
)

// FuzzReopenDamagedPartition damages one file of a transactional partition's
// directory (cuts it, overwrites some of its bytes, or appends garbage) as a
// crash or a failing disk could, and reopens the partition after an unclean
// stop. Whatever the file (the active segment, an index, a time index, an
// aborted-transaction index, a producer-state snapshot, a checkpoint), the
// partition must open, keep a prefix of the batches it had, rebuild the
// producer and transaction state of exactly that prefix, and take appends.
// Earlier segments' data is left alone: below the recovery point nothing is
// scanned again, as in Kafka.
func FuzzReopenDamagedPartition(f *testing.F) {
	f.Add(uint8(0), uint8(damageTruncate), uint32(10), []byte(nil))
	f.Add(uint8(1), uint8(damageOverwrite), uint32(3), []byte{0xff, 0x00, 0x13})
	f.Add(uint8(2), uint8(damageAppend), uint32(0), bytes.Repeat([]byte{0}, 64))
	f.Add(uint8(5), uint8(damageOverwrite), uint32(40), []byte("garbage"))
	f.Add(uint8(7), uint8(damageTruncate), uint32(0), []byte(nil))
	f.Fuzz(func(t *testing.T, file, op uint8, pos uint32, data []byte) {
		damageBase.once.Do(func() { buildDamageBase(t) })
		if damageBase.fsys == nil {
			t.Skip("the base partition failed to build")
		}
		fsys := damageBase.fsys.CrashClone()
		if err := fsys.Remove(path.Join(damagedDir, "clean-shutdown")); err != nil {
			t.Fatal(err)
		}
		damaged := damageFile(t, fsys, file, op%damageOps, pos, data)

		p := openSnapshotPartition(t, fsys, damagedDir)
		defer p.close()
		if got := logBytes(t, p.log, p.log.LogEndOffset()); !bytes.HasPrefix(damageBase.bytes, got) {
			t.Fatalf("damaged %s: the reopened log (%d bytes to offset %d) is not a prefix of the log written", damaged, len(got), p.log.LogEndOffset())
		}
		requireState(t, p, damageBase.want)
		if _, err := p.log.AppendValidated(txnBatch(t, 99, 0, 1, false), 1, storage.AppendHints{}); err != nil {
			t.Fatalf("damaged %s: append after reopening: %v", damaged, err)
		}
	})
}

// damageFile applies op to the file of the partition directory that file
// picks, and names it. Data of a segment other than the active one is not
// damaged: the active segment takes its place.
func damageFile(t *testing.T, fsys *vfs.MemFS, file, op uint8, pos uint32, data []byte) string {
	t.Helper()
	names, err := fsys.List(damagedDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	name := names[int(file)%len(names)]
	if strings.HasSuffix(name, ".log") {
		logs := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasSuffix(n, ".log") })
		name = logs[len(logs)-1]
	}
	f, err := fsys.OpenReadWrite(path.Join(damagedDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	at := int64(pos) % (size + 1)
	switch op {
	case damageTruncate:
		err = f.Truncate(at)
	case damageOverwrite:
		_, err = f.WriteAt(data, at)
		if err == nil && strings.HasSuffix(name, ".log") {
			err = restoreUncovered(f, size)
		}
	case damageAppend:
		_, err = f.WriteAt(data, size)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return name
}
