package replica

// Removing a replica's files.
//
// A partition this broker no longer hosts (moved away, or its topic deleted)
// leaves the metadata path at once: removeLog renames its directory to
// <topic>-<partition>.<unique>.delete and makes the rename durable, and a
// background deleter owned by the Manager frees the files a step at a time.
// Each step frees at most deleteStep bytes (cutting a large file from its end,
// removing small files whole) and makes that durable (an fsync of the file cut
// or of the directory), then rests deleteInterval per deleteStep freed, so a
// deletion frees at most deleteStep/deleteInterval bytes a second (64 MiB/s:
// a 1 GiB replica in 16 s, a 1 MiB one in 16 ms).
//
// Why steps: freeing a large file in one go frees all its blocks in one
// filesystem transaction. On ext4 mounted with `discard` (usual on cloud and
// virtual disks) the commit of that transaction TRIMs every freed block, and
// each fsync on the filesystem waits for that commit: the removal of a 1 GiB
// replica after a move held the other replicas' acks=all writes, which wait
// for the leader's and the followers' fsyncs, for about half a second
// (docs/cluster.md, "Removing a replica's files"). In steps, an fsync waits at
// most for one step's commit.
//
// Why paced by time: the TRIMs of a step reach the disk after the step's own
// fsync has returned (which took 0-8 ms on the test machine). Steps paced by
// their fsyncs' time ran back to back: a 256-512 MiB replica was freed in
// 0.5-1 s, the disk spent most of that time on 450-700 MB/s of TRIMs, and an
// acks=all producer's p99 per 100 ms rose from 15-20 ms to 65-85 ms for as
// long (docs/benchmarks.md, "Session 8"): at 1 GiB about two seconds, far
// more than the 1% of a 21 s run that sets its p99. Paced by bytes over
// time, the disk spends a few milliseconds of every 125 on them.
//
// A directory left by a crash or a shutdown mid-deletion (the Manager's
// context ends between steps) is found and deleted by the next NewManager.
// Live partition directories end in "-<partition>", so a ".delete" name never
// clashes with one.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

const (
	// deleteSuffix ends the name of a directory being deleted.
	deleteSuffix = ".delete"
	// defaultDeleteStep is the bytes freed per durable step of a deletion.
	defaultDeleteStep = 8 << 20
	// defaultDeleteInterval is the rest after freeing defaultDeleteStep.
	defaultDeleteInterval = 125 * time.Millisecond
)

// removeLog takes a closed partition's log directory out of the way durably,
// forgets its checkpoint and queues its files for deletion in the background.
func (m *Manager) removeLog(topic string, index int32) error {
	name := partitionName(topic, index)
	doomed, err := m.deletionName(name)
	if err != nil {
		return err
	}
	if err := m.fs.Rename(filepath.Join(m.dir, name), doomed); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		doomed = "" // never created: nothing to delete
	}
	m.logDir.Remove(name)
	if err := m.fs.SyncDir(m.dir); err != nil {
		return err
	}
	if doomed != "" {
		m.queueDeletion(doomed)
	}
	return nil
}

// deletionName returns a path for name's directory to be renamed to, unused
// so far: a partition can be removed again while its last removal is still
// being deleted.
func (m *Manager) deletionName(name string) (string, error) {
	for range 100 {
		seq := m.deleteSeq.Add(1)
		path := filepath.Join(m.dir, fmt.Sprintf("%s.%x%s", name, seq, deleteSuffix))
		if _, err := m.fs.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return path, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("replica: no free name to delete %s under", name)
}

// queueLeftoverDeletions queues the directories a previous run left being
// deleted.
func (m *Manager) queueLeftoverDeletions() error {
	names, err := m.fs.List(m.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, deleteSuffix) {
			m.queueDeletion(filepath.Join(m.dir, name))
		}
	}
	return nil
}

// queueDeletion adds dir to the deleter's queue and starts the deleter if it
// is not running. After Close nothing starts: the next NewManager finds dir.
func (m *Manager) queueDeletion(dir string) {
	if m.deletes.push(dir) && !m.goOwned(m.runDeletions) {
		m.deletes.abandon()
	}
}

// runDeletions deletes the queued directories one after another until the
// queue is empty or ctx ends.
func (m *Manager) runDeletions(ctx context.Context) {
	for {
		next := m.deletes.take(1, ctx.Err() != nil)
		if next == nil {
			return
		}
		dir := next[0]
		d := stepDeleter{m: m, ctx: ctx}
		start := time.Now()
		err := d.removeTree(dir)
		if err == nil {
			err = m.fs.SyncDir(m.dir)
		}
		switch {
		case err == nil:
			m.log.Info("removed partition's files deleted", "dir", filepath.Base(dir), "bytes", d.bytes, "steps", d.steps, "took", time.Since(start).Round(time.Millisecond))
		case ctx.Err() == nil:
			m.log.Warn("deleting a removed partition's files failed: the next start retries", "dir", dir, "err", err)
		}
	}
}

// stepDeleter frees files at most Manager.deleteStep bytes between two
// durable points.
type stepDeleter struct {
	m     *Manager
	ctx   context.Context
	freed int64 // bytes freed since the last durable point
	steps int   // durable points so far
	bytes int64 // bytes freed so far
}

// removeTree deletes path and everything below it.
func (d *stepDeleter) removeTree(path string) error {
	info, err := d.m.fs.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		names, err := d.m.fs.List(path)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := d.removeTree(filepath.Join(path, name)); err != nil {
				return err
			}
		}
		if d.freed > 0 {
			// What this directory's files freed is made durable before the
			// directory goes.
			if err := d.durable(func() error { return d.m.fs.SyncDir(path) }); err != nil {
				return err
			}
		}
		return d.m.fs.Remove(path)
	}
	size := info.Size()
	if d.freed+size > d.m.deleteStep {
		if err := d.cut(path, size); err != nil {
			return err
		}
	} else {
		d.freed += size
	}
	d.bytes += size
	if err := d.m.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if d.freed >= d.m.deleteStep {
		return d.durable(func() error { return d.m.fs.SyncDir(filepath.Dir(path)) })
	}
	return nil
}

// cut truncates the file at path from its end until it is empty, making each
// step durable.
func (d *stepDeleter) cut(path string, size int64) error {
	f, err := d.m.fs.OpenReadWrite(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for size > 0 {
		n := min(size, d.m.deleteStep-d.freed)
		size -= n
		if err := f.Truncate(size); err != nil {
			return err
		}
		d.freed += n
		if d.freed >= d.m.deleteStep {
			if err := d.durable(f.Sync); err != nil {
				return err
			}
		}
	}
	return nil
}

// durable runs sync (which makes what was freed durable), then rests before
// the deletion frees more: Manager.deleteInterval for a whole step, in
// proportion for less (a small partition's last files), or as long as the
// sync took if that was longer.
func (d *stepDeleter) durable(sync func() error) error {
	if err := d.ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	if err := sync(); err != nil {
		return err
	}
	paced := time.Duration(float64(d.m.deleteInterval) * float64(d.freed) / float64(d.m.deleteStep))
	d.freed = 0
	d.steps++
	rest := time.NewTimer(max(time.Since(start), paced))
	defer rest.Stop()
	select {
	case <-rest.C:
		return nil
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
}
