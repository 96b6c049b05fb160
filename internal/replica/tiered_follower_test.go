package replica

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/remote"
)

// TestTieredFollowerRestoresProducerState: a follower that starts over at a
// tiered leader's local log start restores the producer state of the remote
// part from the object store (the snapshot uploaded with the segment that
// ends there), as Kafka's follower does (TierStateMachine's
// buildRemoteLogAuxState: the producer snapshot stored with the remote
// segment). When it then leads, an idempotent producer whose last batches lie
// below that start is still known: a gap in its sequence is refused and a
// retry of its last batch is answered with the original offsets, and one
// that moved to a newer epoch refuses its older epoch's batches. The old
// code started the follower with no producer state: the gap was taken and
// the retry appended a second time.
func TestTieredFollowerRestoresProducerState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := tieredFollowerCutOff(t)
		leader := c.replica(1)
		const pid, bumped = 7, 8
		build := func(pid int64, epoch int16, seq int32) []byte {
			return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(1, 10)})
		}
		idempotent := func(seq int32) []byte { return build(pid, 0, seq) }
		var last AppendResult
		var err error
		for seq := range int32(5) {
			if last, err = leader.Append(idempotent(seq), 1); err != nil {
				t.Fatal(err)
			}
		}
		// Producer bumped moved to epoch 1: a batch of its epoch 0 is a zombie's.
		for epoch := range int16(2) {
			if _, err := leader.Append(build(bumped, epoch, 0), 1); err != nil {
				t.Fatal(err)
			}
		}
		for range 60 {
			if _, err := leader.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		c.mu.Lock()
		m := c.nodes[1].mgr
		c.mu.Unlock()
		m.uploadOnce(context.Background(), leader, &tierUploadState{tier: leader.Tier(), epoch: -1})
		m.cleanTiered(leader, leader.Tier())
		if local := leader.LogStartOffset(); local <= last.LastOffset || local <= c.replica(2).LogEndOffset() {
			t.Fatalf("leader's local start %d, not past the producer's last batch %d and the follower's log end %d", local, last.LastOffset, c.replica(2).LogEndOffset())
		}

		c.rejoinISR(t)
		c.elect(2, 1, 2)
		synctest.Wait()
		next := c.replica(2)
		if !next.IsLeader() {
			t.Fatal("broker 2 does not lead after its election")
		}
		leo := next.LogEndOffset()
		res, err := next.Append(idempotent(4), 1)
		if err != nil || res.BaseOffset != last.BaseOffset || next.LogEndOffset() != leo {
			t.Errorf("a retry of the producer's last batch on the new leader: offset %d, %v, log end %d -> %d; want the original offset %d, nothing appended",
				res.BaseOffset, err, leo, next.LogEndOffset(), last.BaseOffset)
		}
		if _, err := next.Append(build(bumped, 0, 1), 1); !errors.Is(err, ErrInvalidProducerEpoch) {
			t.Errorf("a batch of a producer's older epoch on the new leader: %v, want %v", err, ErrInvalidProducerEpoch)
		}
		if _, err := next.Append(idempotent(8), 1); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Errorf("a gap in the producer's sequences (8 after 4) on the new leader: %v, want %v", err, ErrOutOfOrderSequence)
		}
	})
}

// TestTieredFollowerSurvivesDamagedProducerSnapshot: a follower that starts
// over at a tiered leader's local log start and finds the producer snapshot
// of the remote segment ending there damaged or missing starts over without
// that producer state (logging a warning) and rejoins the ISR, as Kafka's
// does: its ProducerStateManager drops a snapshot that fails its checks
// (CorruptSnapshotException) and starts from an empty state. The old code
// retried for ever, the follower never caught up, and the uploader, for its
// part, already took a damaged snapshot as none.
func TestTieredFollowerSurvivesDamagedProducerSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(ctx context.Context, store remote.Store, key string) error
	}{
		{"damaged", func(ctx context.Context, store remote.Store, key string) error {
			junk := []byte("not a snapshot")
			return store.Put(ctx, key, bytes.NewReader(junk), int64(len(junk)))
		}},
		{"missing", func(ctx context.Context, store remote.Store, key string) error {
			return store.Delete(ctx, key)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := tieredFollowerCutOff(t)
				leader := c.replica(1)
				for i := range int32(60) {
					if _, err := leader.Append(batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, BaseSequence: 2 * i,
						FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				c.mu.Lock()
				m := c.nodes[1].mgr
				c.mu.Unlock()
				ctx := context.Background()
				m.uploadOnce(ctx, leader, &tierUploadState{tier: leader.Tier(), epoch: -1})
				m.cleanTiered(leader, leader.Tier())
				local := leader.LogStartOffset()
				if follower := c.replica(2).LogEndOffset(); local <= follower {
					t.Fatalf("leader's local start %d, not past the follower's log end %d", local, follower)
				}
				keys, err := m.opts.Remote.List(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, k := range keys {
					if strings.HasSuffix(k, ".snapshot") {
						if err := tc.damage(ctx, m.opts.Remote, k); err != nil {
							t.Fatal(err)
						}
						n++
					}
				}
				if n == 0 {
					t.Fatal("no producer snapshot in the store")
				}

				c.rejoinAt(t, local)
			})
		})
	}
}

// rejoinISR reconnects replica 2 and waits, in the bubble's time, until it
// is back in the ISR.
func (c *memCluster) rejoinISR(t *testing.T) {
	t.Helper()
	c.isolate(2, false)
	for deadline := time.Now().Add(time.Minute); !slices.Equal(c.partition().ISR, []int32{1, 2}) && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		synctest.Wait()
	}
	if isr := c.partition().ISR; !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after the follower came back, want [1 2]", isr)
	}
}

// rejoinAt is rejoinISR for a follower that starts over at the leader's
// local start local: its log must start there and agree with the leader's.
func (c *memCluster) rejoinAt(t *testing.T, local int64) {
	t.Helper()
	c.rejoinISR(t)
	if start := c.replica(2).LogStartOffset(); start != local {
		t.Fatalf("follower's local log starts at %d, want the leader's local start %d", start, local)
	}
	c.checkAgreement()
}
