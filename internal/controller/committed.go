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
// between the image's offset and index is still to be applied. An entry gone
// from the log at or below the commit index was compacted into a snapshot the
// image was restored from (Raft restores before it compacts).
func (c *Controller) appliedThrough(index uint64) (bool, error) {
	applied := c.Image().Offset()
	if applied >= index {
		return true, nil
	}
	if c.raft.CommitIndex() < index {
		return false, nil
	}
	var l raft.Log
	for i := applied + 1; i <= index; i++ {
		switch err := c.store.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			continue
		case err != nil:
			return false, err
		}
		if l.Type == raft.LogCommand {
			return false, nil
		}
	}
	return true, nil
}
