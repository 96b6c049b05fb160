package replica

// Removing a replica's files.
//
// A partition this broker no longer hosts (moved away, or its topic deleted)
// leaves the metadata path at once: removeLog renames its directory to
// <topic>-<partition>.<unique>.delete and makes the rename durable, and a
// background deleter owned by the Manager frees the files a step at a time.
// Each step frees at most deleteStep bytes (cutting a large file from its end,
// removing small files whole), makes that durable (an fsync of the file cut or
// of the directory), then rests as long as the step took.
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
	defaultDeleteStep = 16 << 20
	// maxDeleteRest bounds the rest after one step.
	maxDeleteRest = 100 * time.Millisecond
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
		m.deletes.Lock()
		m.deletes.seq++
		seq := m.deletes.seq
		m.deletes.Unlock()
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
	m.deletes.Lock()
	m.deletes.queue = append(m.deletes.queue, dir)
	start := !m.deletes.running
	m.deletes.running = true
	m.deletes.Unlock()
	if start && !m.goOwned(m.runDeletions) {
		m.deletes.Lock()
		m.deletes.running = false
		m.deletes.Unlock()
	}
}

// runDeletions deletes the queued directories one after another until the
// queue is empty or ctx ends.
func (m *Manager) runDeletions(ctx context.Context) {
	for {
		m.deletes.Lock()
		if len(m.deletes.queue) == 0 || ctx.Err() != nil {
			m.deletes.running = false
			m.deletes.Unlock()
			return
		}
		dir := m.deletes.queue[0]
		m.deletes.queue = m.deletes.queue[1:]
		m.deletes.Unlock()
		d := stepDeleter{m: m, ctx: ctx}
		err := d.removeTree(dir)
		if err == nil {
			err = m.fs.SyncDir(m.dir)
		}
		if err != nil && ctx.Err() == nil {
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
	if size := info.Size(); d.freed+size > d.m.deleteStep {
		if err := d.cut(path, size); err != nil {
			return err
		}
	} else {
		d.freed += size
	}
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

// durable runs sync (which makes what was freed durable), then rests as long
// as it took (at most maxDeleteRest), so that the fsyncs of other files are
// not queued behind one deletion step after another.
func (d *stepDeleter) durable(sync func() error) error {
	if err := d.ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	if err := sync(); err != nil {
		return err
	}
	d.freed = 0
	rest := time.NewTimer(min(time.Since(start), maxDeleteRest))
	defer rest.Stop()
	select {
	case <-rest.C:
		return nil
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
}
