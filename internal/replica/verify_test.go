package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
)

// TestTxnVerificationGuard: a transactional batch that would open its
// producer's transaction is appended only with the guard of a verification
// still outstanding; a marker of the producer in between (its transaction
// ended after the coordinator confirmed it) voids the guard, so a late batch
// cannot open a transaction no coordinator knows.
func TestTxnVerificationGuard(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 7

	if _, err := p.AppendWith(txnBatch(t, pid, 0, 1, true), 1, AppendOpts{Verify: true, Guard: 0}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified batch opening a transaction: %v, want ErrInvalidTxnState", err)
	}
	g := p.StartTxnVerification(pid, 0)
	if g == 0 {
		t.Fatal("no guard for a producer without an open transaction")
	}
	if again := p.StartTxnVerification(pid, 0); again != g {
		t.Fatalf("second verification of the same producer and epoch got guard %d, want the cached %d", again, g)
	}
	if _, err := p.AppendWith(txnBatch(t, pid, 0, 1, true), 1, AppendOpts{Verify: true, Guard: g + 1}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch with another guard: %v, want ErrInvalidTxnState", err)
	}
	mustAppendVerified(t, p, txnBatch(t, pid, 0, 1, true), g) // 0: opens the transaction
	if got := p.StartTxnVerification(pid, 0); got != 0 {
		t.Fatalf("guard %d for a producer whose transaction is open here, want none", got)
	}
	mustAppendVerified(t, p, txnBatch(t, pid, 1, 1, true), 0) // 1: inside it
	if _, err := p.AppendWith(txnBatch(t, pid, 2, 1, false), 1, AppendOpts{Verify: true, Guard: 0}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside the transaction: %v", err)
	}
	mustMarker(t, p, pid, false) // 2: abort

	// Verified before the abort, appended after it: refused.
	g = p.StartTxnVerification(pid, 0)
	mustAppend(t, p, txnBatch(t, 8, 0, 1, true)) // 3: another producer meanwhile
	mustMarker(t, p, pid, false)                 // 4: a marker of pid again (a retried abort)
	end := p.LogEndOffset()
	if _, err := p.AppendWith(txnBatch(t, pid, 2, 1, true), 1, AppendOpts{Verify: true, Guard: g}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch verified before its transaction's marker: %v, want ErrInvalidTxnState", err)
	}
	if p.LogEndOffset() != end || p.InTxnAt(pid, 0) {
		t.Fatal("a refused batch changed the log or opened a transaction")
	}

	// A refused verification is forgotten; a newer epoch replaces the older one.
	g = p.StartTxnVerification(pid, 0)
	p.CancelTxnVerification(pid, g)
	if _, err := p.AppendWith(txnBatch(t, pid, 2, 1, true), 1, AppendOpts{Verify: true, Guard: g}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch with a cancelled guard: %v, want ErrInvalidTxnState", err)
	}
	old := p.StartTxnVerification(pid, 0)
	g = p.StartTxnVerification(pid, 1)
	if g == old {
		t.Fatal("a newer epoch shares the older epoch's guard")
	}
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: 1, Transactional: true}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	mustAppendVerified(t, p, b, g)
	if !p.InTxnAt(pid, 1) {
		t.Fatal("the verified batch at epoch 1 did not open a transaction")
	}
}

// TestTxnVerificationOlderEpochKeepsNewer: a verification started for an
// older epoch than the producer's outstanding one (a zombie's batch) leaves
// that one in place, and so does the zombie's refusal by the coordinator: the
// current producer's verified batch is appended. Kafka keeps one verification
// entry per producer (ProducerStateManager.maybeCreateVerificationStateEntry),
// which an older epoch does not replace. Strata replaced it, and the
// producer's batch was refused with INVALID_TXN_STATE.
func TestTxnVerificationOlderEpochKeepsNewer(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 7
	g := p.StartTxnVerification(pid, 5)
	zombie := p.StartTxnVerification(pid, 4)
	p.CancelTxnVerification(pid, zombie) // the coordinator refused the zombie
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, ProducerEpoch: 5, Transactional: true}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendWith(b, 1, AppendOpts{Verify: true, Guard: g}); err != nil {
		t.Fatalf("the current producer's verified batch: %v", err)
	}
}

// TestTxnVerificationAcrossLeaderEpochs: a verification outlives a new
// leader epoch at which this broker leads on (a reassignment that removes a
// follower moves the epoch): every marker went through this broker, so the
// verified batch goes on. Leadership that went elsewhere in between voids it
// (markers may have been written there).
func TestTxnVerificationAcrossLeaderEpochs(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 7
	lead := func(epoch int32) {
		t.Helper()
		if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: epoch}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}

	g := p.StartTxnVerification(pid, 0)
	lead(1) // the next epoch, this broker leading on
	mustAppendVerified(t, p, txnBatch(t, pid, 0, 1, true), g)
	mustMarker(t, p, pid, true)

	g = p.StartTxnVerification(pid, 0)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	lead(3) // back after broker 2 led at epoch 2
	if _, err := p.AppendWith(txnBatch(t, pid, 1, 1, true), 1, AppendOpts{Verify: true, Guard: g}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch verified before another broker's leadership: %v, want ErrInvalidTxnState", err)
	}
}

func mustAppendVerified(t *testing.T, p *Partition, b []byte, g VerificationGuard) {
	t.Helper()
	if _, err := p.AppendWith(b, 1, AppendOpts{Verify: true, Guard: g}); err != nil {
		t.Fatal(err)
	}
}

// TestCoordinatorAppendVerified: a coordinator's transactional batch (a
// transactional offset commit of an older client, no sequence number) is
// appended with its verification guard as a client's is: refused without
// one, or when the producer's marker came between the verification and the
// append; taken with a valid one. The guard travels to the append in the
// request's context.
func TestCoordinatorAppendVerified(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	const pid = 7
	commit := func() []byte {
		b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: pid, BaseSequence: -1, Transactional: true}, []batch.Record{{Key: []byte("k"), Value: []byte("offset")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := p.AppendAsCoordinator(commit(), AppendOpts{Verify: true, Guard: 0}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified commit opening a transaction: %v, want ErrInvalidTxnState", err)
	}
	g := p.StartTxnVerification(pid, 0)
	mustMarker(t, p, pid, true) // the transaction ended meanwhile
	end := p.LogEndOffset()
	if _, err := p.AppendAsCoordinator(commit(), AppendOpts{Verify: true, Guard: g}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("commit verified before its transaction's marker: %v, want ErrInvalidTxnState", err)
	}
	if p.LogEndOffset() != end {
		t.Fatal("a refused commit changed the log")
	}
	ctx := WithVerificationGuard(context.Background(), p.StartTxnVerification(pid, 0))
	g, ok := VerificationGuardFrom(ctx)
	if !ok || g == 0 {
		t.Fatalf("guard from the context: %d, %v", g, ok)
	}
	if _, ok := VerificationGuardFrom(context.Background()); ok {
		t.Fatal("a guard found in a context without one")
	}
	if _, err := p.AppendAsCoordinator(commit(), AppendOpts{Verify: true, Guard: g}); err != nil {
		t.Fatalf("verified commit: %v", err)
	}
	if p.LogEndOffset() != end+1 {
		t.Fatalf("log ends at %d after the verified commit, want %d", p.LogEndOffset(), end+1)
	}
}

// TestTxnVerificationsExpire: the cleaner forgets a verification started
// longer than producer.id.expiration.ms ago, as Kafka's
// removeExpiredProducers ages out its verification state entries. Strata kept
// one per producer id that started a verification and never appended (a
// refused batch, a client gone), for as long as the partition lived.
func TestTxnVerificationsExpire(t *testing.T) {
	p := newLeaderPartition(t, t.TempDir())
	t.Cleanup(func() { p.close() })
	now := time.Now()
	p.expiry.now = func() time.Time { return now }
	stale := p.StartTxnVerification(7, 0) // never appended
	now = now.Add(50 * time.Minute)
	recent := p.StartTxnVerification(8, 0)

	p.removeExpiredProducers(now.Add(15*time.Minute), time.Hour)
	if _, ok := p.verifications[7]; ok {
		t.Fatal("a verification started 65 minutes ago survived a producer.id.expiration.ms of 1h")
	}
	if _, err := p.AppendWith(txnBatch(t, 7, 0, 1, true), 1, AppendOpts{Verify: true, Guard: stale}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch with an expired guard: %v, want ErrInvalidTxnState", err)
	}
	mustAppendVerified(t, p, txnBatch(t, 8, 0, 1, true), recent)
}
