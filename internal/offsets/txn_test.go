package offsets

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// txnGroup is the test group of the transactional offset tests: it lives in
// partition 0 of newGroupCoordinator's two-partition __consumer_offsets.
const txnGroup = "g1"

// newGroupCoordinator is newTestStore with a group coordinator (two offsets
// partitions) loaded from it; it returns once partition 0 is loaded.
func newGroupCoordinator(t *testing.T) (*group.Coordinator, *Store, *replica.Manager) {
	t.Helper()
	if group.PartitionFor(txnGroup, 2) != 0 {
		t.Fatalf("group %s is not in partition 0", txnGroup)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var s *Store
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{
		OnLeadership: func(p *replica.Partition, leader bool) { s.LeadershipChanged(p, leader) },
	})
	if err != nil {
		t.Fatal(err)
	}
	s = New(m, logger)
	cfg := group.DefaultConfig()
	cfg.OffsetsTopicPartitions = 2
	c := group.New(cfg, s, logger)
	s.SetCoordinator(c)
	if err := m.Apply(testImage(t).WithOffset(1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		m.Close()
		c.Close()
	})
	wait.For(t, "partition 0 loaded", func() bool {
		_, err := c.CommittedOffsets(txnGroup)
		return err == nil || errors.Is(err, group.ErrGroupNotFound)
	})
	return c, s, m
}

// txnOffsetCommit commits offsets (partition of topic t -> offset) of
// txnGroup in producer pid's transaction at epoch and returns the error code
// of the first partition.
func txnOffsetCommit(c *group.Coordinator, pid int64, epoch int16, offsets map[int32]int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = 5, txnGroup, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return c.TxnOffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
}

// commitOffsets commits offsets of txnGroup outside any transaction.
func commitOffsets(t *testing.T, c *group.Coordinator, offsets map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, txnGroup, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, p := range c.OffsetCommit(context.Background(), req).Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("OffsetCommit t/%d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}

// endTxn writes producer pid's marker at epoch (transaction version tv) on
// partition 0, waits for it to be committed and tells the coordinator, as
// WriteTxnMarkers does.
func endTxn(t *testing.T, c *group.Coordinator, m *replica.Manager, pid int64, epoch int16, tv int8, commit bool) {
	t.Helper()
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Timestamp: time.Now().UnixMilli()}, tv)
	if err != nil {
		t.Fatalf("marker of producer %d at epoch %d: %v", pid, epoch, err)
	}
	if err := p.WaitHighWatermark(context.Background(), res.LastOffset+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxnOffsets(0, pid, commit)
}

// committed returns txnGroup's committed offsets of topic t by partition.
func committed(t *testing.T, c *group.Coordinator) map[int32]int64 {
	t.Helper()
	offs, err := c.CommittedOffsets(txnGroup)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, o := range offs {
		out[o.Partition] = o.Offset
	}
	return out
}

// reload unloads partition 0 from the coordinator and replays it from the log.
func reload(t *testing.T, c *group.Coordinator, m *replica.Manager) {
	t.Helper()
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.UnloadPartition(0)
	if err := c.LoadPartitionAt(context.Background(), 0, 0, records(p)); err != nil {
		t.Fatal(err)
	}
}

// TestTxnOffsetCommitFencesZombie: a TxnOffsetCommit of a producer epoch
// older than the producer's on the offsets partition (a zombie: its
// transaction ended with a transaction version 2 marker at the bumped epoch)
// is refused with INVALID_PRODUCER_EPOCH, as Kafka's log refuses the
// coordinator's batch, instead of being held pending under the producer id,
// where the producer's next transaction's commit marker would commit it.
// Live state and a replay agree.
func TestTxnOffsetCommitFencesZombie(t *testing.T) {
	c, _, m := newGroupCoordinator(t)
	const pid = 1
	if code := txnOffsetCommit(c, pid, 0, map[int32]int64{0: 5}); code != 0 {
		t.Fatalf("TxnOffsetCommit at epoch 0: %v", kerr.ErrorForCode(code))
	}
	endTxn(t, c, m, pid, 1, 2, true)
	if code := txnOffsetCommit(c, pid, 0, map[int32]int64{0: 99}); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie TxnOffsetCommit at epoch 0 after the marker at epoch 1: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := txnOffsetCommit(c, pid, 1, map[int32]int64{1: 7}); code != 0 {
		t.Fatalf("TxnOffsetCommit at epoch 1: %v", kerr.ErrorForCode(code))
	}
	endTxn(t, c, m, pid, 2, 2, true)
	want := map[int32]int64{0: 5, 1: 7}
	if got := committed(t, c); !maps.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
	reload(t, c, m)
	if got := committed(t, c); !maps.Equal(got, want) {
		t.Fatalf("committed after a reload %v, want %v", got, want)
	}
}

// TestTxnOffsetsApplyInLogOrder: a committed transaction's offset replaces
// the committed one only if its record is later in the log, as Kafka's
// replayEndTransactionMarker compares the records' offsets: a plain commit
// written after a transaction's pending commit of the same partition stays
// when that transaction commits, and of two transactions' commits of one
// partition the one written last wins, whichever marker comes first. Live
// state and a replay agree.
func TestTxnOffsetsApplyInLogOrder(t *testing.T) {
	c, _, m := newGroupCoordinator(t)
	commit := func(pid int64, offsets map[int32]int64) {
		t.Helper()
		if code := txnOffsetCommit(c, pid, 0, offsets); code != 0 {
			t.Fatalf("TxnOffsetCommit of producer %d: %v", pid, kerr.ErrorForCode(code))
		}
	}
	// t/0: the transaction's commit, then a plain one.
	commit(1, map[int32]int64{0: 10})
	commitOffsets(t, c, map[int32]int64{0: 20})
	endTxn(t, c, m, 1, 1, 2, true)
	// t/1: producer 2's commit, then producer 3's; 3's marker first.
	commit(2, map[int32]int64{1: 1})
	commit(3, map[int32]int64{1: 2})
	endTxn(t, c, m, 3, 1, 2, true)
	endTxn(t, c, m, 2, 1, 2, true)
	// t/2: a plain commit, then the transaction's.
	commitOffsets(t, c, map[int32]int64{2: 5})
	commit(4, map[int32]int64{2: 6})
	endTxn(t, c, m, 4, 1, 2, true)

	want := map[int32]int64{0: 20, 1: 2, 2: 6}
	if got := committed(t, c); !maps.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
	reload(t, c, m)
	if got := committed(t, c); !maps.Equal(got, want) {
		t.Fatalf("committed after a reload %v, want %v", got, want)
	}
}

// TestAbortedTxnOffsetCommitKeepsGroup: a TxnOffsetCommit outside group
// management creates its (simple, Empty) group, which stays when the
// transaction aborts; a replay agrees, as Kafka's replays the transaction's
// offset commit where the log holds it, creating the group, before its abort
// marker drops the offset. A group deleted before the marker stays deleted.
func TestAbortedTxnOffsetCommitKeepsGroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete bool
		want   string // the group's state, as DescribeGroups answers it
	}{
		{"aborted", false, "Empty"},
		{"deleted, then aborted", true, "Dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, m := newGroupCoordinator(t)
			if code := txnOffsetCommit(c, 1, 0, map[int32]int64{0: 5}); code != 0 {
				t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
			}
			if tc.delete {
				resp := c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Groups: []string{txnGroup}})
				if code := resp.Groups[0].ErrorCode; code != 0 {
					t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(code))
				}
			}
			endTxn(t, c, m, 1, 1, 2, false)
			for _, when := range []string{"live", "after a reload"} {
				if when != "live" {
					reload(t, c, m)
				}
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Groups = []string{txnGroup}
				g := c.DescribeGroups(context.Background(), req).Groups[0]
				if g.ErrorCode != 0 || g.State != tc.want {
					t.Errorf("%s: group %v, state %s, want %s", when, kerr.ErrorForCode(g.ErrorCode), g.State, tc.want)
				}
				if g.State == "Dead" {
					continue
				}
				if got := committed(t, c); len(got) != 0 {
					t.Errorf("%s: committed %v, want none", when, got)
				}
			}
		})
	}
}
