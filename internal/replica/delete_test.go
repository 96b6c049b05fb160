package replica

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

const deleteTestDir = "/data/logs"

// hostingImage is broker 1 and 2's cluster with topic t's one partition on
// broker hostedOn, at metadata offset offset.
func hostingImage(t *testing.T, hostedOn int32, offset uint64) *metadata.Image {
	t.Helper()
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{hostedOn}, ISR: []int32{hostedOn}, Leader: hostedOn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img.WithOffset(offset)
}

// filledManager is broker 1's Manager on fsys hosting t-0 with about 1 MiB
// appended.
func filledManager(t *testing.T, fsys vfs.FS) *Manager {
	t.Helper()
	m, err := NewManager(fsys, deleteTestDir, 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Apply(hostingImage(t, 1, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(10, 1000)}))
	}
	return m
}

// treeBytes is the size of every file under the entries of dir whose name
// has prefix.
func treeBytes(t *testing.T, fsys vfs.FS, dir, prefix string) int64 {
	names, err := fsys.List(dir)
	if err != nil {
		t.Error(err)
		return 0
	}
	var n int64
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := fsys.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if info.IsDir() {
			n += treeBytes(t, fsys, path, "")
		} else {
			n += info.Size()
		}
	}
	return n
}

// moveAwayAndWaitDeleted moves t-0 from broker 1 (m) to broker 2 and waits
// until every file of it is gone from mem.
func moveAwayAndWaitDeleted(t *testing.T, m *Manager, mem vfs.FS) {
	t.Helper()
	if err := m.Apply(hostingImage(t, 2, 2)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "t-0's files deleted", func() bool {
		names, _ := mem.List(deleteTestDir)
		for _, name := range names {
			if strings.HasPrefix(name, "t-0") {
				return false
			}
		}
		return true
	})
}

// TestRemovedReplicaFreedInSteps: the files of a partition moved away are
// freed at most deleteStep bytes between two durable points (an fsync of a
// file or a directory). The old code removed the whole directory at once:
// on ext4 with `discard` the commit of that one transaction TRIMs every block
// and every other fsync on the disk waits for it (the stall of about half a
// second after a 1 GiB move).
func TestRemovedReplicaFreedInSteps(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	var durable []int64 // bytes left of t-0 at each durable point once it is removed
	var recording bool
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !recording && (op.Kind == vfs.OpRename && strings.HasPrefix(op.To, filepath.Join(deleteTestDir, "t-0.")) ||
			op.Kind == vfs.OpRemove && op.Path == filepath.Join(deleteTestDir, "t-0")):
			// The log is closed (and renamed for deletion, or removed in
			// place): what is left is what the deletion frees.
			recording = true
			durable = append(durable, treeBytes(t, mem, deleteTestDir, "t-0"))
		case op.Kind&(vfs.OpSync|vfs.OpSyncDir) != 0 && recording:
			durable = append(durable, treeBytes(t, mem, deleteTestDir, "t-0"))
		}
		return nil
	}))
	m := filledManager(t, fsys)
	const step = 64 << 10
	m.deleteStep, m.deleteInterval = step, time.Millisecond
	moveAwayAndWaitDeleted(t, m, mem)
	m.Close() // the deleter has ended: no more durable points
	mu.Lock()
	defer mu.Unlock()
	if len(durable) == 0 {
		t.Fatal("t-0 was never renamed for deletion")
	}
	full := durable[0]
	if full < 10*step {
		t.Fatalf("t-0 held %d bytes: too few to need steps of %d", full, step)
	}
	left, steps := full, 0
	for _, n := range durable[1:] {
		if left-n > step {
			t.Fatalf("%d bytes freed between two durable points (left %d -> %d), want at most %d", left-n, left, n, step)
		}
		if n < left {
			steps++
		}
		left = n
	}
	if left != 0 {
		t.Fatalf("%d bytes left at the last durable point", left)
	}
	if steps < int(full/step) {
		t.Fatalf("%d bytes freed in %d steps, want at least %d", full, steps, full/step)
	}
}

// TestRemovedReplicaDeletionPaced: after each durable point a deletion rests
// deleteInterval per deleteStep it freed before it frees more, so it frees
// at most deleteStep per deleteInterval however fast its fsyncs return. The
// code of session 7 rested only as long as the step's fsync took: on ext4
// with `discard` that is a millisecond or two (the TRIMs reach the disk
// after the fsync returns), so the steps ran back to back, a 256 MiB replica
// was freed in half a second, and the disk's time went to TRIMs while an
// acks=all producer's p99 rose fivefold.
func TestRemovedReplicaDeletionPaced(t *testing.T) {
	mem := vfs.NewMem()
	type point struct {
		at   time.Time
		left int64 // bytes of t-0 left
	}
	var mu sync.Mutex
	var points []point
	var recording bool
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !recording && op.Kind == vfs.OpRename && strings.HasPrefix(op.To, filepath.Join(deleteTestDir, "t-0.")):
			recording = true
			points = append(points, point{time.Now(), treeBytes(t, mem, deleteTestDir, "t-0")})
		case op.Kind&(vfs.OpSync|vfs.OpSyncDir) != 0 && recording:
			points = append(points, point{time.Now(), treeBytes(t, mem, deleteTestDir, "t-0")})
		}
		return nil
	}))
	m := filledManager(t, fsys)
	const step, interval = 128 << 10, 40 * time.Millisecond
	m.deleteStep, m.deleteInterval = step, interval
	moveAwayAndWaitDeleted(t, m, mem)
	m.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(points) < 2 || points[0].left < 4*step {
		t.Fatalf("durable points %v: too few, or too little to delete in steps of %d", points, step)
	}
	// Point i froze what was freed since point i-1; the deletion must rest
	// in proportion before point i+1.
	for i := 1; i+1 < len(points); i++ {
		freed := points[i-1].left - points[i].left
		rest := time.Duration(float64(interval) * float64(freed) / float64(step))
		if gap := points[i+1].at.Sub(points[i].at); gap < rest {
			t.Fatalf("durable point %d froze %d bytes freed, and the next came %v later, want at least %v", i, freed, gap, rest)
		}
	}
	if points[len(points)-1].left != 0 {
		t.Fatalf("%d bytes left at the last durable point", points[len(points)-1].left)
	}
}

// TestApplyReturnsWhileRemovedReplicaIsDeleted: a removed partition's files
// are deleted off the metadata path. The old code deleted them inside Apply,
// so every later metadata image waited for the whole deletion. The partition
// can come back while its old files are still being deleted, with an empty
// log.
func TestApplyReturnsWhileRemovedReplicaIsDeleted(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	mem := vfs.NewMem()
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		// The old t-0: renamed (t-0.<n>.delete), or removed in place.
		old := op.Path == filepath.Join(deleteTestDir, "t-0") || strings.Contains(op.Path, "/t-0.")
		if op.Kind&(vfs.OpRemove|vfs.OpTruncate) != 0 && old {
			<-gate
		}
		return nil
	}))
	m := filledManager(t, fsys)
	applied := make(chan error, 1)
	go func() { applied <- m.Apply(hostingImage(t, 2, 2)) }()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait.DefaultTimeout):
		t.Fatal("Apply waited for the removed partition's files to be deleted")
	}
	if err := m.Apply(hostingImage(t, 1, 3)); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if leo := p.log.LogEndOffset(); leo != 0 {
		t.Fatalf("t-0 back on the broker starts at log end offset %d, want 0 (a new log)", leo)
	}
	release()
	wait.For(t, "the old t-0 deleted", func() bool {
		names, _ := mem.List(deleteTestDir)
		for _, name := range names {
			if strings.HasSuffix(name, deleteSuffix) {
				return false
			}
		}
		return true
	})
	if _, err := mem.Stat(filepath.Join(deleteTestDir, "t-0")); err != nil {
		t.Fatalf("the new t-0: %v", err)
	}
}

// TestLeftoverDeletionFinishedAtStart: a directory whose deletion a crash or
// a shutdown interrupted is deleted by the next Manager; other directories
// stay.
func TestLeftoverDeletionFinishedAtStart(t *testing.T) {
	mem := vfs.NewMem()
	for _, path := range []string{"t-0.1f.delete/00000000000000000000.log", "u-0/00000000000000000000.log"} {
		path = filepath.Join(deleteTestDir, path)
		if err := mem.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := mem.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	m, err := NewManager(mem, deleteTestDir, 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	wait.For(t, "the leftover deletion finished", func() bool {
		_, err := mem.Stat(filepath.Join(deleteTestDir, "t-0.1f.delete"))
		return err != nil
	})
	if _, err := mem.Stat(filepath.Join(deleteTestDir, "u-0/00000000000000000000.log")); err != nil {
		t.Fatalf("a directory not being deleted was touched: %v", err)
	}
}
