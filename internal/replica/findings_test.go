package replica

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
)

// The reliability findings of docs/reliability.md that live in the replication
// layer, each replayed deterministically on a memCluster under synctest. Each
// test says what the old code did.

// TestMemClusterReplicates: the harness itself. Three replicas take acks=all
// writes; every replica follows, and all agree below the high-water mark.
func TestMemClusterReplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		acked, err := c.produce(1, 20)
		if err != nil || len(acked) != 20 {
			t.Fatalf("produced %d, err %v", len(acked), err)
		}
		time.Sleep(time.Second) // a fetch round: followers learn the HWM
		synctest.Wait()
		for id := int32(1); id <= 3; id++ {
			if hwm := c.replica(id).HighWatermark(); hwm != 20 {
				t.Fatalf("replica %d: HWM %d, want 20", id, hwm)
			}
		}
		c.checkAgreement()
	})
}

// TestFindingPowerLossOfEveryReplica (finding 1): every acknowledged record
// survives a power loss of every replica at one instant. The old code created
// the data directories without syncing their parents: the cut took the whole
// tree, and with it every record.
func TestFindingPowerLossOfEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		acked, err := c.produce(1, 20)
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		images := map[int32]*memNode{}
		for id, nd := range c.nodes {
			images[id] = &memNode{mem: nd.mem.CrashClone()}
		}
		c.mu.Unlock()
		for id, img := range images {
			c.stopNode(id)
			c.start(id, img.mem)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		last := acked[len(acked)-1]
		for id := int32(1); id <= 3; id++ {
			if leo := c.replica(id).LogEndOffset(); leo <= last {
				t.Fatalf("replica %d restarted with log end %d; offset %d was acknowledged", id, leo, last)
			}
		}
		if hwm := c.replica(1).HighWatermark(); hwm <= last {
			t.Fatalf("leader's HWM %d after the restart, want past %d", hwm, last)
		}
		c.checkAgreement()
	})
}

// TestFindingFollowerFsyncFailureIsNotCounted (finding 2): a follower whose
// fsync failed must not count towards acks=all for records it never synced.
// The old fetcher, after the failed fsync, fetched again from its log end: the
// leader took that as durable, acknowledged records only in the follower's
// page cache, and the follower, still in the ISR, came back from a power loss
// without them. Now a failed log stops fetching, the leader's HWM waits, and
// the lag limit takes the follower out of the ISR.
func TestFindingFollowerFsyncFailureIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 2, 1)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.nodes[2].fsync.Enable()
		c.mu.Unlock()
		// produce waits 5s for each acknowledgement, less than the lag limit:
		// the follower is still in the ISR when it stops.
		acked, _ := c.produce(1, 5)
		synctest.Wait()
		// Every in-sync replica must hold every acknowledged record on disk.
		ip := c.partition()
		if !slices.Contains(ip.ISR, 2) {
			t.Fatalf("the follower left the ISR %v before the lag limit", ip.ISR)
		}
		end := int64(5)
		if len(acked) > 0 {
			end = acked[len(acked)-1] + 1
		}
		for _, id := range ip.ISR {
			c.mu.Lock()
			synced := c.nodes[id].mem.CrashClone()
			c.mu.Unlock()
			l, err := storage.Open(synced, "/data/logs/t-0", storage.Config{})
			if err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()
			l.Close()
			if leo < end {
				t.Fatalf("in-sync replica %d has synced up to %d; acknowledged up to %d (ISR %v)", id, leo, end, ip.ISR)
			}
		}
		// The follower does not fetch again until it restarts: the lag limit
		// takes it out of the ISR.
		time.Sleep(2 * c.lagMax)
		synctest.Wait()
		ip = c.partition()
		if slices.Contains(ip.ISR, 2) {
			t.Fatalf("the follower whose log failed is still in the ISR %v", ip.ISR)
		}
	})
}

// TestFindingDeposedLeaderRejoinsISR (finding 3): a leader deposed before it
// wrote at its epoch rejoins the ISR of its successor. The old Log.Truncate at
// the log end returned early and kept the deposed epoch: the follower sent it as
// LastFetchedEpoch, the leader answered with the same divergence every fetch,
// and the follower never caught up.
func TestFindingDeposedLeaderRejoinsISR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 1)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.elect(2, 1, 2, 3) // 2 leads epoch 1 and writes nothing...
		synctest.Wait()
		c.elect(3, 1, 3) // ...and is fenced out of the ISR at epoch 2
		time.Sleep(2 * c.lagMax)
		synctest.Wait()
		if isr := c.partition().ISR; !slices.Contains(isr, 2) {
			t.Fatalf("the deposed leader never rejoined: ISR %v", isr)
		}
		if _, err := c.produce(3, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.checkAgreement()
	})
}

// TestFindingFailedLeaderLogResigns (finding 4): a leader whose log failed
// hands leadership to another in-sync replica at once. The old code kept it:
// every produce answered KAFKA_STORAGE_ERROR until an operator restarted the
// broker.
func TestFindingFailedLeaderLogResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		acked, start := failLeaderLog(t, c, nil)
		synctest.Wait()
		ip := c.partition()
		if ip.Leader == 1 || ip.LeaderEpoch != 1 {
			t.Fatalf("leadership did not move: leader %d at epoch %d", ip.Leader, ip.LeaderEpoch)
		}
		if d := time.Since(start); d >= c.lagMax {
			t.Fatalf("leadership moved after %v, not at once", d)
		}
		more, err := c.produce(ip.Leader, 5)
		if err != nil && !errors.Is(err, ErrNotEnoughReplicas) {
			t.Fatal(err)
		}
		if len(more) > 0 && more[0] <= acked[len(acked)-1] {
			t.Fatalf("the new leader reused offset %d", more[0])
		}
	})
}

// failLeaderLog has leader 1 acknowledge five records, then fails its fsyncs
// (calling also, if not nil, under c.mu) and checks that its next produce is
// not acknowledged; it returns the acknowledged offsets and when the fsyncs
// began to fail.
func failLeaderLog(t *testing.T, c *memCluster, also func()) ([]int64, time.Time) {
	t.Helper()
	acked, err := c.produce(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	if also != nil {
		also()
	}
	c.nodes[1].fsync.Enable()
	c.mu.Unlock()
	start := time.Now()
	if _, err := c.produce(1, 1); err == nil {
		t.Fatal("a write acknowledged by a leader whose fsync failed")
	}
	return acked, start
}

// TestFailedLeaderRetriesResignSoon: a failed log's leader whose resignation
// met no controller able to apply it (NOT_CONTROLLER while the controller
// quorum changes leader) proposes it again within a few seconds, not at the ISR
// maintenance's next tick (half the replica lag limit, 15 s by default). The
// chaos suite's TestFailedLeaderLogResigns met this: the one proposal was
// refused during a controller election and the leader kept answering
// KAFKA_STORAGE_ERROR.
func TestFailedLeaderRetriesResignSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		_, start := failLeaderLog(t, c, func() { c.isrErr = kerr.NotController })
		synctest.Wait()
		c.mu.Lock()
		refusals := c.isrRefusals
		c.isrErr = nil
		c.mu.Unlock()
		if refusals == 0 {
			t.Fatal("the failed leader proposed no resignation")
		}
		if ip := c.partition(); ip.Leader != 1 {
			t.Fatalf("leadership moved to %d while no controller could apply it", ip.Leader)
		}
		deadline := start.Add(c.lagMax / 4)
		for time.Now().Before(deadline) && c.partition().Leader == 1 {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		if ip := c.partition(); ip.Leader == 1 {
			t.Fatalf("leadership still on the failed log's broker %v after its refused resignation (the maintenance tick is %v)", time.Since(start), c.lagMax/2)
		}
		t.Logf("leadership moved %v after the failure, %d proposals refused meanwhile", time.Since(start), refusals)
	})
}

// TestFindingJoiningFollowerHoldsHighWatermark (finding 8): from the moment a
// leader proposes adding a follower to the ISR, the high-water mark waits for
// that follower too (Kafka's maximal ISR). The old leader kept computing it
// over the committed ISR until the controller's answer, so it acknowledged
// records the joining follower did not hold; the controller then committed
// the expansion and, the reassignment's whole target being in sync,
// completed it in the same change and made the new replica leader. The
// acknowledged records were truncated from every other replica (in the chaos
// run, a transaction's commit marker). Here the partition moves from 1, 2 to
// 3, 2: replica 3 catches up, the controller holds the leader's proposal, 3
// stops fetching and leader 1 takes writes; then the proposal commits.
func TestFindingJoiningFollowerHoldsHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemClusterOn(t, 3, []int32{1, 2}, 1)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		held, release := c.holdISR()
		c.reassign(3, 2)
		for deadline := time.Now().Add(time.Minute); held() == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if held() == 0 {
			t.Fatal("the leader proposed no expansion once replica 3 caught up")
		}
		c.isolate(3, true)
		acked, _ := c.produce(1, 3)
		release()
		synctest.Wait()

		ip := c.partition()
		if ip.Leader != 3 || !slices.Equal(ip.Replicas, []int32{3, 2}) {
			t.Fatalf("the reassignment did not complete: replicas %v, leader %d", ip.Replicas, ip.Leader)
		}
		leo := c.replica(3).LogEndOffset()
		if len(acked) > 0 && acked[len(acked)-1] >= leo {
			t.Fatalf("acknowledged offsets %v, but the new leader 3 holds up to %d", acked, leo)
		}
		c.isolate(3, false)
		more, err := c.produce(3, 2)
		if err != nil {
			t.Fatalf("the new leader takes no writes: %v", err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.checkAgreement()
		if more[0] < leo {
			t.Fatalf("the new leader wrote at %d, below its log end %d", more[0], leo)
		}
	})
}

// TestFindingNewLeaderListsNoLowerLatest (finding 5): ListOffsets "latest"
// never answers below an offset a client was already given. A new leader
// knows only the high-water mark its old leader last sent it, which can lag
// the one that leader served: here follower 2 holds offsets 0-9 and its fetch
// at 10 reaches leader 1 (which then acknowledges offset 9 and answers
// "latest" 10), but the answer carrying the new high-water mark is lost.
// Leader 1 is cut off and 2 takes over with a high-water mark of 9. The old
// code answered "latest" 9 there; Kafka, and now Strata, answer OFFSET_NOT_AVAILABLE until
// the new leader's high-water mark reaches the start of its epoch.
func TestFindingNewLeaderListsNoLowerLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 2, 2)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.loseAnswers(2, 10)
		acked, err := c.produce(1, 5)
		if err != nil || len(acked) != 5 {
			t.Fatalf("produced %v, err %v", acked, err)
		}
		served, _, _, _, err := c.replica(1).ListOffset(context.Background(), LatestTimestamp, ReadUncommitted)
		if err != nil || served != 10 {
			t.Fatalf("old leader's latest: %d, %v; want 10", served, err)
		}
		synctest.Wait()
		if got, leo := c.replica(2).HighWatermark(), c.replica(2).LogEndOffset(); got >= served || leo != served {
			t.Fatalf("follower 2: HWM %d, log end %d; the test wants it to hold %d records and know a lower HWM", got, leo, served)
		}

		c.isolate(1, true)
		c.elect(2, 1, 2)
		synctest.Wait()
		p2 := c.replica(2)
		if !p2.IsLeader() {
			t.Fatal("replica 2 did not take over")
		}
		off, _, _, found, err := p2.ListOffset(context.Background(), LatestTimestamp, ReadUncommitted)
		if err == nil && found && off < served {
			t.Fatalf("new leader answered latest %d, below the %d its predecessor served", off, served)
		}
		if !errors.Is(err, ErrOffsetNotAvailable) {
			t.Fatalf("new leader's latest before its follower fetched: %d, %v; want ErrOffsetNotAvailable", off, err)
		}

		// Once follower 1 fetches from the new leader, its HWM reaches the
		// start of its epoch and "latest" is known again.
		c.isolate(1, false)
		c.loseAnswers(2, -1)
		time.Sleep(time.Second)
		synctest.Wait()
		off, _, _, found, err = p2.ListOffset(context.Background(), LatestTimestamp, ReadUncommitted)
		if err != nil || !found || off != 10 {
			t.Fatalf("new leader's latest after its follower fetched: %d, %v, %v; want 10", off, found, err)
		}
	})
}

// TestNewReplicaStartsInsideLogStartBatch: DeleteRecords may set the log start
// offset between the records of one batch, and a replica that starts from the
// leader's log start then gets that whole batch, which begins below it. Found
// by FuzzReplication: the old code refused the batch ("batches do not continue
// the log") on every fetch, so a replica added by a reassignment never caught
// up and the move never completed. Kafka's follower starts its empty log at
// the batch's base offset, and so does Strata's now; it then follows the
// leader's log start.
func TestNewReplicaStartsInsideLogStartBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemClusterOn(t, 3, []int32{1, 2}, 1)
		leader := c.replica(1)
		res, err := leader.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(3, 8)}), -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.WaitHighWatermark(context.Background(), res.LastOffset+1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := leader.DeleteRecords(1); err != nil {
			t.Fatal(err)
		}
		c.reassign(1, 2, 3)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		ip := c.partition()
		if !slices.Contains(ip.ISR, 3) || !slices.Equal(ip.Replicas, []int32{1, 2, 3}) {
			t.Fatalf("replica 3 never caught up: replicas %v, ISR %v, its log end %d", ip.Replicas, ip.ISR, c.replica(3).LogEndOffset())
		}
		for id := int32(2); id <= 3; id++ {
			if start, end := c.replica(id).LogStartOffset(), c.replica(id).LogEndOffset(); start != 1 || end != 3 {
				t.Fatalf("replica %d holds [%d, %d), want [1, 3) as the leader", id, start, end)
			}
		}
		c.checkAgreement()
	})
}

// TestFollowersFollowDeletedRecords: records deleted on the leader
// (DeleteRecords) are deleted on its followers too, as in Kafka, so a new
// leader does not serve them again. The old followers kept their own log
// start, and a failover brought deleted records back.
func TestFollowersFollowDeletedRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		if _, err := c.produce(1, 6); err != nil {
			t.Fatal(err)
		}
		if _, err := c.replica(1).DeleteRecords(4); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a fetch round: the followers learn the leader's log start
		synctest.Wait()
		c.elect(2, 2, 3)
		synctest.Wait()
		if start := c.replica(2).LogStartOffset(); start != 4 {
			t.Fatalf("the new leader's log starts at %d; records below 4 were deleted", start)
		}
		if _, err := c.replica(2).Read(0, 1<<20, ReadUncommitted); !errors.Is(err, storage.ErrOffsetOutOfRange) {
			t.Fatalf("reading deleted offset 0 from the new leader: %v, want out of range", err)
		}
	})
}

// TestStaleFetchOfRemovedReplicaIsFenced: a fetch a replica sent before a
// reassignment removed it, answered after the replica was added back empty,
// must not count as the new replica's progress.
//
// The old code kept the leader epoch when a reassignment removed a follower
// and the leader stayed. A removed replica's fetch still long-polling at the
// leader then passed the epoch check when it woke after the replica was added
// back (same epoch, same broker epoch), and the leader credited the new, empty
// replica with the old one's log end: it joined the ISR holding nothing, and
// acks=all counted it. Found by FuzzReplication. Removing a replica now moves
// the leader epoch on (as Kafka's controller does), and the leader checks a
// fetch's epoch under the lock that records its progress.
func TestStaleFetchOfRemovedReplicaIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemClusterOn(t, 4, []int32{1, 2, 3}, 2)
		acked, err := c.produce(1, 5)
		if err != nil || len(acked) != 5 {
			t.Fatalf("acknowledged %v: %v", acked, err)
		}
		// Broker 3's next fetch, as its fetcher would send it now.
		stale := FollowerFetchRequest{ReplicaID: 3, BrokerEpoch: 1, LeaderEpoch: c.partition().LeaderEpoch,
			FetchOffset: 5, LastFetchedEpoch: c.replica(3).log.LatestEpoch(), MaxBytes: 1 << 20}

		c.reassign(1, 2, 4) // 4 catches up, and 3 leaves
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if ip := c.partition(); !slices.Equal(ip.Replicas, []int32{1, 2, 4}) {
			t.Fatalf("the reassignment away from 3 did not complete: replicas %v, ISR %v", ip.Replicas, ip.ISR)
		}
		c.isolate(3, true) // added back, 3 cannot catch up by itself
		c.reassign(1, 2, 4, 3)
		synctest.Wait()

		_, err = c.replica(1).ReadForFollower(stale, time.Now())
		if !errors.Is(err, metadata.ErrFencedLeaderEpoch) {
			t.Errorf("the removed replica's fetch at leader epoch %d: %v, want FENCED_LEADER_EPOCH (the partition is at %d)",
				stale.LeaderEpoch, err, c.partition().LeaderEpoch)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if ip := c.partition(); slices.Contains(ip.ISR, 3) {
			t.Fatalf("replica 3, added back empty, joined the ISR %v on its removed incarnation's fetch; its log ends at %d",
				ip.ISR, c.replica(3).LogEndOffset())
		}
	})
}
