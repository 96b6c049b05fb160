package controller

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// Kafka's controllers snapshot their metadata log on two bounds, kept here
// with Kafka's names and defaults: metadata.log.max.record.bytes.between.snapshots
// (Config.SnapshotMaxBytes: that many bytes of records applied since the last
// snapshot) and metadata.log.max.snapshot.interval.ms (Config.SnapshotMaxInterval:
// that long since the last snapshot with any record applied after it). Every
// node snapshots its own log, as in Kafka. hashicorp/raft's own check
// (SnapshotThreshold entries, looked at every SnapshotInterval) stays as well.

// snapshotOnBounds asks Raft for a snapshot whenever one of the two bounds is
// passed, until the controller closes.
func (c *Controller) snapshotOnBounds() {
	defer c.wg.Done()
	timer := time.NewTimer(c.nextSnapshotCheck())
	defer timer.Stop()
	for {
		select {
		case <-c.fsm.bytesBound:
		case <-timer.C:
		case <-c.done:
			return
		}
		if c.fsm.snapshotDue(c.cfg.SnapshotMaxInterval, time.Now()) {
			err := c.raft.Snapshot().Error()
			if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				c.log.Warn("metadata snapshot failed", "err", err)
			}
		}
		timer.Reset(c.nextSnapshotCheck())
	}
}

// nextSnapshotCheck is how long until the time bound may be passed: the rest
// of the interval since the last snapshot, or the whole interval when that
// has passed already (nothing new was applied since).
func (c *Controller) nextSnapshotCheck() time.Duration {
	interval := c.cfg.SnapshotMaxInterval
	if interval <= 0 {
		return time.Duration(1<<63 - 1)
	}
	if rest := interval - time.Since(c.fsm.lastSnapshot()); rest > 0 {
		return rest
	}
	return interval
}
