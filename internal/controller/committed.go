package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Waiting for the metadata the active controller has committed.
//
// A broker that must act on metadata at least as new as some change another
// node made (a share partition initialised from its group's
// share.auto.offset.reset, set through another broker a moment before) asks the
// active controller for its high watermark (Quorum, over the link as
// DescribeQuorum) and waits here until its own image holds every entry up to
// it. An image's offset is the index of the last command entry it applied, so
// it may stay below a high watermark that ends in Raft's own entries (a new
// leader's no-op, a configuration change), which never reach the state
// machine: the entries between the two are read from the local log instead.

// committedPoll is how often WaitCommitted looks again: Raft signals neither
// its commit index nor the entries that never reach the state machine.
const committedPoll = 10 * time.Millisecond

// WaitCommitted returns once this node's image reflects every metadata entry
// at or below index, an offset the active controller has committed, or with
// ctx's error.
func (c *Controller) WaitCommitted(ctx context.Context, index uint64) error {
	t := time.NewTicker(committedPoll)
	defer t.Stop()
	for {
		ok, err := c.appliedThrough(index)
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller: waiting for metadata offset %d (applied %d): %w", index, c.Image().Offset(), ctx.Err())
		case <-c.done:
			return ErrClosed
		case <-t.C:
		}
	}
}

// appliedThrough reports whether the image holds every command entry at or
// below index: this node has seen index committed, and no command entry
// between the image's offset and index is still to be applied.
func (c *Controller) appliedThrough(index uint64) (bool, error) {
	applied, err := c.AppliedOffset()
	if applied >= index {
		return true, nil // an entry past index that could not be read is not waited for
	}
	return false, err
}

// AppliedOffset is how far this node has applied the metadata log: the
// image's offset and, past it, every committed entry up to the next command,
// because Raft's own entries (a leader's no-op, a barrier, a configuration
// change) never reach the image. A broker reports it in its heartbeats as its
// end of the log, which DescribeQuorum shows: Kafka's offsets count the log's
// control records too. An entry gone from the log at or below the commit
// index was compacted into a snapshot the image was restored from (Raft
// restores before it compacts). On an error reading the log, the offset is
// where the walk stopped.
func (c *Controller) AppliedOffset() (uint64, error) {
	applied := c.Image().Offset()
	commit := c.raft.CommitIndex()
	var l raft.Log
	for i := applied + 1; i <= commit; i++ {
		switch err := c.store.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			continue
		case err != nil:
			return i - 1, err
		}
		if l.Type == raft.LogCommand {
			return i - 1, nil
		}
	}
	return max(applied, commit), nil
}
